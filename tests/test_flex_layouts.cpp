// Masks and score_mods that gather from captured tables must not force layout conversions in the flex
// kernel's inner loop: the gathered values are planned in the layout of the scores (the MMA accumulator),
// so the kernel keeps the register budget and the barriers of a kernel without the gather. Checked with
// ptxas -v (sm_90a) on the flex kernel, and on the layout plan of a small hand-built kernel.
#include <catch2/catch.hpp>

#include <regex>

#include "codegen/assign_layouts.h"
#include "codegen/mma.h"
#include "test_codegen_util.h"
#include "test_ir_helpers.h"
#include "tilejit/flex_attention.h"
#include "tilejit/flex_variants.h"
#include "tilejit/ops.h"

using namespace tilejit;
using namespace tilejit::codegen;

namespace {

struct PtxStats {
  int registers = 0, spill_stores = 0, barriers = 0;
};

int count(const std::string &s, const std::string &what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

int log_number(const std::string &log, const char *pattern) {
  std::smatch m;
  REQUIRE(std::regex_search(log, m, std::regex(pattern)));
  return std::stoi(m[1].str());
}

/// The flex kernel for `opt` at B=2, H=16, S=4096, D=128, 64x64 blocks, 4 warps, 2 stages on sm_90a, through
/// ptxas -v.
PtxStats flex_stats(attention::FlexOptions opt, const std::string &tag) {
  attention::FlexShape s{.batch = 2, .heads_q = 16, .seqlen_q = 4096, .seqlen_k = 4096, .head_dim_qk = 128};
  opt.block_m = opt.block_n = 64;
  opt.num_warps = 4;
  opt.num_stages = 2;
  opt.arch = "sm_90a";
  std::string ptx = attention::flex_forward_ptx(s, opt);
  auto [rc, log] = codegen::testing::ptxas_v(ptx, opt.arch, "flex_layouts_" + tag);
  INFO(tag << ": ptxas says:\n" << log);
  REQUIRE(rc == 0);
  PtxStats st;
  st.registers = log_number(log, R"(Used (\d+) registers)");
  st.spill_stores = log_number(log, R"((\d+) bytes spill stores)");
  st.barriers = count(ptx, "bar.sync") + count(ptx, "barrier.sync");
  return st;
}

}  // namespace

TEST_CASE("layout assignment: a gathered mask meets the scores in the MMA layout", "[codegen][layout]") {
  using namespace tilejit::ir;
  using namespace tilejit::ir::testing;
  FnBuilder f("gather");
  Value *table = f.param("table", P({}, DType::i32));
  Value *masks = f.param("masks", P({}, DType::i1));
  // s = dot(a, b): [64, 64] f32 in the MMA accumulator layout.
  Value *s = f.op(OpKind::Dot, {f.cf(T({64, 16}, DType::bf16), 1), f.cf(T({16, 64}, DType::bf16), 1),
                                f.cf(T({64, 64}, DType::f32), 0)}, T({64, 64}, DType::f32));
  // limit = table[row] ([64, 1]); vis = col < limit; r = where(vis, s, -inf).
  Value *row = f.axis_op(OpKind::ExpandDims, f.arange(0, 64), T({64, 1}, DType::i32), 1);
  Value *ptr =
      f.op(OpKind::PtrAdd, {f.op(OpKind::Splat, {table}, P({64, 1}, DType::i32)), row}, P({64, 1}, DType::i32));
  Value *limit = f.op(OpKind::Load, {ptr}, T({64, 1}, DType::i32));
  Value *col = f.axis_op(OpKind::ExpandDims, f.arange(0, 64), T({1, 64}, DType::i32), 0);
  Value *vis = f.cmp(CmpPred::lt, f.op(OpKind::Broadcast, {col}, T({64, 64}, DType::i32)),
                     f.op(OpKind::Broadcast, {limit}, T({64, 64}, DType::i32)));
  // keep = table[col] != 0, gathered as a rank-1 tile and expanded: loaded in the slice of the MMA layout.
  Value *keep = f.op(OpKind::Load, {f.op(OpKind::PtrAdd, {f.op(OpKind::Splat, {table}, P({64}, DType::i32)),
                                                          f.arange(0, 64)}, P({64}, DType::i32))},
                     T({64}, DType::i32));
  Value *keep2 = f.op(OpKind::Broadcast, {f.axis_op(OpKind::ExpandDims, keep, T({1, 64}, DType::i32), 0)},
                      T({64, 64}, DType::i32));
  vis = f.op(OpKind::And, {vis, f.cmp(CmpPred::ne, keep2, f.ci(T({64, 64}, DType::i32), 0))}, T({64, 64}, DType::i1));
  Value *ninf = f.cf(T({64, 64}, DType::f32), -1e30);
  Value *r = f.op(OpKind::Select, {vis, s, ninf}, T({64, 64}, DType::f32));
  // A full [64, 64] mask tile is no gather: it keeps its pointers' layout, and the select still follows s.
  Value *mptr = f.op(OpKind::Splat, {masks}, P({64, 64}, DType::i1));
  Value *m = f.op(OpKind::Load, {mptr}, T({64, 64}, DType::i1));
  Value *r2 = f.op(OpKind::Select, {m, r, ninf}, T({64, 64}, DType::f32));
  Value *out = f.op(OpKind::Splat, {f.param("out", P({}, DType::f32))}, P({64, 64}, DType::f32));
  f.b.create(OpKind::Store, {out, r2}, {});

  LoweringPlan plan = assign_layouts(f.fn, 4);
  Layout mma = *mma_layout({64, 64}, 4);
  REQUIRE(plan.of(s) == mma);
  REQUIRE(plan.of(vis) == mma);
  REQUIRE(plan.of(r) == mma);
  REQUIRE(plan.of(limit) == reshape_same_params(mma, {64, 1}));  // loaded where the broadcast reads it
  REQUIRE_FALSE(plan.rematerializable.count(limit));              // loaded once, not per use
  REQUIRE(plan.of(keep) == slice_layout(mma, 0));
  REQUIRE(plan.of(m) == default_layout({64, 64}, 4));
  REQUIRE(plan.of(r2) == mma);
  codegen::testing::compile_and_assemble(f.fn, "gather_plan");  // the gathers lower in the layouts planned for them
}

TEST_CASE("flex: masks and score_mods gathering from captured tables add no conversions to the loop",
          "[flex][ptx][layout]") {
  Buffer table(2 * 4096 * 4, Backend::Interpreter);
  Captured ids = capture(table, DType::i32), bias = capture(table, DType::f32);
  attention::FlexOptions plain, index_only, document, q_gather, kv_gather, kv_bias;
  // A mask function of the indices alone: the block-mask loop of the gathering masks, without a gather.
  index_only.mask = attention::Mask([](Tile, Tile, Tile q, Tile kv) { return kv <= q; });
  document.mask = attention::document_mask(ids);
  q_gather.mask = attention::Mask([ids](Tile, Tile, Tile q, Tile kv) {  // keys below a per-query limit
    return kv < load(ids() + attention::mod_q_token(q));
  });
  kv_gather.mask = attention::Mask([ids](Tile, Tile, Tile q, Tile kv) {  // keys seen from a per-key row on
    return load(ids() + attention::mod_k_token(kv)) <= q;
  });
  kv_bias.score_mod = attention::ScoreMod([bias](Tile score, Tile, Tile, Tile, Tile kv) {
    return score + load(bias() + attention::mod_k_token(kv));
  });

  PtxStats none = flex_stats(plain, "none"), index = flex_stats(index_only, "index_mask");
  CHECK(none.spill_stores == 0);
  CHECK(index.spill_stores == 0);
  // Margin 0: a layout conversion goes through shared memory between two barriers, so one conversion in a
  // key-block loop adds two barriers per loop (a gather left outside the MMA layout gives these variants 4
  // to 12 more than their gather-free counterparts). The masks run in one block-sparse loop, the score_mod
  // in the dense path's two loops; each is held to the gather-free kernel of the same loops, and all to the
  // kernel without mods.
  constexpr int kMargin = 0;
  struct Variant {
    const char *tag;
    const attention::FlexOptions &opt;
    const PtxStats &same_loops;
  };
  for (const Variant &v : {Variant{"document", document, index}, Variant{"q_gather", q_gather, index},
                           Variant{"kv_gather", kv_gather, index}, Variant{"kv_bias", kv_bias, none}}) {
    PtxStats st = flex_stats(v.opt, v.tag);
    INFO(v.tag << ": " << st.registers << " registers, " << st.spill_stores << " bytes spilled, " << st.barriers
               << " barriers (the same loops without a gather: " << v.same_loops.barriers << ", no mod: "
               << none.barriers << ")");
    CHECK(st.spill_stores == 0);
    CHECK(st.barriers <= v.same_loops.barriers + kMargin);
    CHECK(st.barriers <= none.barriers + kMargin);
  }
}
