// Layout math (codegen/layout.h) and layout assignment checked against brute force over every thread and
// register.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "codegen/assign_layouts.h"
#include "codegen/axis_info.h"
#include "codegen/layout.h"
#include "test_ir_helpers.h"

using namespace tilejit;
using namespace tilejit::codegen;

namespace {

// The documented formula, evaluated the slow way: mixed-radix lane/warp ids in `order`.
std::vector<int64_t> reference_coord(const Layout &l, int tid, int64_t r) {
  const auto &p = l.parent;
  int P = p.rank();
  std::vector<int> lane_k(static_cast<size_t>(P)), warp_k(static_cast<size_t>(P));
  int lane = tid % 32, warp = tid / 32;
  for (int k : p.order) {
    lane_k[size_t(k)] = lane % p.threads_per_warp[size_t(k)];
    lane /= p.threads_per_warp[size_t(k)];
    warp_k[size_t(k)] = warp % p.warps_per_cta[size_t(k)];
    warp /= p.warps_per_cta[size_t(k)];
  }
  std::vector<int64_t> regs_along(static_cast<size_t>(l.rank()));
  for (int i = 0; i < l.rank(); ++i) {
    int k = l.dims[size_t(i)];
    int64_t F = int64_t(p.size_per_thread[size_t(k)]) * p.threads_per_warp[size_t(k)] * p.warps_per_cta[size_t(k)];
    regs_along[size_t(i)] = p.size_per_thread[size_t(k)] * std::max<int64_t>(1, l.shape[size_t(i)] / F);
  }
  std::vector<int64_t> c(static_cast<size_t>(l.rank()));
  for (int i = l.rank() - 1; i >= 0; --i) {
    int64_t idx = r % regs_along[size_t(i)];
    r /= regs_along[size_t(i)];
    int k = l.dims[size_t(i)];
    int64_t s = p.size_per_thread[size_t(k)], t = p.threads_per_warp[size_t(k)], w = p.warps_per_cta[size_t(k)];
    int64_t rep = idx / s, j = idx % s;
    c[size_t(i)] = (rep * s * t * w + (warp_k[size_t(k)] * t + lane_k[size_t(k)]) * s + j) % l.shape[size_t(i)];
  }
  return c;
}

void check_layout(const Layout &l) {
  INFO(l.str());
  int nt = l.num_threads();
  int64_t nr = l.num_regs();
  std::map<std::vector<int64_t>, int> owners;  // element → number of (owner thread, non-duplicate reg) holders
  std::set<std::vector<int64_t>> covered;
  for (int tid = 0; tid < nt; ++tid)
    for (int64_t r = 0; r < nr; ++r) {
      auto c = l.coord(tid, r);
      REQUIRE(c == reference_coord(l, tid, r));
      covered.insert(c);
      if (l.is_owner(tid) && !l.reg_is_duplicate(r)) ++owners[c];
    }
  int64_t numel = 1;
  for (auto d : l.shape) numel *= d;
  REQUIRE(int64_t(covered.size()) == numel);  // every element is held by some thread
  REQUIRE(int64_t(owners.size()) == numel);
  for (auto &[c, n] : owners) REQUIRE(n == 1);  // exactly one owner per element

  // Replication bits: flipping a bit in the mask never changes a coordinate; flipping any other bit does.
  for (int bit = 0; bit < 5; ++bit) {
    bool in_mask = (l.lane_replication_mask() >> bit) & 1;
    bool changes = false;
    for (int tid = 0; tid < nt; ++tid)
      for (int64_t r = 0; r < nr; ++r) changes |= l.coord(tid, r) != l.coord(tid ^ (1 << bit), r);
    REQUIRE(changes == !in_mask);
  }
  for (int bit = 0; (1 << bit) < l.num_warps(); ++bit) {
    bool in_mask = (l.warp_replication_mask() >> bit) & 1;
    bool changes = false;
    for (int tid = 0; tid < nt; ++tid)
      for (int64_t r = 0; r < nr; ++r) changes |= l.coord(tid, r) != l.coord(tid ^ (32 << bit), r);
    REQUIRE(changes == !in_mask);
  }
  // Duplicate registers: same coordinates as an earlier register in every thread.
  for (int64_t r = 0; r < nr; ++r) {
    bool dup = false;
    for (int64_t q = 0; q < r && !dup; ++q) {
      bool same = true;
      for (int tid = 0; tid < nt && same; ++tid) same = l.coord(tid, r) == l.coord(tid, q);
      dup = same;
    }
    REQUIRE(l.reg_is_duplicate(r) == dup);
  }
}

}  // namespace

TEST_CASE("default layouts: coordinates, coverage, replication bits and owners match brute force", "[codegen][layout]") {
  std::vector<std::vector<int64_t>> shapes = {{1024}, {64},   {8},      {1},     {4, 128}, {64, 64},
                                              {64, 128}, {16, 2}, {2, 16}, {1, 64}, {64, 1},  {32, 8, 4}};
  for (int warps : {1, 4, 8})
    for (auto &s : shapes) {
      Layout l = default_layout(s, warps);
      REQUIRE(l.num_threads() == 32 * warps);
      check_layout(l);
    }
}

TEST_CASE("default layout parameters", "[codegen][layout]") {
  Layout l = default_layout({64, 64}, 4);
  REQUIRE(l.parent.size_per_thread == std::vector<int>{1, 4});
  REQUIRE(l.parent.threads_per_warp == std::vector<int>{2, 16});
  REQUIRE(l.parent.warps_per_cta == std::vector<int>{4, 1});
  REQUIRE(l.parent.order == std::vector<int>{1, 0});
  REQUIRE(l.num_regs() == 32);
  Layout v = default_layout({1024}, 4);
  REQUIRE(v.num_regs() == 8);  // 1024 / 128 threads
  REQUIRE(v.lane_replication_mask() == 0);
  REQUIRE(v.warp_replication_mask() == 0);
}

TEST_CASE("slice and expand layouts are consistent and replicate the dropped dim", "[codegen][layout]") {
  for (int warps : {1, 4}) {
    Layout p = default_layout({64, 32}, warps);
    for (int axis : {0, 1}) {
      Layout s = slice_layout(p, axis);
      check_layout(s);
      Layout e = expand_layout(s, axis);
      REQUIRE(e.dims == p.dims);
      REQUIRE(slice_layout(e, axis) == s);
      check_layout(e);
      // Broadcasting the expanded layout back over the full shape gives the parent distribution.
      REQUIRE(same_distribution(reshape_same_params(e, p.shape), p));
    }
    // Expanding a layout that slices nothing adds a trivial parent dim.
    Layout one = default_layout({128}, warps);
    Layout e = expand_layout(one, 1);
    REQUIRE(e.parent.rank() == 2);
    check_layout(e);
  }
}

TEST_CASE("same_distribution compares coordinates, not parameters", "[codegen][layout]") {
  Layout a = default_layout({64, 64}, 4);
  Layout b = a;
  REQUIRE(same_distribution(a, b));
  b.parent.size_per_thread = {1, 2};
  b.parent.threads_per_warp = {1, 32};
  REQUIRE_FALSE(same_distribution(a, b));
  // Same coordinates from different parameters: leftover lanes replicating dim 0 vs a sliced-away dim.
  Layout c = default_layout({8}, 1);
  Layout d;
  d.parent = BlockedLayout{{4, 1}, {2, 16}, {1, 1}, {0, 1}};
  d.dims = {0};
  d.shape = {8};
  check_layout(d);
  REQUIRE_FALSE(c == d);
  REQUIRE(same_distribution(c, d));
  d.parent.order = {1, 0};  // now lane bit 4 (not bit 0) picks the half
  REQUIRE_FALSE(same_distribution(c, d));
}

TEST_CASE("layout assignment: reductions slice, expand+broadcast recover the parent", "[codegen][layout]") {
  using namespace tilejit::ir;
  using namespace tilejit::ir::testing;
  FnBuilder f("plan");
  Value *x = f.param("x", P({}, DType::f32), true);
  Value *ptrs = f.op(OpKind::Splat, {x}, P({64, 64}, DType::f32));
  Value *offs_m = f.arange(0, 64);
  Value *e = f.axis_op(OpKind::ExpandDims, offs_m, T({64, 1}, DType::i32), 1);
  Value *bc = f.op(OpKind::Broadcast, {e}, T({64, 64}, DType::i32));
  Value *p2 = f.op(OpKind::PtrAdd, {ptrs, bc}, P({64, 64}, DType::f32));
  Value *v = f.op(OpKind::Load, {p2}, T({64, 64}, DType::f32));
  Attrs ra;
  ra.axis = 1;
  ra.reduce = ReduceKind::max;
  Value *m = f.op(OpKind::Reduce, {v}, T({64}, DType::f32), ra);
  Value *me = f.axis_op(OpKind::ExpandDims, m, T({64, 1}, DType::f32), 1);
  Value *mb = f.op(OpKind::Broadcast, {me}, T({64, 64}, DType::f32));
  Value *d = f.op(OpKind::Sub, {v, mb}, T({64, 64}, DType::f32));
  LoweringPlan plan = assign_layouts(f.fn, 4);
  Layout def = default_layout({64, 64}, 4);
  REQUIRE(plan.of(v) == def);               // the pointer's offsets got the default layout of the broadcast shape
  REQUIRE(plan.of(m) == slice_layout(def, 1));
  REQUIRE(same_distribution(plan.of(mb), def));  // no conversion needed for the subtraction
  REQUIRE(plan.of(d) == def);
  REQUIRE(plan.rematerializable.count(offs_m));
  REQUIRE_FALSE(plan.rematerializable.count(v));
}

TEST_CASE("axis info: contiguity and divisibility of pointer offsets", "[codegen][layout]") {
  using namespace tilejit::ir;
  using namespace tilejit::ir::testing;
  FnBuilder f("axis");
  Value *x = f.param("x", P({}, DType::f32), true);
  Value *n = f.param("n", S(DType::i32), false, true);
  Value *stride = f.param("stride", S(DType::i32), false, false);
  Value *pid = f.program_id();
  Value *base = f.op(OpKind::Mul, {pid, f.ci(S(DType::i32), 256)}, S(DType::i32));
  Value *offs = f.op(OpKind::Add, {f.op(OpKind::Splat, {base}, T({256}, DType::i32)), f.arange(0, 256)}, T({256}, DType::i32));
  Value *mask = f.cmp(CmpPred::lt, offs, f.op(OpKind::Splat, {n}, T({256}, DType::i32)));
  Value *p = f.op(OpKind::PtrAdd, {f.op(OpKind::Splat, {x}, P({256}, DType::f32)), offs}, P({256}, DType::f32));
  Value *bad_mask = f.cmp(CmpPred::lt, offs, f.op(OpKind::Splat, {stride}, T({256}, DType::i32)));
  Value *scaled = f.op(OpKind::Mul, {offs, f.op(OpKind::Splat, {stride}, T({256}, DType::i32))}, T({256}, DType::i32));
  auto info = analyze_axis_info(f.fn);
  REQUIRE(info[offs].contig == 256);
  REQUIRE(info[offs].div == 256);
  REQUIRE(info[p].contig == 256);
  REQUIRE(info[p].div == 16);  // bytes: the parameter's alignment bounds it
  REQUIRE(info[mask].constancy == 16);
  REQUIRE(info[bad_mask].constancy == 1);  // stride is not known divisible
  REQUIRE(info[scaled].contig == 1);
  REQUIRE(pow2_divisor(48) == 16);
  REQUIRE(pow2_divisor(0) == (int64_t(1) << 30));
}
