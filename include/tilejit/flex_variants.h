// Built-in attention variants for flex_forward (tilejit/flex_attention.h), and composition helpers.
// Each is an ordinary Mask or ScoreMod; captured values (slopes, tables, ids, caps) are kernel arguments,
// so their contents and values can change without recompiling.
#pragma once
#include <cstdint>
#include <source_location>
#include <vector>

#include "tilejit/capture.h"
#include "tilejit/flex_attention.h"

namespace tilejit::attention {

// ---- masks ----
/// Causal: query i sees keys j ≤ i + off (off = 0 for TopLeft, seqlen_k − seqlen_q for BottomRight).
Mask causal(Align align);
inline Mask causal_top_left() { return causal(Align::TopLeft); }
inline Mask causal_bottom_right() { return causal(Align::BottomRight); }
/// Sliding window: i + off − left ≤ j ≤ i + off + right (left/right < 0: unbounded on that side).
/// sliding_window(w − 1, 0) is a causal window of w keys (Mistral, Gemma 2 local layers).
Mask sliding_window(int64_t left, int64_t right, Align align = Align::TopLeft);
/// Document masking: query and key see each other only inside one document. doc_ids: i32 per token,
/// [batch, seqlen] (self-attention, seqlen_q == seqlen_k), or per packed token with varlen
/// (indexed through mod_q_token / mod_k_token).
Mask document_mask(const Captured &doc_ids);
/// Prefix-LM: the first prefix_len keys are visible to every query, the rest causally (top-left).
/// prefix_len: an i32 capture (capture(int32_t)) or per-batch i32 buffer (per_batch = true).
Mask prefix_lm(const Captured &prefix_len, bool per_batch = false);

/// Both masks (band intersection kept in closed form when the alignments agree).
Mask and_masks(const Mask &a, const Mask &b);
/// Either mask (the hull of two bands of one alignment still bounds the loop; the test is exact).
Mask or_masks(const Mask &a, const Mask &b);
/// The band as a mask function (for composition; uses mod_seqlen_q/k for BottomRight).
MaskFn band_function(const Band &band);

// ---- score mods ----
/// ALiBi (Press et al., arXiv 2108.12409): score − slope[h]·|q_idx − kv_idx|. slopes: f32 per query head
/// (other float dtypes are converted). The distance is formed in f32 (exact below 2^24 positions). Carries a
/// BuiltinScoreForm, so the flex kernel applies it with the softmax scale folded away: slope/scale clamped to
/// ±2^100, and on key blocks wholly on one side of the diagonal as one fma_index (ops.h), which rounds up to
/// three more times than the lambda's form (relative to the bias's magnitude). Throws TraceError for
/// an empty Captured. A slopes buffer too short for the heads is reported (interpreter) at `loc`, the caller's
/// line.
ScoreMod alibi(const Captured &slopes, std::source_location loc = std::source_location::current());
/// The paper's slopes for `heads` heads: for a power of two n, 2^(−8/n·(i+1)); otherwise those of the
/// largest power of two n < heads, then the even-indexed slopes of the 2n sequence for the extra heads.
std::vector<float> alibi_slopes(int heads);
/// tanh soft-capping (Gemma 2): cap·tanh(score / cap), an ordinary lambda: the same code written by a user runs
/// as fast. cap is an f32 (or integer) capture; its sign does not matter (the function is even in cap) and |cap|
/// is taken in [FLT_MIN, 2^64], so a cap of 0 gives scores of 0 and a cap beyond 2^64 (no capping of any score
/// below 2^52) keeps scale/|cap| a normal f32. The compiler folds the softmax scale and 1/|cap| into
/// one multiplication before tanh and |cap| into the softmax's fma (ir reassociate_scalar_factors); in bf16,
/// with |cap| ≤ 55 at the launch, the scores' bound [−|cap|, |cap|] replaces the softmax's running max (the
/// fixed reference of any mod whose range is that narrow; flex_attention.h). Throws TraceError for an empty
/// Captured.
ScoreMod softcap(const Captured &cap);
/// The same with a fixed cap; throws TraceError unless cap is finite and > 0.
ScoreMod softcap(float cap);
/// Relative-position bias from a table (T5-style, without bucketing): score + table[h, clamp(kv − q,
/// −max_distance, max_distance) + max_distance]. table: f32 [heads_q, 2·max_distance + 1].
ScoreMod relative_position_bias(const Captured &table, int max_distance);
/// first, then second: second(first(score, ...), ...), as a function (a built-in form is not kept).
ScoreMod compose(const ScoreMod &first, const ScoreMod &second);

}  // namespace tilejit::attention
