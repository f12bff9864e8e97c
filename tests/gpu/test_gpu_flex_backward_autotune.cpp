// The flex backward's autotuner on the GPU (ctest label `gpu`): tuned gradients match float64 (with and without
// atomics, each mode its own key), a learnable capture's gradient and dq, dk, dv end as one untuned call leaves
// them (the tuning launches add nothing), tuning alone restores every buffer it wrote, a second call takes the
// in-process memo, and the C ABI reports the tuned config.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <numeric>

#include <fmt/format.h>
#include <unistd.h>

#include "flex_backward_checks.h"
#include "kernels/flex/flex_backward.h"
#include "test_runtime_scoped_env.h"
#include "tilejit/autotune.h"
#include "tilejit/c_api.h"

using namespace tilejit;
using namespace tilejit::testing;
namespace fs = std::filesystem;

namespace {

std::string empty_dir(const char *name) {
  const std::string dir = (fs::temp_directory_path() / fmt::format("tilejit-{}-{}", name, ::getpid())).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A cache directory of the test's own, so that the first call per key tunes.
struct FreshCache {
  std::string dir;
  ScopedEnv env;
  explicit FreshCache(const char *name) : dir(empty_dir(name)), env("TILEJIT_CACHE_DIR", dir) {
    autotune::clear_memory_cache();
  }
  ~FreshCache() { fs::remove_all(dir); }
  size_t entries() const {
    size_t n = 0;
    for (const auto &e : fs::directory_iterator(dir)) n += e.path().filename().string().rfind("autotune-", 0) == 0;
    return n;
  }
  void forget_entries() const {
    for (const auto &e : fs::directory_iterator(dir))
      if (e.path().filename().string().rfind("autotune-", 0) == 0) fs::remove(e.path());
  }
};

DevicePtr dp(const Buffer &b) { return DevicePtr{b.address(), b.bytes()}; }

double norm(const std::vector<float> &x) {
  return std::sqrt(std::accumulate(x.begin(), x.end(), 0.0, [](double a, float e) { return a + double(e) * e; }));
}

// One problem on fixed inputs: causal ALiBi whose slopes are learnable, its forward run once (untuned).
struct Problem {
  static constexpr int B = 2, Hq = 4, Hkv = 2, S = 300, D = 64;
  static constexpr DType dt = DType::bf16;
  attention::FlexShape s{.batch = B, .heads_q = Hq, .heads_kv = Hkv, .seqlen_q = S, .seqlen_k = S, .head_dim_qk = D};
  size_t nq = size_t(B) * Hq * S * D, nk = size_t(B) * Hkv * S * D;
  Buffer q = upload_as(random_values(nq, dt), dt, Backend::GPU), k = upload_as(random_values(nk, dt), dt, Backend::GPU);
  Buffer v = upload_as(random_values(nk, dt), dt, Backend::GPU);
  Buffer dout = upload_as(random_values(nq, dt), dt, Backend::GPU);
  Buffer out{nq * 2, Backend::GPU}, lse{size_t(B) * Hq * S * 4, Backend::GPU};
  Buffer dq{nq * 2, Backend::GPU}, dk{nk * 2, Backend::GPU}, dv{nk * 2, Backend::GPU};
  Buffer slopes{size_t(Hq) * 4, Backend::GPU}, slopes_grad{size_t(Hq) * 4, Backend::GPU};
  // Where the slopes' gradient starts: the backward adds into it.
  const std::vector<float> grad_start{0.5f, -0.25f, 0.f, 1.f};
  attention::FlexOptions opt;

  Problem() {
    slopes.upload(attention::alibi_slopes(Hq));
    opt.score_mod = attention::alibi(capture(slopes, DType::f32, slopes_grad));
    opt.mask = attention::causal(attention::Align::BottomRight);
    opt.backend = Backend::GPU;
    attention::flex_forward(q, k, v, out, lse, s, opt);
  }
  struct Grads {
    std::vector<float> dq, dk, dv, slopes;  // slopes: this call's gradient (what it added)
  };
  // One backward from poisoned gradients and the slopes' gradient at grad_start.
  Grads backward(bool tune) {
    for (Buffer *b : {&dq, &dk, &dv}) b->fill_bytes(0xff);
    slopes_grad.upload(grad_start);
    attention::FlexOptions o = opt;
    o.autotune = tune;
    attention::flex_backward(q, k, v, out, lse, dout, dq, dk, dv, s, o);
    Grads g{download_as_float(dq, nq, dt), download_as_float(dk, nk, dt), download_as_float(dv, nk, dt),
            slopes_grad.download_as<float>(size_t(Hq))};
    for (size_t h = 0; h < g.slopes.size(); ++h) g.slopes[h] -= grad_start[h];
    return g;
  }
};

std::vector<double> widened(const std::vector<float> &x) { return {x.begin(), x.end()}; }

}  // namespace

TEST_CASE("autotuned flex_backward: gradients match float64, each atomics mode tuned under its own key",
          "[gpu][autotune][flex][backward]") {
  FreshCache cache("flex-bwd-tune");
  size_t keys = 0;
  for (int d : {64, 128}) {
    for (bool atomics : {false, true}) {
      INFO("head dim " << d << (atomics ? ", atomics" : ""));
      FlexCase c;
      c.shape = {.batch = 2, .heads_q = 4, .heads_kv = 2, .seqlen_q = 300, .seqlen_k = 333, .head_dim_qk = d};
      c.dtype = DType::bf16;
      attention::FlexOptions o;
      o.autotune = true;
      o.atomics = atomics;
      o.mask = attention::causal(attention::Align::BottomRight);
      require_backward_matches(
          run_backward_case(Backend::GPU, c, o, {{}, band_visible({-1, 0, attention::Align::BottomRight})}), c.dtype);
      CHECK(cache.entries() == ++keys);
    }
  }
}

TEST_CASE("autotuned flex_backward: a learnable capture's gradient and dq, dk, dv as one untuned call leaves them",
          "[gpu][autotune][flex][backward]") {
  FreshCache cache("flex-bwd-learnable");
  Problem p;
  const Problem::Grads untuned = p.backward(false);
  const Problem::Grads tuned = p.backward(true);
  REQUIRE(cache.entries() == 1);  // it tuned
  const double tol = backward_tolerance(Problem::dt);
  CHECK(rel_error(tuned.dq, widened(untuned.dq)) <= tol);
  CHECK(rel_error(tuned.dk, widened(untuned.dk)) <= tol);
  CHECK(rel_error(tuned.dv, widened(untuned.dv)) <= tol);
  // Every launch adds a whole gradient: had a tuning launch's stayed, the difference would be as large as the
  // gradient itself.
  REQUIRE(norm(untuned.slopes) > 0);
  std::vector<float> diff(untuned.slopes.size());
  for (size_t h = 0; h < diff.size(); ++h) diff[h] = tuned.slopes[h] - untuned.slopes[h];
  INFO("slopes' gradient: untuned " << untuned.slopes[0] << " " << untuned.slopes[1] << " " << untuned.slopes[2] << " "
                                    << untuned.slopes[3] << ", tuned " << tuned.slopes[0] << " " << tuned.slopes[1]
                                    << " " << tuned.slopes[2] << " " << tuned.slopes[3]);
  CHECK(norm(diff) <= 0.1 * norm(untuned.slopes));

  // The second call takes the process's memo: with the tuner's own caches emptied it would tune (and store) again.
  cache.forget_entries();
  autotune::clear_memory_cache();
  const Problem::Grads again = p.backward(true);
  CHECK(cache.entries() == 0);
  CHECK(again.dq == tuned.dq);  // the same config, deterministic mode: bitwise the same
  CHECK(again.slopes == tuned.slopes);
}

TEST_CASE("flex_backward tuning alone restores dq, dk, dv and a learnable gradient",
          "[gpu][autotune][flex][backward]") {
  FreshCache cache("flex-bwd-restore");
  Problem p;
  for (Buffer *b : {&p.dq, &p.dk, &p.dv}) b->fill_bytes(0xab);
  p.slopes_grad.upload(p.grad_start);
  attention::FlexOptions o = p.opt;
  o.autotune = true;
  o.atomics = true;  // the capture's gradient by atomics: added by the dK/dV kernel itself
  const attention::FlexOptions t = attention::flex::tuned_flex_backward_options(
      dp(p.q), dp(p.k), dp(p.v), dp(p.out), dp(p.lse), dp(p.dout), dp(p.dq), dp(p.dk), dp(p.dv), p.s, o,
      attention::flex::learnable_captures(o, attention::flex::placeholder_backward_args(p.s, o).main));
  CHECK(cache.entries() == 1);
  CHECK_FALSE(t.autotune);
  attention::FlexOptions arch = o;
  arch.arch = t.arch;  // the device's, which the tuner filled in
  bool candidate = false;
  for (const autotune::Config &c : attention::flex::backward_candidates(arch))
    candidate = candidate || (c.get("BLOCK_M") == t.block_m && c.get("BLOCK_N") == t.block_n &&
                              c.num_warps == t.num_warps && c.num_stages == t.num_stages);
  CHECK(candidate);
  size_t changed = 0;
  for (Buffer *b : {&p.dq, &p.dk, &p.dv})
    for (uint8_t x : b->download_as<uint8_t>(b->bytes())) changed += x != 0xab;
  CHECK(changed == 0);
  CHECK(p.slopes_grad.download_as<float>(size_t(Problem::Hq)) == p.grad_start);
}

TEST_CASE("C ABI: an autotuned flex backward reports the tuned config", "[gpu][autotune][flex][backward][c_api]") {
  FreshCache cache("flex-bwd-c-api");
  Problem p;
  tilejit_flex_variant var;
  tilejit_flex_variant_init(&var);
  var.causal = 1;
  var.window_left = 100;  // a band no other test tunes: this call's key is new
  var.autotune = 0;       // the forward as given: only the backward is under test
  const int64_t qs[4] = {int64_t(Problem::Hq) * Problem::S * Problem::D, int64_t(Problem::S) * Problem::D,
                         Problem::D, 1};
  const int64_t ks[4] = {int64_t(Problem::Hkv) * Problem::S * Problem::D, int64_t(Problem::S) * Problem::D,
                         Problem::D, 1};
  auto raw = [](const Buffer &b) { return reinterpret_cast<void *>(uintptr_t(b.address())); };
  REQUIRE(tilejit_flex_attention_forward(raw(p.q), raw(p.k), raw(p.v), raw(p.out),
                                         static_cast<float *>(raw(p.lse)), 0, Problem::B, Problem::Hq, Problem::Hkv,
                                         Problem::S, Problem::S, Problem::D, qs, ks, ks, qs, 0.f, &var,
                                         nullptr) == TILEJIT_OK);
  var.autotune = 1;
  // Block sizes no candidate has: a report of the variant's own config (tuning skipped) cannot pass below.
  var.block_m = 128;
  var.block_n = 32;
  INFO(tilejit_last_error());
  REQUIRE(tilejit_flex_attention_backward(raw(p.q), raw(p.k), raw(p.v), raw(p.out), static_cast<float *>(raw(p.lse)),
                                          raw(p.dout), raw(p.dq), raw(p.dk), raw(p.dv), 0, Problem::B, Problem::Hq,
                                          Problem::Hkv, Problem::S, Problem::S, Problem::D, qs, ks, ks, qs, 0.f, &var,
                                          nullptr) == TILEJIT_OK);
  CHECK(cache.entries() == 1);  // the backward tuned
  tilejit_launch_config cfg;
  REQUIRE(tilejit_last_launch_config(&cfg) == TILEJIT_OK);
  CHECK(std::string(cfg.kernel) == "flex_attention_bwd");
  CHECK(cfg.autotuned == 1);
  CHECK(((cfg.block_m == 64 || cfg.block_m == 32) && (cfg.block_n == 64 || cfg.block_n == 128)));
  CHECK(((cfg.num_warps == 4 || cfg.num_warps == 8) && (cfg.num_stages == 2 || cfg.num_stages == 3)));
}
