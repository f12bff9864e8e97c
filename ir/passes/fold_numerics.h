// Scalar arithmetic for constant folding, with the interpreter's documented numerics (interp/): floats are
// computed in double and rounded once to the result dtype (round to nearest even; transcendentals on
// f16/bf16 go through f32 first, as the GPU evaluates them in f32); integers wrap to their bit width.
// Anything whose result the GPU and the interpreter might not agree on is not folded (folders return
// nullopt): integer division by zero, shifts by an amount outside [0, bits), float→int of NaN or of
// values out of range, comparisons and min/max involving NaN.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "tilejit/types.h"

namespace tilejit::ir::passes {

/// Rounds x to the nearest value of the float dtype t, ties to even, overflowing to ±inf.
inline double round_to_dtype(double x, DType t) {
  if (t == DType::f64 || !std::isfinite(x) || x == 0.0) return x;
  if (t == DType::f32) return double(float(x));
  // p: significand bits; min_quantum: exponent of the subnormal step; max: the largest finite value.
  const int p = t == DType::f16 ? 11 : 8;
  const int min_quantum = t == DType::f16 ? -24 : -133;
  const double max = t == DType::f16 ? 65504.0 : std::ldexp(255.0, 120);  // (2 - 2^-7) * 2^127
  int e;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  int q = e - p;
  if (q < min_quantum) q = min_quantum;
  double r = std::ldexp(std::nearbyint(std::ldexp(x, -q)), q);  // scaling by 2^-q is exact
  if (std::fabs(r) > max) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r;
}

/// Wraps v to the two's-complement range of the integer dtype t (i1: the low bit).
inline int64_t wrap_to_dtype(int64_t v, DType t) {
  switch (t) {
    case DType::i1: return v & 1;
    case DType::i8: return int8_t(uint8_t(uint64_t(v)));
    case DType::i16: return int16_t(uint16_t(uint64_t(v)));
    case DType::i32: return int32_t(uint32_t(uint64_t(v)));
    default: return v;
  }
}

}  // namespace tilejit::ir::passes
