// Scalar bounds of a tile over its elements, built as IR at a builder's insertion point: the same expression
// evaluated at its operands' extremes (internal to ir/passes).
//
// A tile computed from scalars (bounded by themselves), constants, aranges (their first and last value) and
// replication, through ops monotone in each operand — add, sub, neg, minimum, maximum, a product by a constant,
// casts that widen an integer or turn it into a float — lies between the bounds built for it: float rounding is
// monotone, and integers are bounded in i64, where nothing wraps. Where an i32 op of the tile may wrap around
// (ir/value_range.h cannot rule it out), no_wrap() asks its bounds to lie in i32, which proves that no element
// wrapped. Anything else (a load, a loop-carried tile, a division) has no bounds.
#pragma once
#include <optional>
#include <unordered_map>

#include "ir/builder.h"
#include "ir/ir.h"

namespace tilejit::ir::passes {

class TileBounds {
 public:
  TileBounds(Builder &b, SourceLoc loc) : b_(b), loc_(loc) {}

  struct Bounds {
    Value *lo, *hi;  // scalars: i64 for an integer tile, the tile's dtype for a float one
  };
  /// v's bounds, or none (ops built before a failure are left unused, for DCE).
  std::optional<Bounds> of(Value *v);
  /// The i1 scalar that holds when no i32 op of the bounded tiles wrapped around (null: nothing to check).
  Value *no_wrap() const { return no_wrap_; }

 private:
  std::optional<Bounds> compute(Value *v);
  Value *op2(OpKind k, Value *a, Value *c);
  Value *constant(DType dt, double f, int64_t i);
  Value *widen(Value *scalar);
  void require_in_i32(const Op *op, const Bounds &r);

  Builder &b_;
  SourceLoc loc_;
  std::unordered_map<const Value *, std::optional<Bounds>> memo_;
  Value *no_wrap_ = nullptr;
};

}  // namespace tilejit::ir::passes
