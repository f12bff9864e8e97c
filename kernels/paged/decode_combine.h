// The combine step of split-KV attention (flash-decoding): merges each row's partial outputs and logsumexps
// from the splits into the final output. Not installed.
#pragma once
#include <memory>
#include <vector>

#include "tilejit/kernel.h"

namespace tilejit::attention::paged {

/// Parameters of the combine kernel, in order.
enum CombineParam : int {
  cOPart, cLsePart, cO, cLse, cNumSplits, cPartStrideO, cPartStrideL,
  cDimV, cPadV, cSplitsPad, cLarge,
  kNumCombineParams
};
/// The combine kernel for outputs of dtype `dt`: program r merges row r (SPLITS_PAD: num_splits rounded up to a
/// power of two, the splits loaded at once). Row r's
/// split s holds o_part[s·part_stride_o + r·dim_v + (0 … dim_v)] (f32, normalized by the split's own sum) and
/// lse_part[s·part_stride_l + r] (natural log; −inf for a split that saw no key). out[r] = Σ_s w_s·o_s / Σ_s w_s
/// with w_s = exp(lse_s − max_s lse_s), lse[r] = max + log Σ w_s; a row no split saw gets 0 and −inf.
std::shared_ptr<KernelBase> combine_kernel(DType dt);

}  // namespace tilejit::attention::paged
