// The flex kernels lower to PTX (sm_80 and sm_90a) for representative variants: the band path, the
// block-mask path with a captured table, GQA + varlen + padded head dims + 64-bit offsets, and the
// block-mask kernel itself. No GPU needed; the GPU tests run them.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "kernels/flex/flex_internal.h"
#include "tilejit/flex_attention.h"
#include "tilejit/flex_variants.h"
#include "tilejit/ops.h"
#include "text_matches.h"

using namespace tilejit;

namespace {
size_t occurrences(const std::string &text, const std::string &needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

/// The flex kernel's first key loop (whole key blocks, where the time goes) in its printed IR.
std::string first_key_loop(const attention::FlexShape &s, const attention::FlexOptions &o) {
  std::string ir = attention::flex_forward_ir(s, o);
  size_t from = ir.find(" = for "), to = ir.find(" = for ", from + 1);
  REQUIRE(to != std::string::npos);
  return ir.substr(from, to - from);
}

/// How many `op`s a loop applies per score of a 128x64 block.
int per_score(const std::string &loop, const std::string &op, const char *type = "tensor<128x64xf32>") {
  return testing::count_matches(loop, "= " + op + R"( [^\n]*: )" + type);
}
}  // namespace

TEST_CASE("flex kernels compile to PTX", "[flex][ptx]") {
  attention::FlexShape s{.batch = 2, .heads_q = 4, .heads_kv = 2, .seqlen_q = 1000, .seqlen_k = 1000,
                         .head_dim_qk = 128};
  Buffer slopes(16, Backend::Interpreter);
  for (const char *arch : {"sm_80", "sm_90a"}) {
    INFO(arch);
    attention::FlexOptions o;
    o.arch = arch;
    o.score_mod = attention::softcap(50.f);
    o.mask = attention::sliding_window(255, 0);
    std::string ptx = attention::flex_forward_ptx(s, o);
    REQUIRE(ptx.find(".entry") != std::string::npos);
    // Block-mask path with a mask function reading a captured buffer, plus the block-mask kernel.
    o.score_mod = attention::alibi(capture(slopes, DType::f32));
    o.mask = attention::and_masks(attention::causal(attention::Align::BottomRight),
                                  attention::Mask([](Tile, Tile, Tile q, Tile kv) { return (q / 64) != (kv / 64) + 3; }));
    REQUIRE(attention::flex_forward_ptx(s, o).find(".entry") != std::string::npos);
    REQUIRE(attention::flex_forward_ptx(s, o, true).find(".entry") != std::string::npos);
    // With num_stages 2 the block-sparse loop (key block index loaded from the list) is software-pipelined
    // too: the next block's index is read ahead, guarded by the iteration's range, and K/V go by cp.async.
    o.num_stages = 2;
    std::string piped = attention::flex_forward_ptx(s, o);
    REQUIRE(piped.find("cp.async.cg.shared.global") != std::string::npos);
    REQUIRE(piped.find("cp.async.wait_group 0") != std::string::npos);
  }
  // Varlen, padded head dims (96 → 128, v 192 → 256), 64-bit offsets.
  attention::FlexShape v{.batch = 3, .heads_q = 8, .heads_kv = 1, .seqlen_q = 4096, .seqlen_k = 4096,
                         .head_dim_qk = 96, .head_dim_v = 192, .total_q = int64_t(3) << 30, .total_k = int64_t(3) << 30};
  attention::FlexOptions o;
  o.cu_seqlens_q = o.cu_seqlens_k = DevicePtr{256, 0};
  o.mask = attention::causal(attention::Align::BottomRight);
  o.block_n = 32;
  std::string ir = attention::flex_forward_ir(v, o);
  REQUIRE(ir.find("i64 -> i32") == std::string::npos);  // offsets stay 64-bit
  REQUIRE(attention::flex_forward_ptx(v, o).find(".entry") != std::string::npos);
}

TEST_CASE("flex kernels traced for distinct mod objects are a bounded cache", "[flex]") {
  attention::FlexShape s{.batch = 1, .heads_q = 2, .seqlen_q = 100, .seqlen_k = 100, .head_dim_qk = 32};
  auto mod_ir = [&](const attention::ScoreMod &m) {
    attention::FlexOptions o;
    o.score_mod = m;
    return attention::flex_forward_ir(s, o);
  };
  attention::ScoreMod first = [](Tile x, Tile, Tile, Tile, Tile) { return x * 0.5f; };
  std::string first_ir = mod_ir(first);
  // A new ScoreMod object per call (natural code) must not keep every traced kernel forever: the cache is bounded.
  for (size_t i = 0; i < attention::flex::kMaxCachedModKernels + 20; ++i)
    mod_ir([](Tile x, Tile, Tile, Tile, Tile) { return x * 0.5f; });
  CHECK(attention::flex::flex_kernels_cached() <= attention::flex::kMaxCachedModKernels);
  CHECK(mod_ir(first) == first_ir);  // evicted by now, traced again, same kernel
}

TEST_CASE("flex: a score_mod's softmax frame is chosen per launch from its traced range, its captures and the dtype",
          "[flex]") {
  using attention::flex::ScoreFrame;
  attention::FlexOptions o;
  auto frame = [&](attention::ScoreMod m, DType dt = DType::bf16) {
    o.score_mod = std::move(m);
    o.dtype = dt;
    return attention::flex::score_frame(o, false);
  };
  auto fixed = [&](attention::ScoreMod m, DType dt = DType::bf16) {
    return frame(std::move(m), dt).kind == ScoreFrame::FixedReference;
  };
  Buffer slopes(16, Backend::Interpreter);
  CHECK(fixed(attention::softcap(50.f)));
  CHECK(fixed(attention::softcap(capture(-55.f))));  // the sign of a captured cap does not matter
  CHECK_FALSE(fixed(attention::softcap(55.5f)));
  CHECK_FALSE(fixed(attention::softcap(50.f), DType::f16));  // P in f16 has no room for the reference's window
  CHECK(fixed(attention::softcap(capture(0.f))));              // |cap| ≥ FLT_MIN: all scores 0
  CHECK(fixed(attention::softcap(capture(int32_t(30)))));
  CHECK(fixed(attention::compose(attention::alibi(capture(slopes, DType::f32)), attention::softcap(30.f))));
  // The same math written by a user, with a literal or a captured cap of either sign, and other narrow mods.
  CHECK(fixed([](Tile s, Tile, Tile, Tile, Tile) { return 50.f * tanh(s / 50.f); }));
  Captured user_cap = capture(-50.f);
  attention::ScoreMod user_softcap = [user_cap](Tile s, Tile, Tile, Tile, Tile) { return user_cap() * tanh(s / user_cap()); };
  CHECK(fixed(user_softcap));
  user_cap.set(80.0);  // read at each launch: a larger cap switches to the running max
  CHECK(frame(user_softcap).kind == ScoreFrame::Ordinary);
  CHECK(fixed([](Tile s, Tile, Tile, Tile, Tile) { return sigmoid(s) * 4.f; }));
  CHECK(std::abs(frame([](Tile s, Tile, Tile, Tile, Tile) { return sigmoid(s); }).reference - 1.4426950f) < 1e-6f);
  // Caps near the window's middle: R = min(C, 100 − C), C = |cap|·log2e.
  CHECK(std::abs(frame(attention::softcap(50.f)).reference - float(100 - 50 * 1.4426950408889634)) < 1e-4f);
  CHECK(std::abs(frame(attention::softcap(20.f)).reference - float(20 * 1.4426950408889634)) < 1e-4f);
  // Wider or unbounded: the ordinary frame, or the exact one.
  CHECK(frame([](Tile s, Tile, Tile, Tile, Tile) { return s * 0.5f; }).kind == ScoreFrame::Ordinary);
  CHECK(frame(attention::alibi(capture(slopes, DType::f32))).kind == ScoreFrame::Ordinary);  // its built-in form
  CHECK(frame(attention::alibi(capture(slopes, DType::f32)), DType::f16).kind == ScoreFrame::Ordinary);
  CHECK(attention::flex::score_frame(o, true).kind == ScoreFrame::AnyFinite);  // packed: its function, slopes loaded
  CHECK(frame([](Tile s, Tile, Tile, Tile, Tile) { return s - 1e10f; }).kind == ScoreFrame::AnyFinite);
  // Narrow but far from 0 (R would not be exact in f32): the exact frames, not the fixed reference.
  CHECK(frame([](Tile s, Tile, Tile, Tile, Tile) { return sigmoid(s) - 1e30f; }).kind == ScoreFrame::AnyFinite);
  CHECK(frame([](Tile s, Tile, Tile, Tile, Tile) { return sigmoid(s) + 1e6f; }).kind == ScoreFrame::Ordinary);
  // Products and quotients of captured scalars keep their ranges (the probe keeps exact floats).
  Captured two = capture(2.f);
  CHECK(fixed([two](Tile s, Tile, Tile, Tile, Tile) { return (tanh(s) * two()) * 3.f; }));
  CHECK(fixed([two](Tile s, Tile, Tile, Tile, Tile) { return tanh(s) / two(); }));
  CHECK(frame({}).kind == ScoreFrame::Ordinary);
  // The fixed reference's kernel has one exp2 per key block (no rescaling factor) where the running max's has two.
  attention::FlexShape s{.batch = 1, .heads_q = 2, .seqlen_q = 100, .seqlen_k = 100, .head_dim_qk = 64};
  auto exp2s = [](const std::string &ir) { return occurrences(ir, "exp2"); };
  o.dtype = DType::bf16;
  o.score_mod = attention::softcap(50.f);
  std::string with_bound = attention::flex_forward_ir(s, o);
  o.score_mod = attention::softcap(60.f);
  std::string online = attention::flex_forward_ir(s, o);
  CHECK(exp2s(with_bound) > 0);
  CHECK(exp2s(with_bound) < exp2s(online));
}

TEST_CASE("flex: a user's soft-cap lambda gets softcap()'s loop: one multiplication, tanh, the softmax's fma, exp2",
          "[flex]") {
  // The softmax scale and 1/cap fold into one product before tanh, cap goes into the softmax's fma
  // (ir reassociate_scalar_factors), and the range [−cap, cap] at this launch drops the running max (ScoreFrame):
  // per score a mul, a tanh, an fma and an exp2, and no row max, whoever wrote the mod and however the cap is held.
  attention::FlexShape s{.batch = 1, .heads_q = 2, .seqlen_q = 256, .seqlen_k = 256, .head_dim_qk = 64};
  attention::FlexOptions o;
  o.dtype = DType::bf16;
  o.block_m = 128;
  o.block_n = 64;
  o.num_warps = 8;
  Captured cap = capture(50.f);
  const std::vector<std::pair<const char *, attention::ScoreMod>> mods = {
      {"softcap()", attention::softcap(cap)},
      {"a lambda over a captured cap", [cap](Tile x, Tile, Tile, Tile, Tile) { return cap() * tanh(x / cap()); }},
      {"a lambda over a literal cap", [](Tile x, Tile, Tile, Tile, Tile) { return 50.f * tanh(x / 50.f); }},
  };
  for (const auto &[name, mod] : mods) {
    INFO(name);
    o.score_mod = mod;
    std::string loop = first_key_loop(s, o);
    INFO(loop);
    CHECK(per_score(loop, "mul") == 1);
    CHECK(per_score(loop, "tanh") == 1);
    CHECK(per_score(loop, "fma") == 1);
    CHECK(per_score(loop, "exp2") == 1);
    CHECK(loop.find("kind = max") == std::string::npos);
    CHECK(per_score(loop, "div") == 0);
  }
}

TEST_CASE("flex: a user's ALiBi lambda converts its positions per row and column, not per score", "[flex]") {
  // abs(q_idx − kv_idx).to(f32): with every position below 2^24 (SMALL_POSITIONS) the conversion moves before the
  // broadcast (ir convert_before_broadcast), leaving an f32 subtract and abs per score; past 2^24 it stays.
  Buffer slopes(64, Backend::Interpreter);
  Captured sl = capture(slopes, DType::f32);
  attention::FlexOptions o;
  o.block_m = 128;
  o.block_n = 64;
  o.num_warps = 8;
  o.score_mod = [sl](Tile s, Tile, Tile h, Tile q, Tile kv) { return s - load(sl() + h) * abs(q - kv).to(DType::f32); };
  auto main_loop = [&](int seqlen) {
    return first_key_loop({.batch = 1, .heads_q = 2, .seqlen_q = seqlen, .seqlen_k = seqlen, .head_dim_qk = 64}, o);
  };
  const char *int_to_f32 = "tensor<128x64xi32> -> tensor<128x64xf32>";
  std::string small = main_loop(4096);
  INFO(small);
  CHECK(per_score(small, "cast", int_to_f32) == 0);
  CHECK(per_score(small, "abs", "tensor<128x64xi32>") == 0);
  CHECK(per_score(small, "abs") > 0);
  std::string huge = main_loop((1 << 24) + 1);
  CHECK(per_score(huge, "cast", int_to_f32) > 0);
  // And LLVM keeps it so: its instcombine folds f32(a) − f32(b) into f32(a − b) when it proves the difference
  // exact, which would bring back a conversion per score (32 per thread per loop here, one per exponential);
  // per row and column a thread converts 2 + 16 positions per loop.
  o.arch = "sm_90a";
  const std::string ptx =
      attention::flex_forward_ptx({.batch = 1, .heads_q = 2, .seqlen_q = 4096, .seqlen_k = 4096, .head_dim_qk = 64}, o);
  const size_t cvt = occurrences(ptx, "cvt.rn.f32.s32"), ex2 = occurrences(ptx, "ex2.approx");
  INFO("cvt.rn.f32.s32: " << cvt << ", ex2.approx: " << ex2);
  CHECK(ex2 > 0);
  CHECK(3 * cvt < 2 * ex2);
}

TEST_CASE("flex: the built-in ALiBi converts no key positions to f32 in its loop", "[flex][ptx]") {
  // Its distance goes through index_to_f32: f32(q_idx − start_n − the thread's first column) once per row
  // per key block, then an add of an immediate per score (codegen/lower_index_to_f32.cpp). The plain form
  // converted each key column each block: 16 per thread per loop at 128x64, 8 warps.
  attention::FlexShape s{.batch = 2, .heads_q = 16, .seqlen_q = 1024, .seqlen_k = 1024, .head_dim_qk = 128};
  Buffer slopes(64, Backend::Interpreter);
  attention::FlexOptions o;
  o.arch = "sm_90a";
  o.block_m = 128;
  o.block_n = 64;
  o.num_warps = 8;
  o.score_mod = attention::alibi(capture(slopes, DType::f32));
  std::string ptx = attention::flex_forward_ptx(s, o);
  size_t cvt = occurrences(ptx, "cvt.rn.f32.s32") + occurrences(ptx, "cvt.rn.f32.u32");
  INFO(cvt << " int → f32 conversions");
  CHECK(cvt > 0);
  CHECK(cvt <= 8);  // two loops (whole blocks, the last block) × (2 rows + 1 column coordinate) + slack
}
