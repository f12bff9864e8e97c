// The online softmax of the attention kernels (FlashAttention-2, arXiv 2307.08691, Algorithm 1), traced into
// their key-block loops: kernels/attention_fwd.cpp and kernels/flex/flex_kernel.cpp. Not installed.
//
// Scores stay in the kernel's units (raw q·k, or a score_mod's output) and a factor c > 0 takes them to log2
// units inside one fma per score: p = exp2(s·c − R), R = m·c rounded, m the running row max. Because the fma
// takes s·c exactly, every p is right relative to the others whatever R is; R only sets the range of p: the
// row max's own p is 2^(m·c − R), and m·c − R is the rounding error of the product, up to half an ulp of R:
// at most 8 while |m·c| < 2^28 (f16, whose P·V operand holds p up to 2^8) and 32 while |m·c| < 2^30 (bf16).
// Ordinary rows live far inside this ordinary frame. Past it ("soft masks" such as −1e10 or −FLT_MAX from a
// user's score_mod) R would be off by far more, and m·c may overflow: with Range::AnyFinite such a row
// switches to an exact frame,
// factor E = the power of two at or below c, where R = m·E is exact (the row max's p is exactly 1) and finite
// whenever m·c is. E ≠ c changes the softmax's temperature, but there it no longer matters: distinct f32
// scores differ by at least 2^-24 of the larger magnitude, so every score not tied with the max lies at least
// 2^-24·|m·c| ≥ 16 (f16) or 64 (bf16) log2 units below it, and with E > c/2 its p is below 2^-8 or 2^-32 of
// the max's (the exact softmax's weight is below 2^-16 or 2^-64 already). When a row's frame changes between
// key blocks, its max changed by such a gap: the earlier blocks' weight (alpha) is 0 to that accuracy.
//
// Rows whose scores are all −inf so far keep m = −inf and contribute p = 0; at the end, l = 0 gives lse −inf.
// Scores must be finite or −inf. With Range::Bounded (no score_mod, the built-in ALiBi, a mod whose traced range
// stays inside the ordinary frame) nothing switches: the row max must stay inside the ordinary frame.
#pragma once
#include "tilejit/ops.h"
#include "tilejit/tile.h"

namespace tilejit::attention {

class OnlineSoftmax {
 public:
  /// rows: the query rows of a program (BLOCK_M). c: f32 scalar (or literal) > 0, the factor from scores to
  /// log2 units; natural: the factor to natural units (c·ln2), for the logsumexp. dt: the dtype P·V takes
  /// p in (f16 or bf16), which sets the ordinary frame's range. Call before the key loop: the running max is a
  /// loop-carried handle.
  /// range: the scores' magnitude. Bounded (no score_mod: q·k of f16/bf16 inputs times the scale; the
  /// built-in mods, whose forms keep the score within a known factor of that) keeps the ordinary frame only
  /// and the max in log2 units: the loop of FlashAttention-2 with nothing added, exact while |max·c| stays below
  /// 2^28 (f16) or 2^30 (bf16) log2 units. AnyFinite (a user's score_mod, which may return soft masks such as
  /// −1e30 or −FLT_MAX) adds the exact frame above: a few operations per row and key block.
  enum class Range { Bounded, AnyFinite };
  /// The ordinary frame's bound on |max·c| in log2 units: 2^28 for f16, 2^30 for bf16 (see above).
  static float ordinary_bound(DType dt);
  OnlineSoftmax(int rows, const Tile &c, const Tile &natural, DType dt, Range range);

  struct Step {
    Tile p;      // [rows, N] f32: exp2 of the block's scores against this step's reference
    Tile alpha;  // [rows] f32: the factor that rescales the accumulator and the row sum of earlier blocks
  };
  /// One key block's scores s [rows, N] (f32; masked keys −inf): updates the running max.
  Step step(const Tile &s);
  /// The natural-log logsumexp of each row from its row sum l of p (after the last step): −inf where l = 0.
  Tile lse(const Tile &l) const;

 private:
  Tile ordinary(const Tile &m) const;  // i1 [rows]: m's frame is the ordinary one (factor c)

  Tile c_, natural_, exact_, threshold_;
  bool exact_frames_;
  Tile m_;  // the running row max (score units; log2 units with Range::Bounded), loop-carried
};

}  // namespace tilejit::attention
