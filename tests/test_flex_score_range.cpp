// The range analysis of a score_mod (kernels/flex/score_range.h) and the softmax frame it chooses: bounded mods
// run FlashAttention-2's softmax with nothing added, mods that may return soft masks get the exact frames.
#include <catch2/catch.hpp>

#include <limits>
#include <regex>

#include "flex_reference.h"
#include "kernels/flex/flex_internal.h"
#include "tilejit/flex_attention.h"
#include "tilejit/ops.h"

using namespace tilejit;
using namespace tilejit::testing;

namespace {

// The exact frames test each row's max against the ordinary frame's bound (kernels/online_softmax.cpp): an abs
// of a row vector of f32 is in the kernel's IR exactly when a row may switch frames.
bool exact_frames(const attention::ScoreMod &mod) {
  attention::FlexShape s{.batch = 1, .heads_q = 2, .seqlen_q = 64, .seqlen_k = 64, .head_dim_qk = 32};
  attention::FlexOptions o;
  o.score_mod = mod;
  return std::regex_search(attention::flex_forward_ir(s, o), std::regex(R"(= abs %\d+ : tensor<\d+xf32>)"));
}

}  // namespace

TEST_CASE("flex: a score_mod's traced range chooses the softmax's frame", "[flex]") {
  Buffer table(64 * 4, Backend::Interpreter);
  auto bias = capture(table, DType::f32);
  const float cap = 30.f;
  // Bounded whenever the input score is: the plain softmax.
  CHECK_FALSE(exact_frames([](Tile s, Tile, Tile, Tile, Tile) { return s * 0.5f; }));
  CHECK_FALSE(exact_frames([cap](Tile s, Tile, Tile, Tile, Tile) { return cap * tanh(s / cap); }));
  CHECK_FALSE(exact_frames([](Tile s, Tile, Tile, Tile q, Tile kv) {
    return where(kv <= q, s, -std::numeric_limits<float>::infinity());
  }));
  CHECK_FALSE(exact_frames([](Tile s, Tile, Tile, Tile q, Tile kv) { return 0.5f * tanh(s) - 0.01f * abs(q - kv).to(DType::f32); }));
  // May leave the bounded range: the exact frames.
  CHECK(exact_frames([](Tile s, Tile, Tile, Tile, Tile) { return s - 1e10f; }));
  CHECK(exact_frames([](Tile s, Tile, Tile, Tile q, Tile kv) { return where(kv <= q, s, -1e30f); }));
  CHECK(exact_frames([](Tile s, Tile, Tile, Tile, Tile) { return s + 1.f; }));  // the input's bound, plus one
  CHECK(exact_frames([bias](Tile s, Tile, Tile, Tile q, Tile kv) { return s + load(bias() + abs(q - kv)); }));
  CHECK(exact_frames([](Tile s, Tile, Tile, Tile, Tile) { return s / 0.5f; }));
}

TEST_CASE("flex: a bounded user soft-cap matches float64 on the plain softmax", "[flex]") {
  FlexCase c;
  c.shape = {.batch = 1, .heads_q = 2, .seqlen_q = 70, .seqlen_k = 90, .head_dim_qk = 32};
  attention::FlexOptions o;
  o.score_mod = [](Tile s, Tile, Tile, Tile, Tile) { return 2.f * tanh(s / 2.f); };
  RefMods ref;
  ref.score = [](double s, int, int, int, int) { return 2.0 * std::tanh(s / 2.0); };
  require_matches(run_flex_case(Backend::Interpreter, c, o, ref), DType::bf16);
}

TEST_CASE("flex: a score_mod written for the kernel's tile shape runs, its range is then unknown (exact frames)",
          "[flex]") {
  // The range probe traces the mod alone on a 16x16 tile, where this mod's shape is wrong: the probe gives up
  // (an unknown range, the safe frame) and the kernel, whose tiles are 32x16, runs it.
  FlexCase c;
  c.shape = {.batch = 1, .heads_q = 2, .seqlen_q = 40, .seqlen_k = 50, .head_dim_qk = 32};
  c.block_m = 32;
  c.block_n = 16;
  attention::FlexOptions o;
  o.score_mod = [](Tile s, Tile, Tile, Tile, Tile) { return s + zeros({32, 16}, DType::f32); };
  CHECK(attention::flex::score_frame(o, false).kind == attention::flex::ScoreFrame::AnyFinite);
  RefMods ref;
  ref.score = [](double s, int, int, int, int) { return s; };
  require_matches(run_flex_case(Backend::Interpreter, c, o, ref), DType::bf16);
}

TEST_CASE("flex: a score_mod that returns +inf for every score is rejected at the launch, naming it", "[flex]") {
  attention::FlexShape shape{.batch = 1, .heads_q = 2, .seqlen_q = 40, .seqlen_k = 40, .head_dim_qk = 32};
  auto rejects = [&](attention::ScoreMod mod) {
    attention::FlexOptions o;
    o.score_mod = std::move(mod);
    std::string what;
    try {
      (void)attention::flex_forward_ir(shape, o);
    } catch (const TraceError &e) {
      what = e.what();
    }
    return what.find("the score_mod returns +inf for every score") != std::string::npos;
  };
  CHECK(rejects([](Tile s, Tile, Tile, Tile, Tile) { return full_like(s, std::numeric_limits<float>::infinity()); }));
  auto c = capture(std::numeric_limits<float>::infinity());
  CHECK(rejects([c](Tile s, Tile, Tile, Tile, Tile) { return s * 0.f + c(); }));
  // −inf (masked) and huge finite soft masks are scores.
  CHECK_FALSE(rejects([](Tile s, Tile, Tile, Tile q, Tile kv) {
    return where(kv <= q, s, -std::numeric_limits<float>::infinity());
  }));
  CHECK_FALSE(rejects([](Tile s, Tile, Tile, Tile, Tile) { return full_like(s, 3e38f); }));
}
