// Layout assignment: gives every tile value (rank ≥ 1) of a function a distributed Layout. Pure; no LLVM.
//
// Forward propagation in program order (see codegen/layout.h for what a layout is):
// - anchors (Constant, Arange, Splat, Trans, Reshape results) take the default layout of their shape;
// - elementwise ops (and Load/AtomicAdd through their pointer) take the layout of their first tile operand
//   that is not *free* (rematerializable: Constant/Splat/Arange and elementwise ops over those, recomputed
//   in any layout at each use; or open, below), preferring an operand in the MMA accumulator layout when
//   they disagree; the default layout when all are free;
// - Reduce/ArgReduce → slice of the operand's layout; ExpandDims → the operand's parent when the operand is
//   a slice missing exactly one parent dim, otherwise the default layout of the shape the result is
//   broadcast to (its only use), with the operand converted; Broadcast keeps the operand's parameters;
// - Dot takes its accumulator's layout (default [M,N] when the accumulator is rematerializable);
// - For: region args start with their init's layout and are re-assigned to the yielded layout until it is
//   stable (so a constant-initialized accumulator takes the layout the loop body produces);
//   If results take the then-branch's yielded layouts.
// Open values: a *gather* (a Load of at most one dim above 1 whose operands are rematerializable or open,
// e.g. a table lookup at q_idx [M, 1] or kv_idx [1, N]) and the broadcasts, expansions and elementwise ops
// over gathers and rematerializable values only. They are computed once (not rematerializable), but their
// layout stays open while picking; afterwards, in reverse program order, each takes the layout its first
// user that cares reads it in (elementwise: the result's; Broadcast/ExpandDims: the result's reshaped /
// sliced; Load, Store: the access's; yields and loop inits: the carried value's), so a lookup compared with
// the scores of a dot is loaded straight into the MMA layout instead of the scores being converted.
// The lowering converts operands whose layout differs from what an op needs (required_operand_layout).
#pragma once
#include <unordered_map>
#include <unordered_set>

#include "codegen/layout.h"
#include "codegen/lowering_plan.h"
#include "ir/ir.h"
#include "ir/passes.h"
#include "tilejit/export.h"

namespace tilejit::codegen {

/// A plan with fn's layouts for num_warps (layouts and rematerializable; the other passes fill the rest).
TILEJIT_EXPORT LoweringPlan assign_layouts(const ir::Function &fn, int num_warps);

}  // namespace tilejit::codegen
