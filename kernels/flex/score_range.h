// A conservative range analysis of a traced score_mod: the interval its output can take, given the interval of
// the score it receives and the values of its captured scalars. Chooses the online softmax's frame per launch
// (ScoreFrame, flex_internal.h): a mod whose output lies in a narrow range (cap·tanh(score/cap), a sigmoid)
// drops the running max; one that provably stays inside the ordinary range (score·0.5, score plus a small bias
// of the positions) runs FlashAttention-2's softmax with nothing added; one that may return soft masks (−1e10,
// a value loaded from a table) gets the exact frames.
#pragma once
#include <unordered_map>

#include "ir/ir.h"
#include "tilejit/flex_attention.h"

namespace tilejit::attention::flex {

struct Interval {
  double lo, hi;  // may be ±inf; lo > hi never happens
};

/// Values whose interval is given rather than derived: the score a mod receives, and parameters whose value is
/// known at a launch (a captured scalar: [v, v]).
using KnownRanges = std::unordered_map<const ir::Value *, Interval>;

/// The interval of `out` over every input, taking the values in `known` to lie in their intervals. Walks out's
/// defining ops: constants, positions (program ids, aranges, integer parameters in their dtype's range), arithmetic
/// (add, sub, mul, fma, neg, abs, minimum, maximum, casts and shape ops), tanh, sigmoid, exp/exp2, sqrt, and
/// where() — whose −inf branch (a masked key) adds nothing. Anything else (a load, a division, a log, a
/// reduction) is unbounded.
Interval value_range(const ir::Value *out, const KnownRanges &known);

/// The interval of a score_mod's output at this launch for scores in `score` (natural units): the mod traced
/// alone (score_frame.cpp, cached per mod), bounded with each captured scalar at its current value.
Interval score_mod_range(const ScoreMod &mod, Interval score);

}  // namespace tilejit::attention::flex
