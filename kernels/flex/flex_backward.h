// The flex attention backward's kernels (flex_backward_kernel.cpp) and their parameters; the entry point is
// attention::flex_backward (flex_backward.cpp). Not installed.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/flex/flex_internal.h"
#include "tilejit/autotune.h"

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
  bExactFrames,
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

/// The three kernels' arguments with placeholder pointers (flex_backward_ptx; the tuner's compiles): `main` for
/// the delta and dK/dV kernels, `dq` for the dQ kernel (its swapped block sizes). A block mask stands in where a
/// launch would walk one.
struct BackwardArgs {
  std::vector<detail::ArgValue> main, dq;
};
BackwardArgs placeholder_backward_args(const FlexShape &s, const FlexOptions &opt);
/// The dQ kernel's options for a call's (block sizes swapped; flex_backward.cpp).
FlexOptions dq_options(const FlexOptions &opt);
/// The captures the dK/dV kernel reads that were made with a gradient buffer (Captured::set_grad), each once:
/// the backward adds into their gradient buffers.
std::vector<std::shared_ptr<detail::CaptureState>> learnable_captures(const FlexOptions &opt,
                                                                      std::span<const detail::ArgValue> args);

/// attention::flex_backward, returning the options it ran: with opt.autotune on the GPU, the tuner's pick (autotune
/// off); else opt (the band a mask function implies made explicit). What the C ABI and the CLI report.
FlexOptions run_backward(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse, DevicePtr dout,
                         DevicePtr dq, DevicePtr dk, DevicePtr dv, const FlexShape &s, const FlexOptions &opt);

/// The backward tuner's candidates (flex_backward_autotune.cpp): the tilings measured valid and competitive
/// (only those with a given block mask's block sizes, or when none has them those sizes on 4 or 8 warps with 2
/// or 3 stages), each with the copy methods of opt.arch unless opt or the environment fixes the method
/// (kernels::with_copy_methods_of). opt.arch must be set.
std::vector<autotune::Config> backward_candidates(const FlexOptions &opt);
/// The backward tuner's shape key: "bwd ", the forward's ingredients (flex_shape_key), the atomics mode and
/// whether learnable captures are present (their gradients' sums add work to the dK/dV kernel).
std::string backward_tuning_key(const FlexShape &s, const FlexOptions &opt, const Plan &p, bool learnable);
/// opt with the backward tuner's winner for this shape and these mods applied and autotune off: tunes on the
/// first call per key (dq, dk, dv and learnable captures' gradient buffers are restored afterwards, so the
/// call that follows leaves them as an untuned call would); opt's own config when the call has no queries or a
/// learnable capture's gradient buffer has no known size (it could not be restored). `learnable`: the call's
/// learnable captures (learnable_captures, which run_backward has found and checked). GPU only.
FlexOptions tuned_flex_backward_options(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse,
                                        DevicePtr dout, DevicePtr dq, DevicePtr dk, DevicePtr dv, const FlexShape &s,
                                        const FlexOptions &opt,
                                        const std::vector<std::shared_ptr<detail::CaptureState>> &learnable);

}  // namespace tilejit::attention::flex
