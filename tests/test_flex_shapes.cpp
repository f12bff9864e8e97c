// Flex attention shapes on the CPU interpreter: GQA/MQA, varlen with empty sequences, padded head dims,
// a v head dim different from q·k's, no-op sizes, and the errors for unsupported shapes.
#include <limits>

#include "flex_checks.h"
#include "kernels/flex/flex_internal.h"

using namespace tilejit;
using namespace tilejit::testing;

TEST_CASE("flex: grouped-query and multi-query attention", "[flex]") {
  check_flex_gqa(Backend::Interpreter, 4, 2, 37, DType::bf16);
  check_flex_gqa(Backend::Interpreter, 3, 1, 20, DType::f16);
}

TEST_CASE("flex: heads_q not a multiple of heads_kv is rejected", "[flex]") {
  attention::FlexShape s{.batch = 1, .heads_q = 3, .heads_kv = 2, .seqlen_q = 16, .seqlen_k = 16, .head_dim_qk = 32};
  attention::FlexOptions o;
  o.backend = Backend::Interpreter;
  Buffer b(1 << 16, Backend::Interpreter);
  try {
    attention::flex_forward(b, b, b, b, b, s, o);
    FAIL("expected an error");
  } catch (const TraceError &e) {
    REQUIRE_THAT(e.what(), Catch::Contains("heads_q (3) must be a multiple of heads_kv (2)"));
  }
}

TEST_CASE("flex_check rejects what flex_forward rejects, reading no memory", "[flex]") {
  attention::FlexShape s{.batch = 2, .heads_q = 6, .heads_kv = 4, .seqlen_q = 16, .seqlen_k = 16, .head_dim_qk = 32};
  attention::FlexOptions o;
  o.backend = Backend::Interpreter;
  auto rejects = [&](const char *why) {
    try {
      attention::flex_check(s, o);
      FAIL("expected an error: " << why);
    } catch (const TraceError &e) {
      REQUIRE_THAT(e.what(), Catch::Contains(why));
    }
  };
  rejects("heads_q (6) must be a multiple of heads_kv (4)");
  s.heads_kv = 3;
  REQUIRE_NOTHROW(attention::flex_check(s, o));
  s.head_dim_qk = 300;
  rejects("head dim 300 is not supported (16 to 256)");
  s.head_dim_qk = 32;
  o.block_n = 48;
  rejects("BLOCK_N 48");
  o.block_n = 64;
  o.q_strides = {0, 0, -32, 1};
  rejects("tensor 'q': strides (batch 0, head 0, seq -32) must not be negative");
  o.q_strides = {int64_t(1) << 62, 32, 32 * 6, 1};  // the batch stride's extent is past 2^62: not wrapped
  rejects("tensor 'q': strides (batch 4611686018427387904, head 32, seq 192) over 2 × 6 × 16 rows address more than "
          "2^62 elements");
  o.q_strides = {};
  // The mods are traced: a score_mod of the wrong shape is named here too.
  o.score_mod = [](Tile, Tile, Tile, Tile q, Tile) { return q.to(DType::f32); };
  rejects("the score_mod returned f32[");
  o.score_mod = {};
  // Varlen needs both cu_seqlens (placeholders: nothing is read).
  s.total_q = s.total_k = 20;
  o.cu_seqlens_q = DevicePtr{256, 0};
  rejects("give both cu_seqlens_q and cu_seqlens_k, or neither");
  o.cu_seqlens_k = DevicePtr{256, 0};
  REQUIRE_NOTHROW(attention::flex_check(s, o));
}

TEST_CASE("flex: a score_mod returning the wrong shape or a non-float is rejected with a clear message", "[flex]") {
  attention::FlexShape s{.batch = 1, .heads_q = 2, .seqlen_q = 16, .seqlen_k = 16, .head_dim_qk = 32};
  Buffer b(1 << 16, Backend::Interpreter);
  auto expect = [&](attention::ScoreMod mod, const char *what) {
    attention::FlexOptions o;
    o.backend = Backend::Interpreter;
    o.block_m = o.block_n = 16;
    o.score_mod = std::move(mod);
    try {
      attention::flex_forward(b, b, b, b, b, s, o);
      FAIL("expected an error");
    } catch (const TraceError &e) {
      REQUIRE_THAT(e.what(), Catch::Contains("the score_mod returned") && Catch::Contains(what));
    }
  };
  // A row vector: [BLOCK_M, 1] instead of the [BLOCK_M, BLOCK_N] score tile.
  expect([](Tile, Tile, Tile, Tile q, Tile) { return q.to(DType::f32); }, "f32[16x1]");
  // A boolean would silently become 0/1 scores.
  expect([](Tile score, Tile, Tile, Tile, Tile) { return score > 0.f; }, "i1[16x16]");
}

TEST_CASE("flex: varlen batches with empty sequences", "[flex]") {
  check_flex_varlen(Backend::Interpreter, {5, 0, 17, 1, 40}, {5, 0, 17, 1, 40}, false, DType::bf16);
  check_flex_varlen(Backend::Interpreter, {3, 20, 0, 9}, {11, 7, 4, 0}, true, DType::bf16);
  check_flex_varlen(Backend::Interpreter, {13, 0, 40, 1}, {13, 0, 40, 1}, true, DType::bf16, 16, 16, true);
}

TEST_CASE("flex: padded head dims and a different v head dim", "[flex]") {
  check_flex_head_dims(Backend::Interpreter, 96, 96, 19, DType::bf16);
  check_flex_head_dims(Backend::Interpreter, 32, 64, 21, DType::f16);
  check_flex_head_dims(Backend::Interpreter, 48, 24, 17, DType::bf16);
}

TEST_CASE("flex: batch 0 and zero-length sequences are no-ops", "[flex]") {
  attention::FlexOptions o;
  o.backend = Backend::Interpreter;
  Buffer empty;
  REQUIRE_NOTHROW(attention::flex_forward(empty, empty, empty, empty, empty, {.batch = 0, .heads_q = 2}, o));
  REQUIRE_NOTHROW(attention::flex_forward(empty, empty, empty, empty, empty,
                                          {.batch = 2, .heads_q = 2, .seqlen_q = 0, .seqlen_k = 5}, o));
  // No keys at all: k and v hold nothing the kernel reads (a token allocation), every row gives 0 and −inf.
  attention::FlexShape s{.batch = 2, .heads_q = 2, .seqlen_q = 3, .seqlen_k = 0, .head_dim_qk = 32};
  size_t nq = size_t(2) * 2 * 3 * 32;
  Buffer q(nq * 2, Backend::Interpreter), kv(2, Backend::Interpreter), out(nq * 2, Backend::Interpreter),
      lse(size_t(2) * 2 * 3 * 4, Backend::Interpreter);
  q.fill_bytes(0x3c);
  out.fill_bytes(0xff);
  lse.fill_bytes(0xff);
  attention::flex_forward(q, kv, kv, out, lse, s, o);
  for (uint16_t x : out.download_as<uint16_t>(nq)) REQUIRE(x == 0);
  for (float x : lse.download_as<float>(12)) REQUIRE(x == -std::numeric_limits<float>::infinity());
}

TEST_CASE("flex: lengths specialize at most on divisibility by 16 (two kernels for any set of lengths)", "[flex]") {
  using namespace tilejit::attention;
  // Self- and cross-attention lengths: seqlen_q, seqlen_k, the block counts and the logsumexp's strides all
  // vary; a mask lambda makes the kernel read the block mask (so the block counts are used).
  FlexOptions masked;
  masked.mask = [](Tile, Tile, Tile q, Tile kv) { return kv <= q + 5; };
  for (const FlexOptions &opt : {FlexOptions{}, masked}) {
    auto kernel = flex::flex_kernel(DType::bf16, opt.score_mod, opt.mask);
    const size_t before = kernel->num_specializations();
    for (int len : {1, 3, 8, 16, 17, 113, 128, 1000})
      for (auto [sq, sk] : {std::pair{len, len}, std::pair{len, 48}, std::pair{40, len}}) {
        FlexCase c;
        c.shape = FlexShape{.batch = 1, .heads_q = 2, .seqlen_q = sq, .seqlen_k = sk, .head_dim_qk = 16};
        c.block_m = c.block_n = 64;
        INFO("seqlen_q " << sq << ", seqlen_k " << sk << (opt.mask.fn ? ", masked" : ""));
        RefMods ref;
        if (opt.mask.fn) ref.visible = [](int, int, int q, int kv, int, int) { return kv <= q + 5; };
        require_matches(run_flex_case(Backend::Interpreter, c, opt, ref), DType::bf16);
      }
    CHECK(kernel->num_specializations() - before <= 2);
  }
}
