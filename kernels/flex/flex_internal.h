// Internal pieces of the flex attention kernels (kernels/flex/): the parameter tables built at run time
// (these kernels use KernelBase directly: the parameter list is long and the traced body depends on the
// user's mods), the mod context (mod_seqlen_q/k), and the visibility test shared by the attention kernel
// and the block-mask kernel. Not installed.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tilejit/flex_attention.h"
#include "tilejit/kernel.h"

namespace tilejit::attention::flex {

/// A kernel parameter list assembled by name; indices are the order of add().
struct ParamTable {
  std::vector<detail::ParamDecl> decls;
  std::vector<std::string> names;
  /// specialize = false: the parameter's value never enters the specialization key (KernelOptions).
  int add(std::string name, detail::ParamKind kind, DType dtype = DType::i32, bool specialize = true) {
    decls.push_back({kind, dtype, specialize});
    names.push_back(std::move(name));
    return int(decls.size()) - 1;
  }
};

inline detail::ArgValue ptr_arg(DevicePtr p) {
  detail::ArgValue a;
  a.kind = detail::ArgValue::Kind::Pointer;
  a.address = p.address;
  a.bytes = p.bytes;
  return a;
}
inline detail::ArgValue int_arg(int64_t v) {
  detail::ArgValue a;
  a.kind = detail::ArgValue::Kind::Integer;
  a.i = v;
  return a;
}
inline detail::ArgValue float_arg(double v) {
  detail::ArgValue a;
  a.kind = detail::ArgValue::Kind::Float;
  a.f = v;
  return a;
}

/// Makes mod_seqlen_q()/mod_seqlen_k() return these tiles while alive (one per trace; nests).
class ModScope {
 public:
  /// q_start/k_start: the sequence's first packed token (varlen); dense layouts pass b·seqlen.
  ModScope(Tile seqlen_q, Tile seqlen_k, Tile q_start, Tile k_start);
  ~ModScope();
  ModScope(const ModScope &) = delete;
  ModScope &operator=(const ModScope &) = delete;
  Tile seqlen_q, seqlen_k, q_start, k_start;

 private:
  ModScope *previous_;
};

/// The band's runtime parameters inside a kernel: left/right (kUnbounded when open) and the offset
/// (0 or seqlen_k − seqlen_q).
struct BandTiles {
  Tile left, right, off;
};
/// Stand-in for an unbounded side: large enough for any length, small enough that i + off ± it fits i32.
constexpr int64_t kUnbounded = int64_t(1) << 30;

/// Band test for broadcastable q_idx / kv_idx (i1).
Tile in_band(const BandTiles &band, const Tile &q_idx, const Tile &kv_idx);
/// band ∧ fn at (b, h, q_idx, kv_idx); `has_band` says whether band is used. Returns an empty Tile when the
/// mask has neither (everything visible).
Tile visible(const Mask &mask, bool has_band, const BandTiles &band, const Tile &b, const Tile &h,
             const Tile &q_idx, const Tile &kv_idx);

/// Host-side band parameters: (left, right, bottom_right) with kUnbounded for open sides.
struct BandArgs {
  int64_t left = kUnbounded, right = kUnbounded, bottom_right = 0;
};
BandArgs band_args(const std::optional<Band> &band);

/// Launch config from the flex options.
LaunchConfig launch_config(const FlexOptions &opt);

/// Parameters of the flex attention kernel, in order (see flex_kernel.cpp for their meaning).
enum FlexParam : int {
  kQ, kK, kV, kO, kLse, kCuQ, kCuK, kKvBlocks, kKvCounts,
  kScale, kHeads, kGroup, kSeqlenQ, kSeqlenK,
  kQb, kQh, kQs, kKb, kKh, kKs, kVb, kVh, kVs, kOb, kOh, kOs, kLb, kLh,
  kBandLeft, kBandRight, kBandBottomRight, kNumQBlocks, kNumKBlocks,
  // constexprs
  kBlockM, kBlockN, kDimQK, kDimV, kPadQK, kPadV, kVarlen, kHasBand, kUseBlockMask, kLarge, kSoftcapBound,
  kNumFlexParams
};
/// How many traced kernels (per kind: attention, block mask) are kept for distinct mod objects; the least
/// recently used beyond this are dropped (a later call with that mod traces again; compiled code stays
/// cached by IR).
constexpr size_t kMaxCachedModKernels = 64;
/// Whether the built-in soft-capping's bound replaces the online softmax's running max for a launch with
/// these options (SOFTCAP_BOUND, see flex_kernel.cpp): bf16, a built-in soft-cap (alone or after ALiBi) and
/// |cap| ≤ kSoftcapBoundMaxCap, with the cap's value at this launch.
bool softcap_bound(const FlexOptions &opt);
/// The largest |cap| whose scores' range, 2·|cap|·log2e in log2 units, fits the fixed reference's window.
constexpr float kSoftcapBoundMaxCap = 55.f;
/// The attention kernel for (dtype, score_mod, mask) — traced per specialization, cached per mod identity.
std::shared_ptr<KernelBase> flex_kernel(DType dtype, const ScoreMod &score_mod, const Mask &mask);
/// How many traced attention kernels are cached now (tests).
size_t flex_kernels_cached();

/// Parameters of the block-mask kernel, in order.
enum BlockMaskParam : int {
  bKvBlocks, bKvCounts, bCuQ, bCuK, bSeqlenQ, bSeqlenK, bHeads, bNumQBlocks, bNumKBlocks,
  bBandLeft, bBandRight, bBandBottomRight,
  bBlockM, bBlockN, bVarlen, bHasBand,
  kNumBlockMaskParams
};
std::shared_ptr<KernelBase> block_mask_kernel(const Mask &mask);
/// The block-mask kernel's arguments for writing into kv_blocks / counts.
std::vector<detail::ArgValue> block_mask_args(const Mask &mask, const FlexShape &s, const FlexOptions &opt,
                                              DevicePtr kv_blocks, DevicePtr counts, int num_q_blocks,
                                              int num_k_blocks);

/// Everything derived from (shape, options) that a launch needs (flex_forward.cpp).
struct Plan {
  bool varlen = false;
  int heads_kv = 0, dim_v = 0, nqb = 0, nkb = 0;
  Strides q, k, v, o;
  int64_t lse_b = 0, lse_h = 0;
  int64_t last_q = 0, last_k = 0, last_v = 0, last_o = 0, last_lse = 0;  // furthest element addressed
  bool large = false;
  bool work = false;
};
/// Validates (shape, options) and derives the plan; throws TraceError naming what is wrong.
Plan plan(const FlexShape &s, const FlexOptions &opt);
/// The flex kernel's argument list for a launch (bm: the block mask it visits, or null).
std::vector<detail::ArgValue> kernel_args(const Plan &p, const FlexShape &s, const FlexOptions &opt, DevicePtr q,
                                          DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse,
                                          const BlockMask *bm);
/// The same with placeholder pointers (IR / PTX dumps, compiles without a launch).
std::vector<detail::ArgValue> placeholder_kernel_args(const Plan &p, const FlexShape &s, const FlexOptions &opt);

/// opt with the autotuner's BLOCK_M, BLOCK_N, num_warps, num_stages for this shape and these mods, and
/// autotune off (flex_autotune.cpp). Tunes on the first call per key; the outputs are restored afterwards.
FlexOptions tuned_flex_options(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse,
                               const FlexShape &s, const FlexOptions &opt);

}  // namespace tilejit::attention::flex
