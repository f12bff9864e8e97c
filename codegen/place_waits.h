// Place waits: the pass that decides, before the lowering, which wgmma dot of a loop is left running across the
// loop's back edge. By default an iteration ends waiting for every wgmma group it committed (wgmma.wait_group 0),
// so the tensor cores idle while the next iteration waits for its copies, synchronizes and issues them. A dot
// left running instead ends its iteration with wgmma.wait_group 1: the next iteration's copies and barrier
// overlap it, and its wgmmas continue its accumulators without a wait (the hardware orders wgmmas of one shape
// on the same accumulator registers: PTX ISA 8.5, 9.7.15.5.2). The same schedule as CUTLASS's sm90 mainloops
// and Triton's Hopper pipeliner (one MMA group in flight).
//
// When it reads the loop's stage buffers, one of them is still being read while the next iteration starts, so the
// loop's software pipeline copies one iteration less far ahead: num_stages − 2 iterations
// (LoweringPlan::lookahead). Such a dot is left running only with kMinStagesLeftRunning stages or more, so that
// the copies stay at least two iterations ahead: on shapes that stream from DRAM, prefetch depth mattered more
// than the overlap (bench/results/LEARNED.md), and a loop with fewer stages keeps its schedule. A dot reading
// only operands staged before the loop needs nothing of the pipeline.
//
// A dot D qualifies when it runs on wgmma, stands at the top level of a for loop's body, is the body's last dot,
// accumulates into a loop-carried value that nothing else reads (the body's argument read only by D, D's result
// only yielded), and its wgmmas read both operands from shared memory that no later op of the iteration reuses:
// A from the loop's stage buffer in wgmma's row order or staged in that order and in shared memory throughout the
// loop (LoweringPlan::in_shared; not a folded transpose), B from the loop's stage buffer or staged for wgmma and
// in shared memory throughout the loop. A dot whose operands are staged in the scratch space at the dot, or read from registers, does not.
// Pure; no LLVM.
#pragma once
#include <string>
#include <unordered_set>

#include "codegen/lowering_plan.h"
#include "ir/ir.h"

namespace tilejit::codegen {

/// The fewest stages of a pipeline whose buffers a dot left running reads (copies num_stages − 2 ahead).
inline constexpr int kMinStagesLeftRunning = 4;
/// The same for a loop a producer warpgroup feeds (codegen/specialize_warps.h): its stages are refilled as they
/// are released, not num_stages − 1 iterations ahead.
inline constexpr int kMinStagesLeftRunningFed = 3;

/// Fills plan.running for fn (plan's layouts, folded transposes, pipelines and staging already decided): each
/// loop's qualifying dot. With `only`, only dots whose results are in it (a text's "running" marks; the caller
/// checks that each was taken).
void place_waits(const ir::Function &fn, LoweringPlan &plan, const std::unordered_set<const ir::Value *> *only = nullptr);

/// Why place_waits does not leave `dot` running with plan's other decisions (the reason a "running" mark is
/// refused); empty when it does.
std::string why_not_running(const ir::Function &fn, const LoweringPlan &plan, const ir::Op &dot);

/// The results of the dots some loop of plan leaves running (a plan's "running" marks).
std::unordered_set<const ir::Value *> running_dots(const LoweringPlan &plan);

}  // namespace tilejit::codegen
