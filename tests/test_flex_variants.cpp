// Flex attention on the CPU interpreter: every built-in variant and composition against the float64
// reference, on odd lengths (1, 17, 113), seqlen_q ≠ seqlen_k (rows that see no key), bf16 and f16.
#include "flex_checks.h"

using namespace tilejit;
using namespace tilejit::testing;

TEST_CASE("flex: every variant, odd self-attention lengths", "[flex]") {
  for (int len : {1, 17, 113})
    check_flex_variants(Backend::Interpreter, {.batch = 2, .heads_q = 3, .seqlen_q = len, .seqlen_k = len, .head_dim_qk = 32},
                        DType::bf16, 16, 32);
}

TEST_CASE("flex: soft-capping (built-in and lambda) at the fixed reference's edges and past them", "[flex]") {
  check_softcap_bound_edges(Backend::Interpreter, 16, 16);
}

TEST_CASE("flex: every variant, seqlen_q != seqlen_k", "[flex]") {
  // Bottom-right causal with seqlen_q > seqlen_k leaves the first rows with no key: out 0, lse −inf.
  check_flex_variants(Backend::Interpreter, {.batch = 1, .heads_q = 2, .seqlen_q = 40, .seqlen_k = 23, .head_dim_qk = 32},
                      DType::f16, 32, 16);
  check_flex_variants(Backend::Interpreter, {.batch = 1, .heads_q = 2, .seqlen_q = 9, .seqlen_k = 70, .head_dim_qk = 32},
                      DType::bf16, 16, 16);
}

TEST_CASE("flex: ALiBi slopes follow the paper, including non-power-of-two head counts", "[flex]") {
  auto s8 = attention::alibi_slopes(8);
  for (int i = 0; i < 8; ++i) REQUIRE(s8[size_t(i)] == Approx(std::pow(2.0, -(i + 1.0))));
  // 12 heads: the 8 slopes of 8 heads, then slopes 1, 3, 5, 7 (0-based even indices 0, 2, 4, 6) of 16 heads.
  auto s12 = attention::alibi_slopes(12);
  REQUIRE(s12.size() == 12);
  for (int i = 0; i < 8; ++i) REQUIRE(s12[size_t(i)] == s8[size_t(i)]);
  for (int i = 0; i < 4; ++i) REQUIRE(s12[size_t(8 + i)] == Approx(std::pow(2.0, -0.5 * (2 * i + 1))));
  auto s3 = attention::alibi_slopes(3);
  REQUIRE(s3 == std::vector<float>{0.0625f, 0.00390625f, 0.25f});
}

TEST_CASE("flex: alibi() carries its built-in form, softcap() and compositions are plain functions", "[flex]") {
  Captured slopes = capture(DevicePtr{}, DType::f32), cap = capture(2.f);
  attention::ScoreMod a = attention::alibi(slopes), c = attention::softcap(cap);
  REQUIRE(a.builtin() != nullptr);
  CHECK(a.builtin()->alibi_slopes.shared_state() == slopes.shared_state());
  CHECK(c.builtin() == nullptr);
  CHECK(attention::softcap(3.f).builtin() == nullptr);
  CHECK(attention::compose(a, c).builtin() == nullptr);
  CHECK(attention::compose(c, a).builtin() == nullptr);
  CHECK(attention::compose(a, a).builtin() == nullptr);
  attention::ScoreMod user([](Tile s, Tile, Tile, Tile, Tile) { return s * 2.f; });
  CHECK(user.builtin() == nullptr);
  CHECK(attention::compose(attention::ScoreMod{}, a).builtin() != nullptr);  // identity composes away
  // One function, two forms: each gets its own traced kernel (the kernel cache keys on the form too).
  attention::ScoreMod tagged = user.with_builtin({.alibi_slopes = slopes});
  CHECK(tagged.identity() == user.identity());
  attention::FlexShape shape{.batch = 1, .heads_q = 1, .seqlen_q = 32, .seqlen_k = 32, .head_dim_qk = 32};
  attention::FlexOptions o;
  o.backend = Backend::Interpreter;
  o.score_mod = user;
  std::string plain_ir = attention::flex_forward_ir(shape, o);
  o.score_mod = tagged;
  std::string tagged_ir = attention::flex_forward_ir(shape, o);
  CHECK(plain_ir.find("cap0") == std::string::npos);
  CHECK(tagged_ir.find("cap0") != std::string::npos);  // the form's slopes
}

TEST_CASE("flex: built-in mods stay finite at their edges, empty captures are rejected", "[flex]") {
  REQUIRE_THROWS_WITH(attention::alibi(Captured{}), Catch::Contains("alibi: the slopes capture is empty"));
  REQUIRE_THROWS_WITH(attention::softcap(Captured{}), Catch::Contains("softcap: the cap capture is empty"));
  FlexCase c;
  c.shape = {.batch = 1, .heads_q = 2, .seqlen_q = 17, .seqlen_k = 40, .head_dim_qk = 32};
  c.dtype = DType::f16;
  auto user = [](const attention::ScoreMod &m) {
    return attention::ScoreMod([m](Tile s, Tile b, Tile h, Tile q, Tile kv) { return m(s, b, h, q, kv); });
  };
  auto finite = [](const FlexResult &r) {
    for (float v : r.out)
      if (!std::isfinite(v)) return false;
    return true;
  };
  // A cap of 0 (the limit: every score 0) and one past FLT_MAX / log2e; the partial key block's masked
  // scores (−inf) make the folded form NaN unless the cap is clamped.
  for (float cap : {0.f, -0.f, 3e38f}) {
    INFO("cap " << cap);
    attention::FlexOptions o;
    o.score_mod = attention::softcap(capture(cap));
    RefMods ref{[cap](double s, int, int, int, int) { return cap == 0 ? 0.0 : double(cap) * std::tanh(s / cap); }, {}};
    FlexResult builtin = run_flex_case(Backend::Interpreter, c, o, ref);
    o.score_mod = user(o.score_mod);
    FlexResult generic = run_flex_case(Backend::Interpreter, c, o, ref);
    CHECK(finite(builtin));
    CHECK(finite(generic));
    CHECK(rel_error(builtin.out, builtin.ref_out) <= tolerance(c.dtype));
  }
  // A softmax scale below 2^-50 with the built-in ALiBi is refused (slope/scale·|q − kv| could overflow where
  // the bias is moderate, dropping keys); at 2^-50, slopes of 2^45 overflow slope/scale·|q − kv| to −inf
  // where the bias in natural units is below −2^45 anyway: finite, and as the reference.
  c.shape.seqlen_k = 17;
  c.softmax_scale = 1e-36f;
  {
    attention::FlexOptions o;
    Buffer slopes(8, Backend::Interpreter);
    o.score_mod = attention::alibi(capture(slopes, DType::f32));
    REQUIRE_THROWS_WITH(run_flex_case(Backend::Interpreter, c, o, {}), Catch::Contains("below 2^-50"));
  }
  c.softmax_scale = 0x1p-50f;
  std::vector<float> slopes_host{0x1p45f, 1e-3f};
  Buffer slopes(8, Backend::Interpreter);
  slopes.upload(slopes_host);
  attention::FlexOptions o;
  o.score_mod = attention::alibi(capture(slopes, DType::f32));
  FlexResult r = run_flex_case(
      Backend::Interpreter, c, o,
      {[&](double s, int, int h, int q, int kv) { return s - double(slopes_host[size_t(h)]) * std::abs(q - kv); }, {}});
  CHECK(finite(r));
  CHECK(rel_error(r.out, r.ref_out) <= tolerance(c.dtype));
}

TEST_CASE("flex: a slopes buffer too short for the heads is reported at the user's alibi() line", "[flex]") {
  FlexCase c;
  c.shape = {.batch = 1, .heads_q = 2, .seqlen_q = 8, .seqlen_k = 8, .head_dim_qk = 16};
  Buffer one_slope(4, Backend::Interpreter);
  one_slope.upload(std::vector<float>{0.5f});
  for (bool builtin : {true, false}) {
    INFO((builtin ? "built-in form" : "as a user function"));
    attention::FlexOptions o;
    const int line = __LINE__ + 1;
    attention::ScoreMod m = attention::alibi(capture(one_slope, DType::f32));
    o.score_mod = builtin ? m : attention::ScoreMod([m](Tile s, Tile b, Tile h, Tile q, Tile kv) { return m(s, b, h, q, kv); });
    CHECK_THROWS_WITH(run_flex_case(Backend::Interpreter, c, o, {}),
                      Catch::Contains("test_flex_variants.cpp:" + std::to_string(line)));
  }
}

TEST_CASE("flex: fully masked rows give 0 and lse -inf, never NaN", "[flex]") {
  FlexCase c;
  c.shape = {.batch = 1, .heads_q = 1, .seqlen_q = 33, .seqlen_k = 33, .head_dim_qk = 32};
  attention::FlexOptions o;
  // Rows q < 10 see nothing.
  o.mask = attention::Mask([](Tile, Tile, Tile q, Tile kv) { return (q >= 10) & (kv <= q); });
  auto r = run_flex_case(Backend::Interpreter, c, o, {{}, [](int, int, int q, int kv, int, int) { return q >= 10 && kv <= q; }});
  REQUIRE(r.empty_rows == 10);
  for (int i = 0; i < 10; ++i) {
    REQUIRE(std::isinf(r.lse[size_t(i)]));
    for (int d = 0; d < 32; ++d) REQUIRE(r.out[size_t(i) * 32 + d] == 0.f);
  }
  require_matches(r, DType::bf16);
  // The same with a block mask built once beforehand.
  attention::FlexOptions pre = o;
  pre.block_m = pre.block_n = 16;
  pre.backend = Backend::Interpreter;
  attention::BlockMask bm = attention::create_block_mask(o.mask, c.shape, pre);
  pre.block_mask = &bm;
  require_matches(run_flex_case(Backend::Interpreter, c, pre, {{}, [](int, int, int q, int kv, int, int) { return q >= 10 && kv <= q; }}),
                  DType::bf16);
  // A block mask made for other block sizes is rejected.
  c.block_n = 32;
  REQUIRE_THROWS_WITH(run_flex_case(Backend::Interpreter, c, pre, {}), Catch::Contains("the block mask was made for"));
  c.block_n = 16;
  // The same with the block mask off (mask applied on every block).
  c.block_mask_mode = attention::BlockMaskMode::Off;
  require_matches(run_flex_case(Backend::Interpreter, c, o, {{}, [](int, int, int q, int kv, int, int) { return q >= 10 && kv <= q; }}),
                  DType::bf16);
}

TEST_CASE("flex: a tiny soft-cap with a large softmax scale gives finite results where a score is exactly 0",
          "[flex]") {
  // scale/cap overflows to inf for caps below scale/FLT_MAX; a query row of zeros has scores of exactly 0,
  // and 0·inf is NaN. The lambda's cap·tanh(0/cap) is 0, so that row's output is the mean of v.
  const int S = 5, D = 32;
  attention::FlexShape s{.batch = 1, .heads_q = 1, .seqlen_q = 2, .seqlen_k = S, .head_dim_qk = D};
  std::vector<float> q_host(size_t(2 * D), 0.f), k_host(size_t(S * D)), v_host(size_t(S * D));
  for (size_t i = 0; i < k_host.size(); ++i) {
    k_host[i] = float(int(i % 7) - 3) * 0.25f;
    v_host[i] = float(int(i % 5) - 2) * 0.5f;
  }
  for (int d = 0; d < D; ++d) q_host[size_t(D + d)] = 1.f;  // row 1: nonzero scores, saturated by the cap
  auto bf16_buffer = [](const std::vector<float> &x) {
    Buffer b(x.size() * 2, Backend::Interpreter);
    std::vector<uint16_t> bits(x.size());
    for (size_t i = 0; i < x.size(); ++i) bits[i] = float_to_bf16(x[i]);
    b.upload(bits);
    return b;
  };
  Buffer q = bf16_buffer(q_host), k = bf16_buffer(k_host), v = bf16_buffer(v_host);
  for (float cap : {0.f, 1e-45f, 1e-39f}) {
    INFO("cap " << cap);
    Buffer out(size_t(2 * D) * 2, Backend::Interpreter), lse(2 * 4, Backend::Interpreter);
    out.fill_bytes(0xff);
    lse.fill_bytes(0xff);
    attention::FlexOptions o;
    o.backend = Backend::Interpreter;
    o.softmax_scale = 5.f;
    o.score_mod = attention::softcap(capture(cap));
    attention::flex_forward(q, k, v, out, lse, s, o);
    auto out_bits = out.download_as<uint16_t>(size_t(2 * D));
    auto lse_host = lse.download_as<float>(2);
    for (int d = 0; d < D; ++d) {
      double mean = 0;
      for (int j = 0; j < S; ++j) mean += v_host[size_t(j * D + d)] / S;
      CHECK(std::abs(double(bf16_to_float(out_bits[size_t(d)])) - mean) <= 1e-2);
      CHECK(std::isfinite(bf16_to_float(out_bits[size_t(D + d)])));
    }
    CHECK(std::abs(double(lse_host[0]) - std::log(double(S))) <= 1e-3);
    CHECK(std::isfinite(lse_host[1]));
  }
}
