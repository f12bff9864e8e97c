// Stage operands: the pass that decides, before the lowering, which loop-invariant dot operands are written to
// shared memory of their own once, before their loop, instead of being staged at the dot in every iteration
// (attention's q, the backward's k and v), in which form, and where everything a loop keeps in shared memory
// lies: each staged operand (a static array while the 48 KB static budget lasts, else a region of the dynamic
// buffer) and each software pipeline's stage buffers.
//
// An operand qualifies when a dot in the loop (or in a loop nested in it) reads it, it is a rank-2 tile computed
// before the loop (not a folded transpose, not another loop's pipelined load) and
// - for a tensor-core dot: it is not an A already in MMA registers (used in place; with wgmma it is staged too,
//   see codegen/lower_dot_mma.cpp), and B is staged from its folded transpose's source. Forms: an A that
//   wgmma reads in its row order (wgmma_a_order), a B that a wgmma reads by descriptor (1024-byte aligned), or
//   the swizzled staging ldmatrix reads;
// - for an FMA dot: it is not an f32 operand of a tf32 dot; row-major, its dtype.
// Once staged, an operand is reused by later loops' dots of the same family (tensor-core or FMA: a dot of the
// other family stages it at the dot), except when it was staged inside an if region or a loop body (which may not
// have run). An operand that fits nowhere stays in registers. After the staging (one
// barrier) the A fragments of a staged A are loaded into registers once when they are few (not with wgmma).
//
// The dynamic buffer is laid out in the order the lowering emits: a pipeline's stage buffers start past the
// scratch in use at its loop (aligned to 1024 bytes with wgmma, else 128); a dynamic staged operand starts
// there too and stays for the rest of the kernel; scratch (layout conversions, dot staging) starts past both
// and is sized by the lowering. Pure; no LLVM.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_set>

#include "codegen/lowering_plan.h"
#include "ir/ir.h"

namespace tilejit::codegen {

/// Static shared memory the staged operands may take (the kernel's 48 KB static limit, with room to spare),
/// worst-case alignment padding counted.
inline constexpr int64_t kStaticStagingBytes = 44 * 1024;
/// Past this offset in the dynamic buffer no operand is staged: the loops' stage buffers and scratch would no
/// longer fit beside it (227 KB per block on sm_90, 163 KB on sm_80), and an operand in registers is cheaper
/// than a kernel that cannot launch.
inline constexpr int64_t kDynamicStagingBytes = 160 * 1024;

/// What a static array of `bytes` (rounded up to 16) aligned to `align` takes of kStaticStagingBytes, the padding
/// before it counted at its worst.
inline int64_t static_staging_cost(int64_t bytes, int64_t align) {
  return (bytes + 15) / 16 * 16 + (align > 16 ? align - 16 : 0);
}

/// Fills plan.staging and the pipelines' bases for fn (plan's layouts, folded transposes and pipelines already
/// decided). `dynamic`: operands may go to the dynamic buffer once the static budget is spent (the lowering
/// asks again without it when a kernel so planned exceeds a block's shared memory). With `only`, only operands
/// in it are staged (a text's "shared" marks; the caller checks that each was).
void stage_operands(const ir::Function &fn, LoweringPlan &plan, bool dynamic = true,
                    const std::unordered_set<const ir::Value *> *only = nullptr);

/// Why stage_operands does not stage v with plan's other decisions (the reason a "shared" mark is refused).
std::string why_not_staged(const ir::Function &fn, const LoweringPlan &plan, const ir::Value *v);

/// The operands some loop of plan stages (a plan's "shared" marks).
std::unordered_set<const ir::Value *> staged_operands(const LoweringPlan &plan);

}  // namespace tilejit::codegen
