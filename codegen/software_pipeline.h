// Software pipeline: the pass that decides, before the lowering, which loads of each `for` loop are copied ahead
// into a ring of num_stages shared-memory buffers with cp.async (sm_80+) and how many stages fit; the lowering
// emits those copies (codegen/pipeline.h says how the pipeline runs). A load qualifies when:
// - it is a tensor-core operand (an f16/bf16 rank-2 tile, ≥ 8 columns, read only as operand a or b of
//   tensor-core dots in the body, directly or through a folded transpose), its pointers proven contiguous and
//   16-byte aligned in groups of 8 elements along the last dim (axis info), its mask constant over those groups
//   and `other` zero; or
// - it is a small load (at most kMaxStagedValueElems f32 or i32 elements, any mask and `other`) read by other
//   ops, at the body's top level, its address depending on the induction variable, no store or atomic in the
//   body writing through its pointer's parameter (or through one not traced to a parameter: the copy runs up to
//   S-1 iterations ahead of those writes), no address of the pipeline depending on it, and staging it does not cost
//   the pipeline a stage — only in a loop that pipelines dot operands ("staged": read from its stage buffer into
//   registers);
// and its pointers and masks depend only on the induction variable, values from outside the loop and ops that
// can be re-lowered for another iteration (pure ops and unmasked integer index loads: the pipeline's slice). No
// loop with an acquire-release atomic is pipelined (the copies run ahead of it), nor any for num_stages < 2 or
// below sm_80; stages drop until they fit kMaxPipelineBytes, and a loop left with fewer than 2 has no pipeline.
// Loops are planned outermost first. Pure; no LLVM.
#pragma once
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "codegen/axis_info.h"
#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"
#include "ir/ir.h"

namespace tilejit::codegen {

/// 16 bytes of 16-bit elements: what one cp.async copies.
inline constexpr int64_t kChunkElems = 8;

/// x rounded up to a multiple of `a` (x ≥ 0, a > 0): where the plan places a buffer of alignment a past byte x.
inline int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

/// The alignment of a pipeline's stage buffers and of each load's buffer in a stage: 1024 bytes in a kernel that
/// uses wgmma (its descriptors read 1024-byte aligned swizzle atoms), else 128.
inline int64_t stage_buffer_align(bool use_wgmma) { return use_wgmma ? 1024 : 128; }

/// The loads a text marks for loops' pipelines: true for "staged" (to registers), false for "pipelined" (read by
/// dots from the stage buffer).
using PipelineMarks = std::unordered_map<const ir::Op *, bool>;

/// Fills plan.pipelines for fn compiled with opts (plan's layouts and folded transposes already decided), with
/// fn's axis info (analyze_axis_info). With `only`, a load is pipelined only as its mark says, and a marked load
/// that does not qualify is left out (the caller checks: plan.pipelined).
void plan_pipelines(const ir::Function &fn, const CodegenOptions &opts, const AxisInfoMap &axis, LoweringPlan &plan,
                    const PipelineMarks *only = nullptr);

/// Copies by cp.async the pipelined loads `keep_tma` says no to, and renumbers the plan's tensor maps for the rest.
void drop_unmarked_tma(const ir::Function &fn, LoweringPlan &plan, const std::function<bool(const ir::Op *)> &keep_tma);

/// Ops that may be re-lowered for another iteration: pure, no regions, no memory.
bool relowerable(ir::OpKind k);
/// Ops the lowering can recompute in any layout a user asks for ("remat"): constants, aranges, splats, expansions,
/// broadcasts and elementwise ops (relowerable but for reshapes and transposes).
bool can_rematerialize(ir::OpKind k);
/// An unmasked load of integer indices — a block-sparse loop's next key-block index, `load(list + i)`, or a
/// paged cache's page numbers, `load(block_table + cols / page_size)`: it may be re-lowered for a later
/// iteration too, guarded by that iteration's validity.
bool is_index_load(const ir::Op &op);
/// The Constant op every element of v comes from, looking through Splat, Broadcast, ExpandDims and Reshape
/// (and Cast with `through_casts`); null when v is not such a constant.
const ir::Op *splatted_constant(const ir::Value *v, bool through_casts);
/// The kernel parameter a pointer tile is computed from (through pointer arithmetic and shape ops), or null.
const ir::Value *pointer_root(const ir::Function &fn, const ir::Value *p);
/// The pointer roots that stores and atomics anywhere in `body` write through (null among them when one cannot
/// be traced to a parameter).
std::unordered_set<const ir::Value *> written_pointer_roots(const ir::Function &fn, const ir::Block &body);
/// True when v is zero in every element: a constant 0, possibly splatted, broadcast, reshaped or cast.
bool is_zero_tile(const ir::Value *v);

}  // namespace tilejit::codegen
