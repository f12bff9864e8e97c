// The flex attention backward's kernels (flex_backward_kernel.cpp) and their parameters; the entry point is
// attention::flex_backward (flex_backward.cpp). Not installed.
#pragma once
#include <memory>

#include "kernels/flex/flex_internal.h"

namespace tilejit::attention::flex {

/// Parameters of the three backward kernels, in order. dQ, dK, dV have the strides of q, k, v; dO those of
/// out; delta those of lse. Varlen: the sequences' token ranges come from CU_SEQLENS_Q/K (as in the forward).
/// FAST_DQ: the f32 dQ accumulator DQ_ACC holds PAD_QK values per query row, the rows laid out as lse's.
enum BackwardParam : int {
  bQ, bK, bV, bO, bDO, bDQ, bDK, bDV, bLse, bDelta, bCuQ, bCuK, bDqAcc,
  bScale, bGroup, bSeqlenQ, bSeqlenK,
  bQb, bQh, bQs, bKb, bKh, bKs, bVb, bVh, bVs, bOb, bOh, bOs, bLb, bLh, bLs,
  bBandLeft, bBandRight, bBandBottomRight,
  // constexprs
  bBlockM, bBlockN, bDimQK, bDimV, bPadQK, bPadV, bHasBand, bLarge, bVarlen, bFastDq,
  kNumBackwardParams
};

enum class BackwardKernel {
  Delta,  // D = rowsum(dO ∘ O), and (FAST_DQ) the dQ accumulator zeroed; grid (query blocks, query heads, batch)
  DkDv,   // dK, dV, and (FAST_DQ) dQ added into the accumulator; grid (key blocks, KV heads, batch)
  Dq,     // dQ: computed, or (FAST_DQ) converted from the accumulator; grid (query blocks, query heads, batch)
};
/// The kernel, traced per specialization and cached per (kernel, dtype, mods' identities).
std::shared_ptr<KernelBase> backward_kernel(BackwardKernel which, DType dt, const ScoreMod &score_mod,
                                            const Mask &mask);

}  // namespace tilejit::attention::flex
