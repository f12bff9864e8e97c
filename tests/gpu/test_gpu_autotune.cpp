// The autotuner on the GPU: tuning the attention forward picks a config from the candidates, leaves the
// user's output untouched (poison survives tuning), gives correct outputs with the winner, and a second
// tuning is a cache hit (memory, then disk after forgetting the process's winners). Also the C ABI on
// strided PyTorch-style layouts and the autotuned matmul, with the configs they report
// (tilejit_last_launch_config). Each test uses its own cache directory.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "kernel_checks.h"
#include "kernels/autotune_prior.h"
#include "kernels/launch_options.h"
#include "runtime/runtime.h"
#include "test_runtime_scoped_env.h"
#include "tilejit/autotune.h"
#include "tilejit/c_api.h"
#include "tilejit/device.h"
#include "tools/attention_check.h"

using namespace tilejit;
using namespace tilejit::testing;
namespace fs = std::filesystem;

namespace {

std::string fresh_cache_dir() {
  std::random_device rd;
  return (fs::temp_directory_path() / ("tilejit-gpu-autotune-" + std::to_string(rd()))).string();
}

DevicePtr ptr(const Buffer &b) { return DevicePtr{b.address(), b.bytes()}; }

// Max relative Frobenius error of sampled rows against float64 (q/k/v as floats in [b, h, s, d] order).
double attention_error(const std::vector<float> &q, const std::vector<float> &k, const std::vector<float> &v,
                       const std::vector<float> &got, const attention::Shape &s, bool causal) {
  std::vector<float> rows;
  std::vector<double> refs;
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h)
      for (int i : {0, 1, s.seqlen_q / 3, s.seqlen_q / 2 + 7, s.seqlen_q - 1}) {
        auto r = tools::reference_row(q, k, v, s.heads, s.seqlen_q, s.seqlen_k, s.head_dim,
                                      1.0 / std::sqrt(double(s.head_dim)), causal, b, h, i);
        size_t row = (size_t(b) * s.heads + h) * s.seqlen_q + i;
        for (int d = 0; d < s.head_dim; ++d) {
          rows.push_back(got[row * s.head_dim + d]);
          refs.push_back(r.out[d]);
        }
      }
  return rel_error(rows, refs);
}

}  // namespace

TEST_CASE("autotuning attention: a winner, restored outputs, correct results, cache hits", "[gpu][autotune]") {
  std::string dir = fresh_cache_dir();
  ScopedEnv env("TILEJIT_CACHE_DIR", dir);
  autotune::clear_memory_cache();
  for (bool causal : {false, true}) {
    attention::Shape s{2, 3, 384, 384, 64};
    DType dt = DType::bf16;
    size_t nq = size_t(s.batch) * s.heads * s.seqlen_q * s.head_dim, nl = size_t(s.batch) * s.heads * s.seqlen_q;
    auto q = random_values(nq, dt), k = random_values(nq, dt), v = random_values(nq, dt);
    auto bq = upload_as(q, dt, Backend::GPU), bk = upload_as(k, dt, Backend::GPU), bv = upload_as(v, dt, Backend::GPU);
    Buffer out(nq * 2, Backend::GPU), lse(nl * 4, Backend::GPU);
    out.fill_bytes(0xab);
    lse.fill_bytes(0xcd);
    Stream stream;
    attention::Options opt;
    opt.causal = causal;
    opt.dtype = dt;
    opt.backend = Backend::GPU;
    opt.stream = &stream;
    auto st = attention::contiguous_strides(s.heads, s.seqlen_q, s.head_dim);

    autotune::Result r = attention::tune(ptr(bq), ptr(bk), ptr(bv), ptr(out), ptr(lse), s, st, st, st, st, opt);
    stream.synchronize();
    INFO(autotune::format_result(autotune::Tunable{.kernel = "attention_fwd"}, r));
    REQUIRE(r.source == "tuned");
    // 36 tile configs (+ 18 at 8 warps again at two programs per SM and 9 at 4 warps, BLOCK_M=64, at four,
    // unless TILEJIT_AUTOTUNE_MORE_PER_SM=0); on sm_90a each again with TMA, and warp-specialized where a producer
    // warpgroup fits (kernels/launch_options.h).
    const size_t tiles = kernels::more_per_sm_candidates() ? 63u : 36u;
    attention::Options on_device = opt;
    on_device.arch = device_info().arch;
    std::vector<autotune::Config> tile_configs =
        autotune::cartesian({{"BLOCK_M", {64, 128}}, {"BLOCK_N", {32, 64, 128}}}, {4, 8}, {1, 2, 3});
    if (kernels::more_per_sm_candidates()) tile_configs = kernels::with_more_per_sm(std::move(tile_configs));
    REQUIRE(tile_configs.size() == tiles);
    REQUIRE(r.trials.size() == kernels::with_copy_methods_of(on_device, tile_configs).size());
    CHECK(r.best_ms > 0);
    int ok = 0;
    size_t compiled = 0;
    for (const auto &t : r.trials) {
      ok += t.status == "ok";
      compiled += t.compile_ms >= 0;
      if (t.status == "ok") CHECK(t.compiled.spill_stores >= 0);  // the driver's log reported spills
    }
    CHECK(ok >= 1);
    // Where a prior exists (the H200), only its configs are compiled: none of d=64's is over its estimate.
    auto prior = kernels::attention_prior(device_info().arch, s.head_dim, autotune::pow2_bucket(s.seqlen_k),
                                          kernels::more_per_sm_candidates());
    if (!prior.empty() && !autotune::full_search({})) CHECK(compiled == prior.size());
    const autotune::Trial *winner = nullptr;
    for (const auto &t : r.trials)
      if (t.config == r.best) winner = &t;
    REQUIRE(winner);
    CHECK(winner->finalist);
    bool winner_in_prior = std::find(prior.begin(), prior.end(), r.best) != prior.end();
    if (!winner_in_prior && !autotune::full_search({})) CHECK_FALSE(winner->compiled.spills());
    CHECK(fs::exists(r.cache_file));
    int bm = r.best.get("BLOCK_M"), bn = r.best.get("BLOCK_N");
    CHECK((bm == 64 || bm == 128));
    CHECK((bn == 32 || bn == 64 || bn == 128));

    // Tuning launched the kernel many times into out/lse; the poison must be back.
    auto out_bytes = out.download_as<uint8_t>(nq * 2);
    auto lse_bytes = lse.download_as<uint8_t>(nl * 4);
    size_t changed = 0;
    for (auto b : out_bytes) changed += b != 0xab;
    for (auto b : lse_bytes) changed += b != 0xcd;
    CHECK(changed == 0);

    // Second tuning: in-process winner; after forgetting it, the disk entry.
    CHECK(attention::tune(ptr(bq), ptr(bk), ptr(bv), ptr(out), ptr(lse), s, st, st, st, st, opt).source == "memory");
    autotune::clear_memory_cache();
    auto again = attention::tune(ptr(bq), ptr(bk), ptr(bv), ptr(out), ptr(lse), s, st, st, st, st, opt);
    CHECK(again.source == "disk");
    CHECK(again.best == r.best);

    // forward with autotune uses the winner and is correct.
    opt.autotune = true;
    attention::forward(bq, bk, bv, out, lse, s, opt);
    stream.synchronize();
    double err = attention_error(q, k, v, download_as_float(out, nq, dt), s, causal);
    INFO("autotuned attention rel error " << err << " with " << r.best.str());
    CHECK(err <= tolerance(dt));
  }
  fs::remove_all(dir);
}

TEST_CASE("C ABI attention on a [batch, seq, heads, dim] layout, lse optional", "[gpu][autotune][c_api]") {
  std::string dir = fresh_cache_dir();
  ScopedEnv env("TILEJIT_CACHE_DIR", dir);
  attention::Shape s{2, 4, 200, 200, 128};
  DType dt = DType::f16;
  size_t n = size_t(s.batch) * s.heads * s.seqlen_q * s.head_dim;
  // Values in [b, h, s, d] order for the reference; stored on the device in [b, s, h, d] order.
  auto q = random_values(n, dt), k = random_values(n, dt), v = random_values(n, dt);
  auto to_bshd = [&](const std::vector<float> &x) {
    std::vector<float> y(x.size());
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h)
        for (int i = 0; i < s.seqlen_q; ++i)
          for (int d = 0; d < s.head_dim; ++d)
            y[((size_t(b) * s.seqlen_q + i) * s.heads + h) * s.head_dim + d] =
                x[((size_t(b) * s.heads + h) * s.seqlen_q + i) * s.head_dim + d];
    return y;
  };
  auto bq = upload_as(to_bshd(q), dt, Backend::GPU), bk = upload_as(to_bshd(k), dt, Backend::GPU),
       bv = upload_as(to_bshd(v), dt, Backend::GPU);
  Buffer out(n * 2, Backend::GPU);
  int64_t st[4] = {int64_t(s.seqlen_q) * s.heads * s.head_dim, s.head_dim, int64_t(s.heads) * s.head_dim, 1};
  auto dptr = [](const Buffer &b) { return reinterpret_cast<void *>(uintptr_t(b.address())); };
  for (int autotune : {0, 1}) {
    out.fill_bytes(0xff);
    int rc = tilejit_attention_forward(dptr(bq), dptr(bk), dptr(bv), dptr(out), nullptr, TILEJIT_DTYPE_F16, s.batch,
                                       s.heads, s.seqlen_q, s.seqlen_k, s.head_dim, st, st, st, st, 1, 0.f, autotune,
                                       nullptr);
    INFO(tilejit_last_error());
    REQUIRE(rc == TILEJIT_OK);
    auto got_bshd = download_as_float(out, n, dt);
    // Back to [b, h, s, d] for the reference comparison.
    std::vector<float> got(n);
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h)
        for (int i = 0; i < s.seqlen_q; ++i)
          for (int d = 0; d < s.head_dim; ++d)
            got[((size_t(b) * s.heads + h) * s.seqlen_q + i) * s.head_dim + d] =
                got_bshd[((size_t(b) * s.seqlen_q + i) * s.heads + h) * s.head_dim + d];
    for (float x : got_bshd) REQUIRE(std::isfinite(x));
    double err = attention_error(q, k, v, got, s, true);
    INFO("C ABI strided attention (autotune " << autotune << ") rel error " << err);
    CHECK(err <= tolerance(dt));

    // The reported config: the library's defaults without tuning, the autotuner's winner with it (the same
    // one attention::tune finds in its cache for this shape).
    tilejit_launch_config cfg;
    REQUIRE(tilejit_last_launch_config(&cfg) == TILEJIT_OK);
    CHECK(std::string(cfg.kernel) == "attention_fwd");
    CHECK(cfg.autotuned == autotune);
    if (autotune) {
      Buffer lse(size_t(s.batch) * s.heads * s.seqlen_q * 4, Backend::GPU);
      attention::Options opt;
      opt.causal = true;
      opt.dtype = dt;
      opt.backend = Backend::GPU;
      attention::Strides sst{st[0], st[1], st[2], st[3]};
      autotune::Result r = attention::tune(ptr(bq), ptr(bk), ptr(bv), ptr(out), ptr(lse), s, sst, sst, sst, sst, opt);
      CHECK(r.source == "memory");
      CHECK(cfg.block_m == r.best.get("BLOCK_M"));
      CHECK(cfg.block_n == r.best.get("BLOCK_N"));
      CHECK(cfg.num_warps == r.best.num_warps);
      CHECK(cfg.num_stages == r.best.num_stages);
      CHECK(cfg.min_ctas_per_sm == r.best.get_or("MIN_CTAS", 0));
      // The copy method it picked, as it ran (a producer warpgroup only where one fits).
      const bool ws = r.best.get_or("WARP_SPECIALIZE", 0) &&
                      runtime::warp_specialization_fits(r.best.num_warps, r.best.get_or("MIN_CTAS", 0));
      CHECK(cfg.copy_method == (ws ? 2 : r.best.get_or("WARP_SPECIALIZE", 0) || r.best.get_or("TMA", 0) ? 1 : 0));
    } else {
      attention::Options defaults;
      CHECK((cfg.block_m == defaults.block_m && cfg.block_n == defaults.block_n &&
             cfg.num_warps == defaults.num_warps && cfg.num_stages == defaults.num_stages));
    }
  }

  tilejit_compile_stats stats;
  REQUIRE(tilejit_attention_compile(TILEJIT_DTYPE_BF16, 64, 1, 1024, 64, 64, 4, 1, &stats) == TILEJIT_OK);
  CHECK(std::string(stats.source).size() > 0);
  CHECK(stats.total_ms >= stats.load_ms);
  fs::remove_all(dir);
}

TEST_CASE("C ABI matmul (autotuned) is correct", "[gpu][autotune][c_api]") {
  std::string dir = fresh_cache_dir();
  ScopedEnv env("TILEJIT_CACHE_DIR", dir);
  int M = 256, N = 192, K = 128;
  DType dt = DType::bf16;
  auto a = random_values(size_t(M) * K, dt), b = random_values(size_t(K) * N, dt);
  auto ba = upload_as(a, dt, Backend::GPU), bb = upload_as(b, dt, Backend::GPU);
  Buffer c(size_t(M) * N * 2, Backend::GPU);
  c.fill_bytes(0xff);
  auto dptr = [](const Buffer &x) { return reinterpret_cast<void *>(uintptr_t(x.address())); };
  int rc = tilejit_matmul(dptr(ba), dptr(bb), dptr(c), M, N, K, TILEJIT_DTYPE_BF16, nullptr);
  INFO(tilejit_last_error());
  REQUIRE(rc == TILEJIT_OK);
  double err = rel_error(download_as_float(c, size_t(M) * N, dt), ref_matmul(a, b, M, N, K));
  INFO("autotuned matmul rel error " << err);
  CHECK(err <= tolerance(dt));
  // The reported config is one of the matmul tuner's candidates (BLOCK_M ∈ {64,128}, BLOCK_N ∈ {64,128,256},
  // BLOCK_K ∈ {32,64}, 4 or 8 warps, 1-4 stages).
  tilejit_launch_config cfg;
  REQUIRE(tilejit_last_launch_config(&cfg) == TILEJIT_OK);
  CHECK(std::string(cfg.kernel) == "matmul");
  CHECK(cfg.autotuned == 1);
  CHECK((cfg.block_m == 64 || cfg.block_m == 128));
  CHECK((cfg.block_n == 64 || cfg.block_n == 128 || cfg.block_n == 256));
  CHECK((cfg.block_k == 32 || cfg.block_k == 64));
  CHECK((cfg.num_warps == 4 || cfg.num_warps == 8));
  CHECK((cfg.num_stages >= 1 && cfg.num_stages <= 4));
  fs::remove_all(dir);
}
