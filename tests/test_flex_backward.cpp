// flex_backward on the interpreter against float64 gradients: no mod, bands, built-in and user mods, mask
// functions with rows that see no key, GQA/MQA, odd lengths and padded head dims; determinism; its errors.
#include <catch2/catch.hpp>

#include <cstring>

#include "flex_backward_reference.h"
#include "test_codegen_util.h"
#include "tilejit/capture.h"
#include "tilejit/flex_variants.h"
#include "tilejit/ops.h"

using namespace tilejit;
using namespace tilejit::testing;
using attention::Align;
using attention::FlexOptions;
using Catch::Matchers::Contains;
using codegen::testing::contains;
using codegen::testing::ptxas_v;

namespace {

std::function<bool(int, int, int, int, int, int)> band_visible(attention::Band band) {
  return [band](int, int, int q, int kv, int sq, int sk) { return ref_band(band, q, kv, sq, sk); };
}

FlexCase small_case(int heads_q, int heads_kv, int sq, int sk, int d, int dv = 0) {
  FlexCase c;
  c.shape.batch = 2;
  c.shape.heads_q = heads_q;
  c.shape.heads_kv = heads_kv;
  c.shape.seqlen_q = sq;
  c.shape.seqlen_k = sk;
  c.shape.head_dim_qk = d;
  c.shape.head_dim_v = dv;
  return c;
}

}  // namespace

TEST_CASE("flex_backward (interpreter): gradients of every mod and mask kind against float64", "[flex][backward]") {
  const Backend be = Backend::Interpreter;
  const FlexCase c = small_case(4, 2, 37, 53, 32);
  SECTION("no mod") { require_backward_matches(run_backward_case(be, c, FlexOptions{}, {}), c.dtype); }
  SECTION("causal, both alignments") {
    for (Align al : {Align::TopLeft, Align::BottomRight}) {
      INFO((al == Align::TopLeft ? "top-left" : "bottom-right"));
      FlexOptions o;
      o.mask = attention::causal(al);
      require_backward_matches(run_backward_case(be, c, o, {{}, band_visible({-1, 0, al})}), c.dtype);
    }
  }
  SECTION("sliding window (7, 3)") {
    FlexOptions o;
    o.mask = attention::sliding_window(7, 3);
    require_backward_matches(run_backward_case(be, c, o, {{}, band_visible({7, 3, Align::TopLeft})}), c.dtype);
  }
  SECTION("soft-capping: the built-in and a user lambda") {
    FlexOptions o;
    o.score_mod = attention::softcap(2.f);  // a small cap, so that tanh' differs from 1 visibly
    RefMods ref{[](double x, int, int, int, int) { return 2.0 * std::tanh(x / 2.0); }, {}};
    require_backward_matches(run_backward_case(be, c, o, ref), c.dtype);
    o.score_mod = [](Tile s, Tile, Tile, Tile, Tile) { return 2.f * tanh(s / 2.f); };
    require_backward_matches(run_backward_case(be, c, o, ref), c.dtype);
  }
  SECTION("ALiBi with causal masking") {
    auto slopes_host = attention::alibi_slopes(c.shape.heads_q);
    Buffer slopes(slopes_host.size() * 4, be);
    slopes.upload(slopes_host);
    FlexOptions o;
    o.score_mod = attention::alibi(capture(slopes, DType::f32));
    o.mask = attention::causal(Align::BottomRight);
    // ALiBi's distance is between q_idx and kv_idx as the mods see them (the band's alignment is the mask's).
    RefMods ref{[&](double x, int, int h, int q, int kv) { return x - double(slopes_host[size_t(h)]) * std::abs(q - kv); },
                band_visible({-1, 0, Align::BottomRight})};
    require_backward_matches(run_backward_case(be, c, o, ref), c.dtype);
  }
  SECTION("a user mod mixing exp, where and a captured bias table") {
    std::vector<float> table_host(64);
    for (size_t i = 0; i < table_host.size(); ++i) table_host[i] = 0.01f * float(int(i % 13) - 6);
    Buffer table(table_host.size() * 4, be);
    table.upload(table_host);
    Captured tab = capture(table, DType::f32);
    FlexOptions o;
    o.score_mod = [tab](Tile s, Tile, Tile, Tile q, Tile kv) {
      Tile bias = load(tab() + ((q - kv) & 63));
      return where(s > 0.f, s * 0.5f + bias, exp(s) - 1.f + bias);
    };
    RefMods ref{[&](double x, int, int, int q, int kv) {
                  double bias = table_host[size_t((q - kv) & 63)];
                  return x > 0 ? x * 0.5 + bias : std::exp(x) - 1 + bias;
                },
                {}};
    require_backward_matches(run_backward_case(be, c, o, ref), c.dtype);
  }
  SECTION("learnable captures: a relative-position bias table and ALiBi's slopes get their gradients") {
    const int H = c.shape.heads_q;
    std::vector<float> table_host(size_t(H) * 64);
    for (size_t i = 0; i < table_host.size(); ++i) table_host[i] = 0.02f * float(int(i % 11) - 5);
    Buffer table(table_host.size() * 4, be), table_grad(table_host.size() * 4, be);
    table.upload(table_host);
    table_grad.upload(std::vector<float>(table_host.size(), 0.f));
    Captured tab = capture(table, DType::f32, table_grad);
    FlexOptions o;
    o.score_mod = [tab](Tile s, Tile, Tile h, Tile q, Tile kv) { return s + load(tab() + h * 64 + ((q - kv) & 63)); };
    std::vector<double> want(table_host.size(), 0.0);
    RefMods ref{[&](double x, int, int h, int q, int kv) { return x + table_host[size_t(h * 64 + ((q - kv) & 63))]; }, {}};
    auto r = run_backward_case(be, c, o, ref, [&](int, int h, int i, int j, double dz) {
      want[size_t(h * 64 + ((i - j) & 63))] += dz;
    });
    require_backward_matches(r, c.dtype);
    double err = rel_error(table_grad.download_as<float>(table_host.size()), want);
    INFO("bias table gradient relative error " << err);
    CHECK(err <= backward_tolerance(c.dtype));

    auto slopes_host = attention::alibi_slopes(H);
    Buffer slopes(slopes_host.size() * 4, be), slopes_grad(slopes_host.size() * 4, be);
    slopes.upload(slopes_host);
    slopes_grad.upload(std::vector<float>(slopes_host.size(), 0.f));
    o.score_mod = attention::alibi(capture(slopes, DType::f32, slopes_grad));
    o.mask = attention::causal(Align::BottomRight);
    std::vector<double> want_slopes(slopes_host.size(), 0.0);
    RefMods alibi_ref{[&](double x, int, int h, int q, int kv) { return x - double(slopes_host[size_t(h)]) * std::abs(q - kv); },
                      band_visible({-1, 0, Align::BottomRight})};
    auto ra = run_backward_case(be, c, o, alibi_ref, [&](int, int h, int i, int j, double dz) {
      want_slopes[size_t(h)] -= std::abs(i - j) * dz;
    });
    require_backward_matches(ra, c.dtype);
    err = rel_error(slopes_grad.download_as<float>(slopes_host.size()), want_slopes);
    INFO("ALiBi slopes gradient relative error " << err);
    CHECK(err <= backward_tolerance(c.dtype));
  }
  SECTION("a mask function with rows that see no key") {
    FlexOptions o;
    o.mask.fn = [](Tile, Tile h, Tile q, Tile kv) { return (q >= 5) & (((q + kv + h) % 3) != 0); };
    RefMods ref{{}, [](int, int h, int q, int kv, int, int) { return q >= 5 && (q + kv + h) % 3 != 0; }};
    auto r = run_backward_case(be, c, o, ref);
    REQUIRE(r.empty_rows == 2 * 4 * 5);
    require_backward_matches(r, c.dtype);
    // Rows that see no key get exactly zero dq.
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < 4; ++h)
        for (int i = 0; i < 5; ++i)
          for (int d = 0; d < 32; ++d) REQUIRE(r.dq[((size_t(b) * 4 + h) * 37 + i) * 32 + d] == 0.f);
  }
}

TEST_CASE("flex_backward (interpreter): GQA/MQA, odd lengths, padded and unequal head dims", "[flex][backward]") {
  const Backend be = Backend::Interpreter;
  struct Shape {
    int hq, hkv, sq, sk, d, dv;
  };
  for (Shape sh : {Shape{4, 1, 17, 17, 32, 0}, Shape{8, 2, 1, 29, 16, 0}, Shape{2, 2, 45, 19, 40, 24}}) {
    INFO("heads " << sh.hq << "/" << sh.hkv << " seqlen " << sh.sq << "x" << sh.sk << " d " << sh.d << "/" << sh.dv);
    FlexCase c = small_case(sh.hq, sh.hkv, sh.sq, sh.sk, sh.d, sh.dv);
    FlexOptions o;
    o.mask = attention::causal(Align::BottomRight);
    require_backward_matches(run_backward_case(be, c, o, {{}, band_visible({-1, 0, Align::BottomRight})}), c.dtype);
  }
  FlexCase f16 = small_case(2, 1, 33, 33, 64);
  f16.dtype = DType::f16;
  require_backward_matches(run_backward_case(be, f16, FlexOptions{}, {}), f16.dtype);
}

TEST_CASE("flex_backward: two runs give bitwise the same gradients; unsupported inputs are named", "[flex][backward]") {
  const Backend be = Backend::Interpreter;
  FlexCase c = small_case(4, 2, 33, 33, 32);
  FlexOptions o;
  o.score_mod = [](Tile s, Tile, Tile, Tile, Tile) { return 3.f * tanh(s / 3.f); };
  // Same inputs twice: the harness draws fresh ones, so run the backward itself twice on one set.
  const auto &s = c.shape;
  const size_t nq = size_t(2) * 4 * 33 * 32, nk = size_t(2) * 2 * 33 * 32;
  auto bq = upload_as(random_values(nq, c.dtype), c.dtype, be), bk = upload_as(random_values(nk, c.dtype), c.dtype, be);
  auto bv = upload_as(random_values(nk, c.dtype), c.dtype, be), bdo = upload_as(random_values(nq, c.dtype), c.dtype, be);
  Buffer out(nq * 2, be), lse(size_t(2) * 4 * 33 * 4, be);
  o.backend = be;
  o.block_m = o.block_n = 16;
  attention::flex_forward(bq, bk, bv, out, lse, s, o);
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    Buffer dq(nq * 2, be), dk(nk * 2, be), dv(nk * 2, be);
    for (Buffer *b : {&dq, &dk, &dv}) b->fill_bytes(uint8_t(0x11 * (run + 1)));
    attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dk, dv, s, o);
    std::vector<float> all = download_as_float(dq, nq, c.dtype);
    for (const Buffer *b : {&dk, &dv}) {
      auto part = download_as_float(*b, nk, c.dtype);
      all.insert(all.end(), part.begin(), part.end());
    }
    runs.push_back(std::move(all));
  }
  REQUIRE(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * 4) == 0);

  Buffer empty;
  FlexOptions varlen = o;
  varlen.cu_seqlens_q = {out.address(), 12};
  varlen.cu_seqlens_k = {out.address(), 12};
  CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, out, out, out, s, varlen),
                    Contains("attention::flex_backward: variable-length batches"));
  CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, empty, out, out, s, o),
                    Contains("attention::flex_backward: pointer 'dq' is null"));
  Buffer small_dk(16, be);
  CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, out, small_dk, out, s, o),
                    Contains("attention::flex_backward: 'dk' holds 16 bytes"));
  attention::FlexShape bad = s;
  bad.heads_kv = 3;
  CHECK_THROWS_WITH(attention::flex_backward(bq, bk, bv, out, lse, bdo, out, out, out, bad, o),
                    Contains("attention::flex_backward"));
}

TEST_CASE("flex_backward's three kernels compile to PTX that ptxas accepts for sm_80 and sm_90a", "[flex][backward][ptx]") {
  attention::FlexShape s;
  s.batch = 2;
  s.heads_q = 8;
  s.heads_kv = 2;
  s.seqlen_q = s.seqlen_k = 1024;
  s.head_dim_qk = 64;
  FlexOptions o;
  o.mask = attention::causal(Align::BottomRight);
  // A soft-cap and a learnable bias table: the dK/dV kernel then scatters the table's gradient (atomics).
  Captured table = capture(DevicePtr{256, 0}, DType::f32, DevicePtr{1024, 0});
  o.score_mod = [table](Tile sc, Tile, Tile, Tile q, Tile kv) {
    return 20.f * tanh(sc / 20.f) + load(table() + ((q - kv) & 63));
  };
  for (std::string arch : {"sm_80", "sm_90a"}) {
    o.arch = arch;
    const std::string ptx = attention::flex_backward_ptx(s, o);
    // One module per kernel, each starting with the PTX header comment.
    std::vector<std::string> modules;
    for (size_t at = ptx.find("//\n// Generated"); at != std::string::npos;) {
      size_t next = ptx.find("//\n// Generated", at + 1);
      modules.push_back(ptx.substr(at, next == std::string::npos ? std::string::npos : next - at));
      at = next;
    }
    REQUIRE(modules.size() == 3);
    const char *names[] = {"flex_attention_bwd_delta", "flex_attention_bwd_dkdv", "flex_attention_bwd_dq"};
    for (size_t i = 0; i < 3; ++i) {
      INFO(arch << " " << names[i]);
      REQUIRE(contains(modules[i], std::string(".entry ") + names[i]));
      // The main kernels' products run on tensor cores (mma.sync, or wgmma where a dot's shape fits it).
      const bool tensor_cores = contains(modules[i], "mma.sync.aligned.m16n8k16") || contains(modules[i], "wgmma.mma_async");
      REQUIRE(tensor_cores == (i > 0));
      REQUIRE(contains(modules[i], "atom.global.add.f32") == (i == 1));  // the table's gradient, in dK/dV only
      auto [rc, log] = ptxas_v(modules[i], arch, names[i]);
      INFO("ptxas says:\n" << log);
      REQUIRE(rc == 0);
    }
  }
}
