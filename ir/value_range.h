// A conservative range analysis over the tile IR: the interval a value can take, given intervals for some values
// (a score a mod receives, parameters whose value is known at a launch). The flex kernels use it to pick the
// softmax's frame from a score_mod's traced IR (kernels/flex/score_frame.cpp), and the passes to prove that an
// integer position converts to f32 exactly (ir/passes/convert_before_broadcast.cpp).
#pragma once
#include <unordered_map>

#include "ir/ir.h"

namespace tilejit::ir {

struct Interval {
  double lo, hi;  // may be ±inf; lo > hi never happens
};

/// Values whose interval is given rather than derived.
using KnownRanges = std::unordered_map<const Value *, Interval>;

/// The interval of `out` over every input, taking the values in `known` to lie in their intervals. Walks out's
/// defining ops: constants, positions (program ids, aranges, integer parameters in their dtype's range), arithmetic
/// (add, sub, mul, fma, neg, abs, minimum, maximum, casts and shape ops; a division by an interval without 0),
/// tanh, sigmoid, exp/exp2, sqrt, and where() — whose −inf branch (a masked key) adds nothing. Anything else (a
/// load, a log, a reduction) is unbounded: floats ±inf, integers their dtype's range. An integer result that may wrap around
/// gets its dtype's whole range.
Interval value_range(const Value *out, const KnownRanges &known = {});

}  // namespace tilejit::ir
