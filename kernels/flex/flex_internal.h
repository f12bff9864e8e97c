// Internal pieces of the flex attention kernels (kernels/flex/): the parameter tables built at run time
// (these kernels use KernelBase directly: the parameter list is long and the traced body depends on the
// user's mods), the mod context (mod_seqlen_q/k), and the visibility test shared by the attention kernel
// and the block-mask kernel. Not installed.
#pragma once
#include <cmath>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tilejit/flex_attention.h"
#include "tilejit/kernel.h"
#include "kernels/autotune_prior.h"
#include "kernels/paged/paged_cache.h"
#include "tilejit/paged_attention.h"

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

/// A program's sequence: its lengths and first tokens. Dense: the given lengths, b·seqlen; varlen: from
/// cu_seqlens_q/k[b] and [b + 1]. The attention kernel, the block-mask kernels and the mask analysis all trace
/// a mask inside the ModScope of this, so that they see the same positions.
struct Sequence {
  Tile seqlen_q, seqlen_k, q_start, k_start;
};
/// With `seq_lens` (a paged cache's lengths), seqlen_k = seq_lens[b] clamped to [0, max_seq_len] (the cache's
/// capacity per sequence: a length beyond it must not send the kernel past its block-table row) and k_start =
/// b·seqlen_k.
Sequence sequence(bool varlen, const Tile &b, const Tile &seqlen_q, const Tile &seqlen_k, const Tile &cu_q,
                  const Tile &cu_k, const Tile &seq_lens = Tile(), const Tile &max_seq_len = Tile());

/// Positions below this bound convert to f32 exactly (2^24).
constexpr int64_t kSmallPositionLimit = int64_t(1) << 24;
/// Whether every position a mod can see in this shape (below the longest sequence's length) is below
/// kSmallPositionLimit: the kernels' SMALL_POSITIONS.
inline bool small_positions(const FlexShape &s) {
  return s.seqlen_q <= kSmallPositionLimit && s.seqlen_k <= kSmallPositionLimit;
}
/// A position handed to a mod (q_idx or kv_idx, already within [0, length − 1]): with SMALL_POSITIONS also
/// clamped to [0, kSmallPositionLimit − 1], which changes nothing but lets the range analysis prove that the mod's
/// positions and their differences convert to f32 exactly (ir convert_before_broadcast: abs(q − kv).to(f32)
/// then costs a conversion per row and per column instead of per score).
Tile mod_position(const Tile &position, bool small_positions);

/// The band's runtime parameters inside a kernel: left/right (kUnbounded when open) and the offset
/// (0 or seqlen_k − seqlen_q).
/// Calls f, which traces a user's score_mod or mask function on `args` (its arguments), and throws TraceError
/// naming `what` when the ops it added call program_id() or num_programs(), or contract or move an axis that
/// varies with the position (a reduction or dot over it, trans, a reshape moving it; naming that op and its
/// line): a mod sees its position only through its arguments (b, h, q_idx, kv_idx) and computes each element
/// from its own, since the kernels that trace it (attention, block masks, the range and mask analyses) run on
/// different grids and block sizes.
Tile traced_user_fn(const char *what, const std::vector<Tile> &args, const std::function<Tile()> &f);
/// The user's score_mod on the score tile s (through traced_user_fn), as f32. Throws TraceError starting with
/// `op` when it returns nothing, another shape than s's, or a non-float.
Tile traced_score_mod(const char *op, const ScoreMod &score_mod, const Tile &s, const Tile &b, const Tile &h,
                      const Tile &q_idx, const Tile &kv_idx);

struct BandTiles {
  Tile left, right, off;
};
/// Stand-in for an unbounded side: large enough for any length, small enough that i + off ± it fits i32.
constexpr int64_t kUnbounded = int64_t(1) << 30;
/// A band side as every kernel and check uses it: −1 (open) kept, a side wider than kUnbounded reaches every key
/// as kUnbounded does, so it becomes kUnbounded (q ± it then fits i32 and int64, whatever the caller gave).
inline int64_t bounded_side(int64_t side) { return side < 0 ? side : std::min(side, kUnbounded); }

/// Band test for broadcastable q_idx / kv_idx (i1).
Tile in_band(const BandTiles &band, const Tile &q_idx, const Tile &kv_idx);
/// Whether the band holds every pair of a tile (i1 scalar): queries q_first … q_last, keys kv_first …
/// kv_first + keys − 1 (a tile wholly inside needs no band test).
Tile band_holds_tile(const BandTiles &band, const Tile &q_first, const Tile &q_last, const Tile &kv_first, int keys);
/// band ∧ fn at (b, h, q_idx, kv_idx); `has_band` says whether band is used. Returns an empty Tile when the
/// mask has neither (everything visible).
Tile visible(const Mask &mask, bool has_band, const BandTiles &band, const Tile &b, const Tile &h,
             const Tile &q_idx, const Tile &kv_idx);

/// A head dim as the kernel's tiles pad it: the next power of two ≥ 16.
inline int next_pow2_at_least_16(int x) {
  int p = 16;
  while (p < x) p *= 2;
  return p;
}

/// Host-side band parameters: (left, right, bottom_right) with kUnbounded for open sides.
struct BandArgs {
  int64_t left = kUnbounded, right = kUnbounded, bottom_right = 0;
};
BandArgs band_args(const std::optional<Band> &band);

/// Launch config from the flex options.
LaunchConfig launch_config(const FlexOptions &opt);

/// Parameters of the flex attention kernel, in order (see flex_kernel.cpp for their meaning).
/// With PAGED, K/V strides are (page, head, token) instead of (batch, head, seq). The sequence (token) strides
/// kQs, kKs, kVs, kOs are constexprs too (add_stride_params), though listed among the strides.
enum FlexParam : int {
  kQ, kK, kV, kO, kLse, kCuQ, kCuK, kKvBlocks, kKvCounts, kBlockTable, kSeqLens, kOPart, kLsePart,
  kScale, kBmStrideB, kBmStrideH, kGroup, kSeqlenQ, kSeqlenK,
  kQb, kQh, kQs, kKb, kKh, kKs, kVb, kVh, kVs, kOb, kOh, kOs, kLb, kLh, kLs,
  kBandLeft, kBandRight, kBandBottomRight, kNumQBlocks, kNumKBlocks,
  kBtStride, kNumSplits, kPartStrideO, kPartStrideL, kScoreRef, kMaxSeqLen,
  // constexprs
  kBlockM, kBlockN, kDimQK, kDimV, kPadQK, kPadV, kVarlen, kHasBand, kUseBlockMask, kLarge, kScoreFrame,
  kPaged, kPageSize, kPackGqa, kSplit, kSmallPositions,
  kNumFlexParams
};
/// How many traced kernels (per kind: attention, block mask) are kept for distinct mod objects; the least
/// recently used beyond this are dropped (a later call with that mod traces again; compiled code stays
/// cached by IR).
constexpr size_t kMaxCachedModKernels = 64;
/// How a launch's online softmax keeps its scores in range (kernels/online_softmax.h), chosen per launch from
/// the score_mod's traced range with the current values of its captured scalars (score_frame.cpp).
struct ScoreFrame {
  enum Kind : int {
    AnyFinite = 0,       // the mod may return any finite score (soft masks): the running max with exact frames
    Ordinary = 1,        // within the ordinary frame (no mod, the built-in ALiBi, s·0.5, ...): the running max
    FixedReference = 2,  // bf16, all scores within kMaxFixedReferenceSpan: no running max (below)
  } kind = Ordinary;
  /// FixedReference: R in log2 units, min(hi, lo + kFixedReferenceWindow) for scores in [lo, hi] (log2 units).
  /// p = exp2(score·log2e − R) then never exceeds 2^(hi − lo − window) and each row's largest p is at least
  /// 2^-window, so P·V's bf16 p and the f32 accumulator keep their range without a running max; logsumexp =
  /// (R + log2 l)·ln2. The limits the running max does not have: a row's Σ|v| above 2^(228 − span) overflows the
  /// accumulator, and in a row whose every score sits near lo, products p·v with |v| below 2^-26 become subnormal.
  float reference = 0;
};
/// The window of the fixed reference, in log2 units: each row's largest p is at least 2^-window.
constexpr double kFixedReferenceWindow = 100;
/// The widest range of scores, in log2 units, that the fixed reference takes: its p stay ≤ 2^(span − window)
/// ≤ 2^58.7, well inside bf16 and f32. 2·55·log2e: a soft-cap of |cap| ≤ 55.
constexpr double kMaxFixedReferenceSpan = 2 * 55 * 1.4426950408889634;
/// The largest score magnitude, in log2 units, that the fixed reference takes: R, an f32, is then within 2^-4 of
/// its exact value (a narrow range far from 0, such as a constant −1e30 from a mod, takes the exact frames).
constexpr double kMaxFixedReferenceMagnitude = 0x1p20;
/// The frame of a launch with these options. mods_as_functions: the kernel traces a built-in mod's function (GQA
/// packing) rather than its built-in form. capture_values: take the captured scalars' current values (the
/// launch reads them now); otherwise a frame that holds for any values.
ScoreFrame score_frame(const FlexOptions &opt, bool mods_as_functions, bool capture_values = true);
/// The attention kernel for (dtype, score_mod, mask) — traced per specialization, cached per mod identity.
std::shared_ptr<KernelBase> flex_kernel(DType dtype, const ScoreMod &score_mod, const Mask &mask);
/// How many traced attention kernels are cached now (tests).
size_t flex_kernels_cached();

/// What a mask function's value depends on, read from its traced and optimized IR (mask_analysis.cpp): the
/// function traced alone with every input an opaque parameter; an input with no use left after optimization
/// is one its value does not depend on.
struct MaskAnalysis {
  bool reads_b = false, reads_h = false;  // the value depends on the batch / the query head
  bool reads_memory = false;              // it loads: a captured buffer, or (varlen) the offsets via mod_*()
  /// The captured values its optimized IR still uses, in order of first use.
  std::vector<std::shared_ptr<detail::CaptureState>> captures;
  MaskFn fn;  // the function analyzed, kept so that its identity stays unique while the analysis is cached
};
/// The analysis of fn as traced with (varlen) or without per-sequence offsets; cached per (fn's identity,
/// varlen). Throws TraceError when the function's result is not a mask, or when it calls program_id() or
/// num_programs() (the block-mask kernels' grids are not the attention kernel's).
std::shared_ptr<const MaskAnalysis> analyze_mask(const MaskFn &fn, bool varlen);

/// The band a mask function implies (mask_band.cpp): bounds on kv − q that every visible entry satisfies, read
/// from the function's traced and optimized IR, some of them through captured integers read at each call.
struct ImpliedBand;
/// The analysis of fn, cached per identity. Never throws for a function it cannot trace on scalar positions:
/// such a function implies no band.
std::shared_ptr<const ImpliedBand> implied_band(const MaskFn &fn);
/// The band at the captures' current values; nullopt when neither side is bounded.
std::optional<Band> band_at_call(const ImpliedBand &band);
/// `mask` with the band its function implies when it has a function and no band of its own (else `mask`):
/// the kernels then skip the key blocks and pages outside the band, the function still decides each entry.
Mask with_implied_band(const Mask &mask);
/// opt with its mask's implied band, unless opt carries a block mask of the caller's (made for the mask as
/// given); the public entry points take their options through this.
FlexOptions with_implied_band(const FlexOptions &opt);

/// Parameters of the block-mask kernels, in order (block_mask.cpp). The first evaluates the mask on one
/// (query block, key block) tile per program and writes its status; the second compacts one row of statuses
/// per program into the list of non-empty key blocks.
enum BlockMaskTileParam : int {
  tStatus, tCuQ, tCuK, tSeqlenQ, tSeqlenK, tNumQBlocks, tNumKBlocks, tBandLeft, tBandRight, tBandBottomRight,
  tBlockM, tBlockN, tVarlen, tHasBand,
  kNumBlockMaskTileParams
};
enum BlockMaskListParam : int {
  lKvBlocks, lKvCounts, lStatus, lCuQ, lCuK, lSeqlenQ, lSeqlenK, lNumQBlocks, lNumKBlocks,
  lBlockM, lBlockN, lChunk, lVarlen, lTransposed,
  kNumBlockMaskListParams
};
/// The two launches that build a block mask into given buffers: kv_blocks/counts as in BlockMask, status one
/// byte per (list, key block). lists_b / lists_h: batches and heads that get their own lists (1 = shared).
struct BlockMaskLaunches {
  std::shared_ptr<KernelBase> tiles, lists;
  std::vector<detail::ArgValue> tile_args, list_args;
  Grid tile_grid, list_grid;
  LaunchConfig tile_cfg, list_cfg;
};
BlockMaskLaunches block_mask_launches(const Mask &mask, const FlexShape &s, const FlexOptions &opt,
                                      DevicePtr kv_blocks, DevicePtr counts, DevicePtr status, int lists_b,
                                      int lists_h, int num_q_blocks, int num_k_blocks);

/// The (batches, heads) a block mask holds lists for in a call of shape s: 1 (or 0) where they are shared.
struct ListDims {
  int batches = 0, heads = 0;
};
ListDims list_dims(const BlockMask &bm, const FlexShape &s);
/// Where list (b, h, block) starts in units of lists: b·batch + h·head + block, for `blocks` lists per (b, h)
/// (0 strides where lists are shared; no block mask: the dense [batch, heads_q, blocks] layout).
struct ListStrides {
  int64_t batch = 0, head = 0;
};
ListStrides list_strides(const BlockMask *bm, const FlexShape &s, int64_t blocks);

/// The transposed lists of a block mask (the backward's dK/dV walk): per (batch or 1, head or 1, key block),
/// the query blocks that see the key block, in increasing order, each query block index · 2 + (1 when full),
/// and their count. q_blocks holds [lists, num_k_blocks, num_q_blocks] i32 and q_counts [lists, num_k_blocks]
/// i32, with bm's batches and heads (shared as in bm). Built on the device from bm's tile statuses by the
/// list kernel read column-wise; no host synchronization.
void build_transposed_lists(const BlockMask &bm, const FlexShape &s, const FlexOptions &opt, DevicePtr q_blocks,
                            DevicePtr q_counts);
/// Rejects a block mask that is empty or was made for another mask function, shape or block sizes (nqb × nkb
/// blocks of opt.block_m × opt.block_n), naming `op`.
void check_block_mask(const BlockMask &bm, const FlexShape &s, const FlexOptions &opt, int64_t nqb, int64_t nkb,
                      const char *op);

/// Counters of the block-mask builds since start-up (tests): builds, (batch, head) pairs whose lists were
/// built (a mask shared by every batch and head counts 1), and calls served by the automatic cache.
struct BlockMaskStats {
  uint64_t builds = 0, lists_built = 0, cache_hits = 0;
};
BlockMaskStats block_mask_stats();
void count_block_mask_cache_hit();

/// The block mask flex_forward uses for opt.mask when none is given (BlockMaskMode::Auto): built on this
/// call, or an earlier call's when nothing it depends on can have changed — the mask reads no memory (no
/// captured buffer, no varlen offsets) and the function, band, lengths, the batch / head counts it depends
/// on, block sizes, backend and the current values of the captures it uses are the same
/// (block_mask_cache.cpp).
std::shared_ptr<const BlockMask> auto_block_mask(const Mask &mask, const FlexShape &s, const FlexOptions &opt);
/// Drops the cached automatic block masks (waits for the device first); returns how many there were (tests).
size_t clear_auto_block_masks();

/// Everything derived from (shape, options) that a launch needs (flex_forward.cpp).
struct Plan {
  bool varlen = false;
  int heads_kv = 0, dim_v = 0, nqb = 0, nkb = 0;
  Strides q, k, v, o;  // paged: k and v hold (page, head, token) strides in (batch, head, seq)
  int64_t lse_b = 0, lse_h = 0, lse_s = 1;
  int64_t last_q = 0, last_k = 0, last_v = 0, last_o = 0, last_lse = 0;  // furthest element addressed
  bool large = false;
  bool work = false;
  // A paged cache (FlexOptions::kv_cache) and its validated layout (computed once here: the launches and the
  // checks of its buffers read it).
  bool paged = false;
  paged::CacheLayout cache;
  /// GQA packing: one program per KV head holds the group's query heads × BLOCK_M / group tokens as its rows.
  bool pack_gqa = false;
  /// KV split: each program covers 1/num_splits of its key blocks and writes f32 partial outputs and lse to
  /// o_part / lse_part (laid out as out and lse, split s at s·part_stride_o / s·part_stride_l), merged by the
  /// combine kernel (decode_combine.cpp).
  int num_splits = 1;
  DevicePtr o_part, lse_part;
  int64_t part_stride_o = 0, part_stride_l = 0;
  /// The softmax frame (ScoreFrame) must hold whatever values the mods' captured scalars take: the launches
  /// read them later than the plan (a DecodePlan's runs and graph replays).
  bool frame_for_any_captures = false;
};
/// Validates (shape, options) and derives the plan; throws TraceError naming `op` and what is wrong.
Plan plan(const FlexShape &s, const FlexOptions &opt, const char *op = "attention::flex_forward");
/// Makes the plan's programs GQA-packed (Plan::pack_gqa) with BLOCK_M rows; throws TraceError when the group
/// does not fit in BLOCK_M.
void pack_gqa(Plan &p, const FlexShape &s, int block_m, const char *op);
/// The softmax scale a launch uses: opt.softmax_scale, or 1/sqrt(head_dim_qk) when it is 0.
inline float effective_scale(const FlexShape &s, const FlexOptions &opt) {
  return opt.softmax_scale > 0 ? opt.softmax_scale : 1.f / std::sqrt(float(s.head_dim_qk));
}
/// Throws TraceError naming `op` when d is null or holds fewer than (last + 1)·esz bytes (0 bytes: unknown,
/// not checked).
void check_extent(DevicePtr d, int64_t last, size_t esz, const char *name, const char *op = "attention::flex_forward");
/// Throws TraceError naming `op` when a non-null buffer lives on another backend than the launch's.
void check_buffer_backends(std::initializer_list<std::pair<const char *, const Buffer *>> buffers,
                           const FlexOptions &opt, const char *op);
/// The launch grid: (query blocks × splits, query heads or, packed, KV heads, batch).
Grid grid(const Plan &p, const FlexShape &s);

/// Where a flex kernel's parameter table holds the arguments every flex kernel takes alike: `strides`, the
/// first of 15 (batch, head, seq strides of q, k, v, out, then of lse); `band`, the first of 3 (left, right,
/// bottom-right); `tile`, the first of 6 constexprs (BLOCK_M, BLOCK_N, DIM_QK, DIM_V, PAD_QK, PAD_V).
struct LayoutArgsAt {
  int strides, band, tile;
};
/// Fills those arguments from the plan and options.
void layout_args(std::vector<detail::ArgValue> &a, const Plan &p, const FlexShape &s, const FlexOptions &opt,
                 LayoutArgsAt at);
/// Declare those parameters in a kernel's table, in layout_args' order; each returns its first index (the
/// LayoutArgsAt field). The sequence strides of q, k, v and out are constexprs: a block's row addresses are then
/// constant offsets from one register, where a runtime stride keeps a register per row live across the key or
/// query loop (16 at head dim 128 in the backward's dK/dV kernel, which spilled for them); each distinct value
/// compiles its own kernels. The other strides are runtime scalars; lse's change with the lengths and are not
/// specialized.
int add_stride_params(ParamTable &t);
/// Kernel parameter i as an operand of offset arithmetic: i64 with 64-bit offsets (`large`), else i32 (a runtime
/// scalar, or a constant for a constexpr such as a sequence stride).
inline Tile offset_param(int i, bool large) { return detail::param_tile(i).to(large ? DType::i64 : DType::i32); }
int add_band_params(ParamTable &t);
int add_tile_params(ParamTable &t);
/// The flex kernel's argument list for a launch (bm: the block mask it visits, or null).
std::vector<detail::ArgValue> kernel_args(const Plan &p, const FlexShape &s, const FlexOptions &opt, DevicePtr q,
                                          DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse,
                                          const BlockMask *bm);
/// The same with placeholder pointers (IR / PTX dumps, compiles without a launch).
std::vector<detail::ArgValue> placeholder_kernel_args(const Plan &p, const FlexShape &s, const FlexOptions &opt);

/// What a flex tuner's winner depends on, as key text (flex_autotune.cpp): dtype, the mods (a hash of their traced
/// IR) and the softmax frame they put the call in, head dims, GQA group, varlen, the band's sides, the sizes
/// bucketed to powers of two, a given block mask's block sizes, the compiled-in sequence strides and a copy method
/// the call fixes. Shared by the forward's and the backward's tuners, which add what only they depend on.
std::string flex_shape_key(const FlexShape &s, const FlexOptions &opt, const Plan &p);
/// The block masks a flex tuner's candidates walk when the call has a mask function but no block mask of its own
/// (BlockMaskMode::Auto): one per candidate's block sizes, built at its first launch, so that the tuner's times
/// compare the kernels rather than mask builds (flex_autotune.cpp).
class CandidateBlockMasks {
 public:
  CandidateBlockMasks(const FlexOptions &opt, const FlexShape &s);
  /// o (a candidate's options) walking the mask built for its block sizes, where the call needs one.
  FlexOptions with_mask(FlexOptions o);

 private:
  bool own_;
  FlexShape shape_;
  std::map<std::pair<int, int>, BlockMask> masks_;
};
/// Which class of band the flex tuners' priors know the call by (flex_autotune.cpp): a band bounded on both sides
/// with at most 512 keys visits few key blocks per program (Narrow); no band, or one open on a side, many (Dense).
kernels::FlexBandClass band_class(const FlexOptions &opt);
/// opt with the autotuner's BLOCK_M, BLOCK_N, num_warps, num_stages for this shape and these mods, and
/// autotune off (flex_autotune.cpp). Tunes on the first call per key; the outputs are restored afterwards.
FlexOptions tuned_flex_options(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse,
                               const FlexShape &s, const FlexOptions &opt);

}  // namespace tilejit::attention::flex
