// The flex attention backward's kernels (flex_backward_kernel.cpp) and their parameters; the entry point is
// attention::flex_backward (flex_backward.cpp). Not installed.
#pragma once
#include <memory>

#include "kernels/flex/flex_internal.h"

namespace tilejit::attention::flex {

/// Parameters of the three backward kernels, in order. dQ, dK, dV have the strides of q, k, v; dO those of
/// out; delta those of lse. Varlen: the sequences' token ranges come from CU_SEQLENS_Q/K (as in the forward).
/// ATOMICS: the f32 dQ accumulator DQ_ACC holds PAD_QK values per query row, the rows laid out as lse's.
/// USE_BLOCK_MASK: the dQ kernel walks the key blocks of its query block's list (KV_BLOCKS/KV_COUNTS, a
/// BlockMask's), the dK/dV kernel the query blocks of its key block's transposed list (Q_BLOCKS/Q_COUNTS,
/// build_transposed_lists); list (b, h, block) is at b·stride_b + h·stride_h + block (strides 0 when shared).
/// The sequence strides bQs, bKs, bVs, bOs are constexprs (add_stride_params), though listed among the strides.
enum BackwardParam : int {
  bQ, bK, bV, bO, bDO, bDQ, bDK, bDV, bLse, bDelta, bCuQ, bCuK, bDqAcc, bKvBlocks, bKvCounts, bQBlocks, bQCounts,
  bScale, bGroup, bSeqlenQ, bSeqlenK,
  bQb, bQh, bQs, bKb, bKh, bKs, bVb, bVh, bVs, bOb, bOh, bOs, bLb, bLh, bLs,
  bBandLeft, bBandRight, bBandBottomRight,
  bNumQBlocks, bNumKBlocks, bListsStrideB, bListsStrideH, bTListsStrideB, bTListsStrideH,
  // constexprs
  bBlockM, bBlockN, bDimQK, bDimV, bPadQK, bPadV, bHasBand, bLarge, bVarlen, bAtomics, bUseBlockMask, bSmallPositions,
  kNumBackwardParams
};

enum class BackwardKernel {
  Delta,  // D = rowsum(dO ∘ O), and (ATOMICS) the dQ accumulator zeroed; grid (query blocks, query heads, batch)
  DkDv,   // dK, dV, and (ATOMICS) dQ added into the accumulator; grid (key blocks, KV heads, batch)
  Dq,     // dQ: computed, or (ATOMICS) converted from the accumulator; grid (query blocks, query heads, batch)
};
/// The kernel, traced per specialization and cached per (kernel, dtype, mods' identities).
std::shared_ptr<KernelBase> backward_kernel(BackwardKernel which, DType dt, const ScoreMod &score_mod,
                                            const Mask &mask);

}  // namespace tilejit::attention::flex
