// Attention variants as C++ lambdas (FlexAttention-style): a score_mod and a mask traced *into* the
// FlashAttention-2 forward kernel, plus GQA/MQA, variable-length batches, padded head dims.
//
//   attention::FlexOptions opt;
//   opt.score_mod = [](Tile s, Tile b, Tile h, Tile q, Tile kv) { return 50.f * tanh(s / 50.f); };
//   opt.mask = attention::sliding_window(4096, 0);
//   attention::flex_forward(q, k, v, out, lse, shape, opt);
//
// Mods. score_mod(score, b, h, q_idx, kv_idx) gets the [BLOCK_M, BLOCK_N] f32 tile of scaled scores
// (q·kᵀ·softmax_scale, natural units) and returns the modified scores (same shape). mask functions
// (b, h, q_idx, kv_idx) return i1, true = visible. b and h are i32 scalars (h is the *query* head),
// q_idx is i32 [BLOCK_M, 1] and kv_idx i32 [1, BLOCK_N] (positions inside the sequence; they broadcast).
// Each element is computed from its own position: a reduction or dot over an axis that varies with q_idx,
// kv_idx or the score, trans of such a value, or a reshape that moves such an axis (which would mix a block's
// elements, whose size the kernel chooses) is a TraceError naming the op and line, as are program_id() and
// num_programs(); reductions over axes the mod adds itself (features, a table) are fine.
// Indices handed to the mods are clamped to [0, seqlen-1], so a mod that loads from a per-token table
// never reads out of range; results at padded positions are discarded. Inside a mod,
// mod_seqlen_q() / mod_seqlen_k() give this sequence's lengths (i32 scalars; per sequence with varlen).
// A mod may use captured buffers/scalars (tilejit/capture.h): they become kernel arguments, so changing
// their values never retraces or recompiles.
//
// Caching: each distinct ScoreMod / MaskFn object (assignment from a lambda creates one; copies share it)
// gets its own traced kernel per specialization; the 64 most recently used are kept (a mod used again after
// eviction is traced again, about a millisecond). The compiled code is cached by printed IR, so two lambdas
// that trace to the same IR share one compiled kernel. Create mods once and reuse them where you can: a new
// ScoreMod per call costs a trace per call.
//
// Masks. A Mask is a *band* (closed-form key range per query; causal and sliding windows) AND an optional
// mask function. Visible(i, j) = in_band(i, j) && fn(b, h, i, j). With only a band, each query block
// visits only its key blocks in the band (no block-mask tensor) and evaluates the band test only on blocks
// that cross the band's edge. With a mask function, a block mask is computed on the device
// (create_block_mask, DSL kernels): per (batch, head, query block), the list of non-empty key blocks, each
// flagged full or partial; the attention kernel visits only those and applies the mask only on partial
// blocks. A function whose traced IR does not use b (or h) gets one set of lists shared by every batch (or
// head), and one that reads no memory keeps its block mask between calls (see BlockMaskMode). A function
// given without a band gets the band it implies: its result is split at its ANDs, and each comparison of
// expressions affine in q and kv whose difference is ±(kv − q) + c (c a constant, plus at most one captured
// integer such as a window's size, read at each call) bounds kv − q. So `(kv <= q) & (q - kv <= w())` is
// the band [q − w, q] as well as its function: key blocks, and a paged cache's pages, outside it are never
// visited, as with attention::sliding_window (the function still decides every entry inside). A comparison
// counts only where no intermediate value can wrap in i32 (positions below 2^30, the captures' values at the
// call), and not with token indices (mod_q_token); a call given a block mask of the caller's takes the mask as
// given. A DecodePlan takes the band's sides at each run, widened where needed to keep the planned sides'
// divisibility by 16 (so that run never compiles).
//
// Edge semantics: a query row that sees no key gets output 0 and lse −inf (never NaN); batch 0, heads 0 and
// zero-length sequences are no-ops; out-of-range rows/cols are never read. A score_mod may return any finite
// f32 score, however large ("soft masks" such as −1e10, −1e30 or −FLT_MAX, and positive ones), or −inf
// (masked): each row gets the softmax of its scores as they are; a row whose every score is the same huge
// value averages its keys' v (kernels/online_softmax.h). A mod that returns +inf for every score at a launch
// (by its traced range with the captures' values) is a TraceError; +inf or NaN produced by arithmetic at run
// time is not caught. At each launch the score_mod's output is bounded by
// interval arithmetic over its traced IR with its captured scalars at their current values
// (kernels/flex/score_range.h), which picks the softmax: in bf16, scores within a range of 2·55·log2e log2 units
// (cap·tanh(score/cap) with |cap| ≤ 55, a sigmoid) drop the running max for a fixed reference p = exp2(score·log2e
// − R) (kernels/flex/flex_internal.h, ScoreFrame, states its two limits: a row's Σ|v| above 2^(228 − span)
// overflows, and v below 2^-26 in rows pinned at the bottom of the range loses precision); scores bounded
// whenever the input score is (score·0.5, where(m, score, −inf), a larger cap) run the plain softmax; anything
// else the exact one. Without a score_mod, and with the built-in alibi(), the loop keeps FlashAttention-2's
// softmax with nothing added: each row's largest scaled score must stay below 2^30/log2(e) ≈ 7.4e8 in magnitude
// (bf16; 1.9e8 for f16), far beyond the q·k of normalized activations and ordinary ALiBi slopes; past it the
// row's result is undefined. The bound holds for the scaled q·k a score_mod receives too: the exact handling
// covers what a mod returns beyond it (soft masks), not a scale that puts q·k·scale itself there. Offsets are 64-bit when some
// tensor spans more than 2^31 elements. Errors (TraceError): heads_q not a multiple of heads_kv, head dims
// outside [16, 256], dtype other than bf16/f16, non-contiguous last dimension, null pointers, a softmax_scale
// that is negative, not finite or above FLT_MAX/log2(e).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <type_traits>

#include "tilejit/attention.h"
#include "tilejit/buffer.h"
#include "tilejit/capture.h"
#include "tilejit/launch.h"
#include "tilejit/tile.h"

namespace tilejit::attention {

struct PagedKVCache;  // tilejit/paged_attention.h

using ScoreModFn = std::function<Tile(Tile score, Tile b, Tile h, Tile q_idx, Tile kv_idx)>;
using MaskModFn = std::function<Tile(Tile b, Tile h, Tile q_idx, Tile kv_idx)>;

/// What a built-in score_mod computes (alibi). The flex kernel applies such a mod in an equivalent form with
/// fewer operations per score instead of tracing its function: the softmax scale moves into the softmax's one fma
/// per score, and the ALiBi distance is formed from the key block's columns (kernels/flex/flex_kernel.cpp). User
/// functions have none.
struct BuiltinScoreForm {
  Captured alibi_slopes;  // score − slope[h]·|q_idx − kv_idx| (f32 slopes per query head)
  std::source_location alibi_loc = std::source_location::current();  // where alibi() was called (errors)
};

/// A score_mod; empty = identity. Copies share the function (and its traced kernels).
class ScoreMod {
 public:
  ScoreMod() = default;
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, ScoreMod> &&
             std::is_invocable_r_v<Tile, F, Tile, Tile, Tile, Tile, Tile>)
  ScoreMod(F f) : fn_(std::make_shared<const ScoreModFn>(std::move(f))) {}
  explicit operator bool() const { return fn_ != nullptr; }
  Tile operator()(Tile s, Tile b, Tile h, Tile q, Tile kv) const { return (*fn_)(s, b, h, q, kv); }
  const void *identity() const { return fn_.get(); }
  /// The built-in form of this mod (null for user functions; see BuiltinScoreForm).
  const BuiltinScoreForm *builtin() const { return builtin_.get(); }
  /// This mod marked as computing `form` (used by the built-ins in flex_variants.h; `fn` must compute
  /// exactly that, since it is what compose() with user functions and the docs rely on).
  ScoreMod with_builtin(BuiltinScoreForm form) const {
    ScoreMod m = *this;
    m.builtin_ = std::make_shared<const BuiltinScoreForm>(std::move(form));
    return m;
  }

 private:
  std::shared_ptr<const ScoreModFn> fn_;
  std::shared_ptr<const BuiltinScoreForm> builtin_;
};

/// A mask function; empty = everything visible.
class MaskFn {
 public:
  MaskFn() = default;
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, MaskFn> &&
             std::is_invocable_r_v<Tile, F, Tile, Tile, Tile, Tile>)
  MaskFn(F f) : fn_(std::make_shared<const MaskModFn>(std::move(f))) {}
  explicit operator bool() const { return fn_ != nullptr; }
  Tile operator()(Tile b, Tile h, Tile q, Tile kv) const { return (*fn_)(b, h, q, kv); }
  const void *identity() const { return fn_.get(); }

 private:
  std::shared_ptr<const MaskModFn> fn_;
};

/// How a band is anchored when seqlen_q ≠ seqlen_k. TopLeft: query i is aligned with key i.
/// BottomRight: the last query is aligned with the last key (offset seqlen_k − seqlen_q), as in
/// FlashAttention ≥ 2.1 causal masks for decoding.
enum class Align { TopLeft, BottomRight };

/// Keys visible from query i: i + off − left ≤ j ≤ i + off + right, off = 0 (TopLeft) or
/// seqlen_k − seqlen_q (BottomRight). A negative left/right means unbounded on that side. left/right are
/// runtime kernel arguments: changing them reuses the compiled kernel (like every integer argument they
/// are specialized only on divisibility by 16).
struct Band {
  int64_t left = -1, right = -1;
  Align align = Align::TopLeft;
  friend bool operator==(const Band &, const Band &) = default;
};

/// band ∧ fn (either may be absent; both absent = full attention).
struct Mask {
  std::optional<Band> band;
  MaskFn fn;
  Mask() = default;
  Mask(MaskFn f) : fn(std::move(f)) {}
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, Mask> && !std::is_same_v<std::remove_cvref_t<F>, MaskFn> &&
             std::is_invocable_r_v<Tile, F, Tile, Tile, Tile, Tile>)
  Mask(F f) : fn(std::move(f)) {}
  Mask(Band b) : band(b) {}
};

/// Inside a mod (during the attention or block-mask trace): this sequence's lengths (i32 scalars).
/// Throws TraceError elsewhere.
Tile mod_seqlen_q();
Tile mod_seqlen_k();
/// Inside a mod: the index of position q_idx / kv_idx in a per-token table laid out like the tokens —
/// b·seqlen_q + q_idx ([batch, seqlen] tables) for dense layouts, cu_seqlens[b] + q_idx for varlen.
Tile mod_q_token(const Tile &q_idx);
Tile mod_k_token(const Tile &kv_idx);

/// Problem shape. Dense layout: q/out [batch, heads_q, seqlen_q, d], k/v [batch, heads_kv, seqlen_k, d]
/// (strides in FlexOptions; default contiguous). lse: [batch, heads_q, seqlen_q] f32, contiguous.
/// Varlen (FlexOptions::cu_seqlens_q set): tokens of all sequences packed, q/out [total_q, heads_q, d],
/// k/v [total_k, heads_kv, d]; seqlen_q/seqlen_k are then the maximum lengths and lse is
/// [heads_q, total_q]. cu_seqlens must be non-decreasing prefix sums starting at 0 with cu_seqlens[batch] =
/// total and every length ≤ seqlen_q / seqlen_k: they live in device memory and are NOT checked (as in
/// FlashAttention's varlen API); violating this reads or writes outside the tensors (the interpreter
/// reports it as an out-of-bounds access). head_dim_v = 0 means head_dim_qk. Head dims may be any value in [16, 256]; those
/// that are not powers of two (96, 192, ...) run in the next power-of-two tile with masked lanes.
struct FlexShape {
  int batch = 1, heads_q = 1, heads_kv = 0 /* 0: heads_q */, seqlen_q = 128, seqlen_k = 128;
  int head_dim_qk = 64, head_dim_v = 0;
  int64_t total_q = 0, total_k = 0;  // varlen only: token counts (the last cu_seqlens entries)
};

/// A computed block mask (see create_block_mask): device/host buffers of i32, made for `batch` × `heads`.
/// kv_blocks[b', h', qb, i] = key block index · 2 + (1 if full), for i < counts[b', h', qb], with
/// b' = 0 when shared_batches (else b) and h' = 0 when shared_heads (else h): when the mask's value does
/// not depend on the batch or the head, one set of lists serves them all (kv_blocks and counts then hold
/// [1, heads or 1, ...] or [batch or 1, 1, ...]). After its lists, kv_blocks holds one status byte per list
/// entry (0 empty, 1 partial, 2 full, laid out as the lists), from which flex_backward builds the transposed
/// lists; a block mask assembled by hand must provide them.
struct BlockMask {
  Buffer kv_blocks, counts;
  int batch = 0, heads = 0, num_q_blocks = 0, num_k_blocks = 0, block_m = 0, block_n = 0;
  bool shared_batches = false, shared_heads = false;
  const void *mask_fn = nullptr;  // the identity of the MaskFn it was made from (flex_forward checks it)
  /// What else its lists depend on (checked by flex_forward and flex_backward): the mask's band, the lengths
  /// (the longest sequence's, varlen) and the cu_seqlens buffers' addresses (0 for dense layouts).
  std::optional<Band> band;
  int seqlen_q = 0, seqlen_k = 0;
  uint64_t cu_seqlens_q = 0, cu_seqlens_k = 0;
};

/// With Auto, a mask with a function gets its block mask built on the device (two small DSL kernels), once for
/// all batches and heads when the function's traced IR shows that its value does not depend on b and h (for
/// each batch or head only when it does). A mask that reads no memory (a function of b, h, the positions,
/// the lengths and captured scalars) has its block mask kept between calls and reused while the function,
/// band, lengths, block sizes, backend and the captured scalars' values stay the same (a function is assumed
/// to compute the same values each time it is traced, as its cached kernels do; the 16 most recent masks,
/// 256 MiB at most, are kept). A mask that reads a captured buffer (document ids, say) or varlen offsets is
/// built on every call, since the memory may have changed; for repeated calls with the same contents, build it
/// once with create_block_mask and pass FlexOptions::block_mask (rebuild it when the contents change).
enum class BlockMaskMode {
  Auto,  // compute one per call when the mask has a function (unless FlexOptions::block_mask is given)
  Off,   // never: evaluate the mask function on every visited block
};

struct FlexOptions {
  ScoreMod score_mod;
  Mask mask;
  /// 0: 1/sqrt(head_dim_qk); otherwise positive and at most FLT_MAX/log2(e) ≈ 2.36e38, and ≥ 2^-50 with the
  /// built-in alibi() (else TraceError).
  float softmax_scale = 0.f;
  DType dtype = DType::bf16;  // bf16 or f16 (q, k, v, out)
  /// Element strides; all-zero (default) means contiguous for the layout described in FlexShape. With
  /// varlen, `batch` is ignored and `seq` steps over packed tokens. The `seq` strides are compiled into the
  /// kernels (row addresses become constant offsets, which keeps registers free): each distinct value compiles
  /// its own kernels, once (the others are runtime arguments).
  Strides q_strides{0, 0, 0, 0}, k_strides{0, 0, 0, 0}, v_strides{0, 0, 0, 0}, o_strides{0, 0, 0, 0};
  /// Varlen: i32 prefix sums of the sequence lengths, batch + 1 entries (first 0), on the launch's backend.
  DevicePtr cu_seqlens_q{}, cu_seqlens_k{};
  BlockMaskMode block_mask_mode = BlockMaskMode::Auto;
  const BlockMask *block_mask = nullptr;  // precomputed with the same mask, shape and block sizes
  /// BLOCK_M, BLOCK_N (powers of two ≥ 16), num_warps, and num_stages: ≥ 2 software-pipelines the K/V loads of
  /// every key-block loop with cp.async (block-sparse loops included); 1 loads them through registers.
  int block_m = 64, block_n = 64, num_warps = 4, num_stages = 2;
  int min_ctas_per_sm = 0;  // ≥ 1: registers capped so this many programs fit per SM (LaunchConfig)
  bool tma = false;         // K/V tiles copied by TMA where they qualify (LaunchConfig::tma; sm_90a)
  bool warp_specialize = false;  // with tma: a producer warpgroup copies them (LaunchConfig::warp_specialize)
  /// GPU only: pick BLOCK_M, BLOCK_N, num_warps, num_stages (and min_ctas_per_sm 2 for 8-warp
  /// configs, 4 for 4-warp BLOCK_M=64 ones, unless TILEJIT_AUTOTUNE_MORE_PER_SM=0) and, on sm_90a, the copy
  /// method (tma, or warp_specialize where a producer warpgroup fits; a given tma or warp_specialize holds for
  /// every candidate) by measuring (the fields above are still validated but not used, except BLOCK_M/BLOCK_N
  /// when block_mask is given: they must match it and stay). The first call per key —
  /// the mods' traced IR, dtype, head dims, GQA group, varlen, the band's sides and the sizes bucketed to
  /// powers of two — compiles the candidates in parallel and times them on this call's inputs (outputs are
  /// restored, so the call's result is as without tuning); the winner is cached in memory and on disk
  /// beside the compile cache (include/tilejit/autotune.h). Ignored on the interpreter. flex_backward tunes
  /// with candidates and a key of its own (see there).
  bool autotune = false;
  /// Chunked prefill: K/V come from this paged cache (tilejit/paged_attention.h) instead of k and v, which
  /// must be null. The queries are each sequence's last tokens (dense q [batch, heads_q, seqlen_q, d], or
  /// varlen with cu_seqlens_q); each sequence's key count is the cache's seq_lens[b] (cu_seqlens_k must be
  /// null), shape.seqlen_k bounds it (it sizes nothing on the device) and shape.heads_kv / head dims must
  /// match the cache. Mods see positions in the sequence: q_idx = seq_lens[b] − q_len + i, so one causal
  /// mask serves prefill chunks and decode steps. No block mask is built: a mask function is evaluated on
  /// every visited key block (a band still skips the blocks outside it); `autotune` is not applied. One call
  /// may mix sequences prefilling a chunk with sequences decoding one token (varlen queries).
  const PagedKVCache *kv_cache = nullptr;
  /// flex_backward only. false (the default): deterministic. dQ in a pass of its own over the key blocks
  /// (recomputing P and dP), and learnable captures' gradients summed as fixed-point integers
  /// (CaptureGrads::ScatterFixedPoint, tilejit/autodiff.h: two i64 words, each term rounded to 2^-53, sums
  /// exact below 2^42 in magnitude, NaN and ±inf kept) in per-call scratch, then added into their gradient
  /// buffers; dq, dk, dv and the capture gradients are bitwise the same from run to run (concurrent calls
  /// from two threads must not share a learnable capture). true: the dK/dV kernel adds each tile's dQ into an f32
  /// accumulator, and the capture gradients into their buffers, with f32 atomics (a third fewer FLOPs for
  /// dQ, but an order that changes from run to run; on the H200 slower at every shape of
  /// bench/results/backward.md).
  bool atomics = false;
  Backend backend = Backend::Auto;
  Stream *stream = nullptr;
  std::string arch;
};

/// Checks a shape and options without touching memory: what flex_forward checks before reading any pointer
/// (sizes, GQA heads, head dims, strides, blocks, warps, stages, the scale, a given block mask's and a paged
/// cache's geometry), and the mods and mask traced into the forward kernel; flex_backward makes the same checks
/// and those of its own (a paged cache, learnable captures). Throws TraceError naming the value. Varlen needs
/// cu_seqlens_q and cu_seqlens_k non-null (any address: they are not read).
void flex_check(const FlexShape &shape, const FlexOptions &opt);

/// out = softmax(mask(score_mod(q·kᵀ·scale))) · v; lse = natural-log logsumexp per query row (−inf when
/// a row sees no key). Pointers must be on the launch's backend. See the header comment for errors.
void flex_forward(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse, const FlexShape &shape,
                  const FlexOptions &opt);
void flex_forward(const Buffer &q, const Buffer &k, const Buffer &v, Buffer &out, Buffer &lse,
                  const FlexShape &shape, const FlexOptions &opt);

/// Gradients of flex_forward with the same shape and options: dq, dk, dv (dtype, strides and sizes of q, k, v)
/// from q, k, v, the forward's out and lse, and dout (out's strides). The score_mod's derivative is derived
/// from its traced ops (vjp, tilejit/autodiff.h): no hand-written backward per mod. Captures are constants,
/// except buffers captured with a gradient buffer (capture(b, DType::f32, grad), tilejit/capture.h: a
/// learnable bias table, trainable ALiBi slopes), whose gradients are added into it (in fixed point, or with
/// FlexOptions::atomics by f32 atomics). Masked scores get exactly zero gradient; rows that saw no key (lse −inf) give
/// zero. FlashAttention-2's backward (arXiv 2307.08691, Algorithm 2) in three DSL kernels: D = rowsum(dO ∘ O)
/// (which also zeroes the f32 dQ accumulator when there is one); dK and dV per key block, summing the GQA
/// group in the program; then dQ per query block over the key blocks it sees, without atomics (bitwise
/// reproducible), or with FlexOptions::atomics converted from the accumulator the dK/dV kernel added each
/// tile's dQ into. Allocates a scratch per call on opt.stream with CUDA's stream-ordered allocator (one f32
/// per query row, with atomics one per dq element, and with a block mask its transposed lists; without atomics
/// a second one with four i64 per element of each learnable capture's gradient buffer), so that
/// freeing it does not wait for the device; a block mask built for this call alone (varlen, or a mask
/// reading memory: see BlockMaskMode) is still freed with a wait. Block sizes, num_warps, num_stages and the copy
/// method come from opt, or with opt.autotune (GPU) from the backward's own autotuner: its candidates are the
/// tilings measured to suit the backward, BLOCK_M×BLOCK_N on num_warps with num_stages 64×64 4w 2s and 3s, 32×64
/// 4w 2s, 64×128 8w 2s and 3s (with a given block mask those at its sizes, else its sizes on 4 or 8 warps with 2
/// or 3 stages), each on sm_90a also with TMA and with a producer warpgroup (unless opt or the environment fixes
/// the method); the pruned search compiles 64×64 4w 2s and its twins there at head dims 64 and 128 for keys of
/// 2048 and more without atomics and without a band bounded on both sides (the class where it was measured to
/// win; other classes, or TILEJIT_AUTOTUNE_FULL=1, time every candidate). A candidate compiles the three kernels and is judged by the
/// dK/dV kernel's registers and spills, then the whole backward is timed on this call's inputs; dq, dk, dv and
/// the learnable captures' gradient buffers are restored after timing, so the call's results are as one untuned
/// call leaves them (where a gradient buffer's size is unknown, a DevicePtr of 0 bytes, nothing is tuned and
/// opt's config runs). The winner is kept per key — the forward's (FlexOptions::autotune) plus the atomics mode
/// and whether learnable captures are present — in memory and on disk. A dK/dV program owns BLOCK_N keys and
/// steps through BLOCK_M queries, a dQ program owns BLOCK_N queries and steps through BLOCK_M keys (the
/// transposed tiling, so that with BLOCK_N = 2·BLOCK_M on 8 warps each warpgroup of either kernel owns 64 rows
/// and both share each stepped block's loads); varlen batches as in the forward (cu_seqlens; total_q and total_k).
/// Sparsity: bands bound both walks in closed form; a mask function's block mask (FlexOptions::block_mask, or
/// with BlockMaskMode::Auto the one flex_forward builds and caches) gives the dQ pass each query block's key
/// blocks, and its transposed lists, built on the device per call, give the dK/dV kernel each key block's
/// query blocks: wholly masked tiles are skipped. When BLOCK_M ≠ BLOCK_N the dQ pass walks a second block mask
/// made at the swapped sizes (built from the mask function as in Auto; none with BlockMaskMode::Off). Keys that no query sees get zero dk and dv.
/// P = exp(score − lse) is recomputed from the forward's f32 lse, so it is as exact as lse: past |lse| ≈ 2^20
/// lse's rounding shows in P, and in rows the forward took in its exact frame (|lse| beyond 2^30/log2(e) in
/// bf16, 2^28/log2(e) in f16: a row whose every score is a soft mask such as −1e10 or −1e30) lse no longer holds
/// log(l), so each key tied with the row's largest score gets P = 1 rather than 1/(keys tied) — finite, as
/// FlexAttention's, but dv then takes such a row's dO once per tied key; the row's dq and the mod's gradient
/// there are unaffected when the mod's derivative is 0 (a constant soft mask).
/// Errors (TraceError): everything flex_forward rejects (a block mask made for another mask, band, layout,
/// shape or block sizes among them), a block mask without its status bytes (BlockMask), a gradient starting at
/// the address of an input or of another gradient, a paged cache, which the backward does not take, and
/// (without atomics) a learnable capture whose gradient buffer's and captured buffer's sizes are both unknown
/// (DevicePtrs of 0 bytes).
void flex_backward(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse, DevicePtr dout, DevicePtr dq,
                   DevicePtr dk, DevicePtr dv, const FlexShape &shape, const FlexOptions &opt);
void flex_backward(const Buffer &q, const Buffer &k, const Buffer &v, const Buffer &out, const Buffer &lse,
                   const Buffer &dout, Buffer &dq, Buffer &dk, Buffer &dv, const FlexShape &shape,
                   const FlexOptions &opt);
/// PTX of the three backward kernels (delta, dK/dV, dQ; one module after the other) for opt.arch (default
/// sm_90a); no GPU needed.
std::string flex_backward_ptx(const FlexShape &shape, const FlexOptions &opt);

/// Evaluates `mask` over every (batch, query head, query block, key block) tile on the device (DSL kernels)
/// and returns the lists of non-empty key blocks; once for all batches / heads where the function's value does
/// not depend on b / h (BlockMask::shared_batches / shared_heads). Uses opt's block sizes, cu_seqlens,
/// backend and stream. Throws TraceError for cu_seqlens given for q and not k (or the reverse; their values live
/// on the device and are not checked, see FlexShape), block sizes that are not powers of two ≥ 16, negative
/// sizes, a function that does not return a mask, calls program_id() or mixes positions (see the top of this
/// file).
BlockMask create_block_mask(const Mask &mask, const FlexShape &shape, const FlexOptions &opt);

/// Tile IR of the flex kernel for this shape and options (no launch; placeholder pointers).
std::string flex_forward_ir(const FlexShape &shape, const FlexOptions &opt);
/// PTX of the flex kernel (with block_mask = true, of the two block-mask kernels, one module after the other)
/// for opt.arch (default sm_90a); no GPU needed.
std::string flex_forward_ptx(const FlexShape &shape, const FlexOptions &opt, bool block_mask = false);

}  // namespace tilejit::attention
