// Random lowering plans for tests: any well-formed layout for each value, written as a plan's text and
// read back (codegen/layout_text.h), so the lowering is checked against the interpreter whatever the layouts.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "codegen/layout_text.h"
#include "codegen/lowering_plan.h"
#include "codegen/mma.h"
#include "ir/ir.h"
#include "ir/parser.h"

namespace tilejit::testing {

/// A random layout of `shape` for num_warps: each of the 5 lane bits and log2(num_warps) warp bits goes to a
/// random parent dim, sizes per thread 1, 2 or 4 (at most twice the dim), a random order; a third of them a slice
/// of a parent with one more dim, a quarter with the tile dims in another order than the parent's.
inline codegen::Layout random_layout(const std::vector<int64_t> &shape, int num_warps, std::mt19937 &gen) {
  const int rank = int(shape.size());
  const bool slice = gen() % 3 == 0;
  const int prank = rank + (slice ? 1 : 0);
  codegen::Layout l;
  l.shape = shape;
  auto &p = l.parent;
  p.size_per_thread.assign(size_t(prank), 1);
  p.threads_per_warp.assign(size_t(prank), 1);
  p.warps_per_cta.assign(size_t(prank), 1);
  for (int bit = 0; bit < 5; ++bit) p.threads_per_warp[gen() % unsigned(prank)] *= 2;
  for (int w = num_warps; w > 1; w /= 2) p.warps_per_cta[gen() % unsigned(prank)] *= 2;
  for (int k = 0; k < prank; ++k) p.order.push_back(k);
  std::shuffle(p.order.begin(), p.order.end(), gen);
  const int dropped = slice ? int(gen() % unsigned(prank)) : -1;
  for (int k = 0; k < prank; ++k)
    if (k != dropped) l.dims.push_back(k);
  if (gen() % 4 == 0) std::shuffle(l.dims.begin(), l.dims.end(), gen);  // tile dims not in the parent's order
  for (int i = 0; i < rank; ++i) {
    int s = 1 << (gen() % 3);
    while (s > 2 * shape[size_t(i)]) s /= 2;  // up to twice the dim: registers holding copies
    p.size_per_thread[size_t(l.dims[size_t(i)])] = s;
  }
  return l;
}

/// plan_lowering's plan for opts with every tile value's layout replaced by a random one (but a tensor-core dot's
/// result, which keeps the MMA layout, and a loop's carried arguments, which keep their results'), written as text
/// and read back: what a plan's text may state.
inline std::pair<std::unique_ptr<ir::Function>, codegen::LoweringPlan> with_random_layouts(
    const ir::Function &fn, const codegen::CodegenOptions &opts, std::mt19937 &gen) {
  codegen::LoweringPlan plan = codegen::plan_lowering(fn, opts);
  for (auto &[v, l] : plan.layouts)
    if (!(v->def && v->def->kind == ir::OpKind::Dot && codegen::dot_uses_mma(*v->def, opts.num_warps)))
      l = random_layout(l.shape, opts.num_warps, gen);
  ir::walk(*fn.body, [&](ir::Op &op) {
    if (op.kind == ir::OpKind::For)
      for (int i = 0; i < op.num_results(); ++i)
        if (!op.result(i)->type.is_scalar()) plan.layouts[op.region(0)->arg(1 + i)] = plan.layouts.at(op.result(i));
  });
  const std::string text = codegen::print_layouts(fn, opts, {}, &plan);
  ir::TypeNotes notes;
  auto read = ir::parse(text, &notes);
  codegen::LoweringPlan back = codegen::read_layouts(*read, notes, opts);
  CHECK(codegen::print_layouts(*read, opts, {}, &back) == text);
  return {std::move(read), std::move(back)};
}

}  // namespace tilejit::testing
