// A conservative range analysis of a traced score_mod: the interval its output can take, given the interval of
// the score it receives. Used to choose the online softmax's frame (kernels/online_softmax.h): a mod whose
// output provably stays inside the bounded range (cap·tanh(score/cap), score·0.5, score plus a small bias of the
// positions) runs FlashAttention-2's softmax with nothing added; one that may return soft masks (−1e10, a value
// loaded from a table) gets the exact frames.
#pragma once
#include "ir/ir.h"

namespace tilejit::attention::flex {

struct Interval {
  double lo, hi;  // may be ±inf; lo > hi never happens
};

/// The interval of `out` over every input, assuming `score` lies in `score_range`. Walks out's defining ops:
/// constants, positions (program ids, aranges, integer parameters in their dtype's range), arithmetic
/// (add, sub, mul, fma, neg, abs, minimum, maximum, casts and shape ops), tanh, sigmoid, exp/exp2, sqrt, and
/// where() — whose −inf branch (a masked key) adds nothing. Anything else (a load, a division, a log, a
/// reduction) is unbounded.
Interval value_range(const ir::Value *out, const ir::Value *score, Interval score_range);

}  // namespace tilejit::attention::flex
