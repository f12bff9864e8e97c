// Scalar numerics of the dtypes, shared by the interpreter and constant folding (so a folded constant is
// exactly what the interpreter would have computed): conversions between double and the 16-bit float
// formats (bf16, f16), rounding of a double to any float dtype, wrapping of integers to their bit width,
// and tf32 rounding for dot. Header-only so the per-element loops inline them.
//
// All float roundings are round-to-nearest-even, computed directly from the double (no intermediate float),
// so a value is rounded exactly once. Overflow goes to ±inf, underflow through the subnormals to ±0, and a
// NaN stays a (quiet) NaN with its sign.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tilejit/types.h"

namespace tilejit::numerics {

namespace detail {
/// Rounds |x| (given as the double's bit pattern without sign) to a binary format with `kMant` stored
/// mantissa bits and `kExpBits` exponent bits; returns the format's bits without sign.
template <int kMant, int kExpBits>
inline uint32_t round_abs_bits(uint64_t a) {
  constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  constexpr uint32_t kInf = uint32_t((1u << kExpBits) - 1) << kMant;
  constexpr uint64_t kDoubleInf = 0x7ff0000000000000ull;
  if (a > kDoubleInf) {  // NaN: keep the top payload bits, force the quiet bit
    return kInf | (1u << (kMant - 1)) | uint32_t((a >> (52 - kMant)) & ((1u << kMant) - 1));
  }
  const int e = int(a >> 52) - 1023;  // unbiased exponent of the double (-1023 for zero/subnormals)
  if (e > kBias) return kInf;         // too large even before rounding (also catches inf)
  if (e >= 1 - kBias) {
    // Normal in the target: round the mantissa to kMant bits; a carry ripples into the exponent, and a
    // carry out of the largest exponent lands exactly on the inf pattern.
    constexpr int kShift = 52 - kMant;
    const uint64_t r = (a + ((1ull << (kShift - 1)) - 1) + ((a >> kShift) & 1)) >> kShift;
    const uint64_t rebias = uint64_t(1023 - kBias) << kMant;
    const uint64_t out = r - rebias;
    return out >= kInf ? kInf : uint32_t(out);
  }
  // Subnormal (or zero) in the target: the quantum is 2^(1-kBias-kMant).
  if (e == -1023) return 0;  // double zero or double subnormal: far below half the smallest subnormal
  const uint64_t mant = (a & ((1ull << 52) - 1)) | (1ull << 52);
  const int shift = 52 - kMant + (1 - kBias - e);
  if (shift > 54) return 0;  // below half the smallest subnormal
  const uint64_t r = (mant + ((1ull << (shift - 1)) - 1) + ((mant >> shift) & 1)) >> shift;
  return uint32_t(r);  // r == 1 << kMant is the smallest normal, which is the right pattern
}
}  // namespace detail

/// Nearest bf16 (round-to-nearest-even) of x, as its bit pattern.
inline uint16_t double_to_bf16_bits(double x) {
  const uint64_t u = std::bit_cast<uint64_t>(x);
  return uint16_t(((u >> 48) & 0x8000) | detail::round_abs_bits<7, 8>(u & ~(1ull << 63)));
}
/// Nearest f16 (IEEE binary16, round-to-nearest-even) of x, as its bit pattern.
inline uint16_t double_to_f16_bits(double x) {
  const uint64_t u = std::bit_cast<uint64_t>(x);
  return uint16_t(((u >> 48) & 0x8000) | detail::round_abs_bits<10, 5>(u & ~(1ull << 63)));
}
inline float bf16_bits_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }
inline float f16_bits_to_float(uint16_t b) {
  const uint32_t sign = uint32_t(b & 0x8000) << 16;
  const uint32_t exp = (b >> 10) & 0x1f, mant = b & 0x3ff;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {  // zero or subnormal: mant · 2^-24, exact in float
    const float v = float(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

inline double round_to_bf16(double x) { return bf16_bits_to_float(double_to_bf16_bits(x)); }
inline double round_to_f16(double x) { return f16_bits_to_float(double_to_f16_bits(x)); }
inline double round_to_f32(double x) { return double(float(x)); }

/// Rounds x to the float dtype t (f64: unchanged). Must not be called with an integer dtype.
inline double round_float(double x, DType t) {
  switch (t) {
    case DType::f32: return round_to_f32(x);
    case DType::bf16: return round_to_bf16(x);
    case DType::f16: return round_to_f16(x);
    default: return x;
  }
}

/// Wraps an integer to the two's-complement range of dtype t (sign-extending from its bit width);
/// i1 keeps only the low bit (0 or 1).
inline int64_t wrap_int(int64_t v, DType t) {
  switch (t) {
    case DType::i1: return v & 1;
    case DType::i8: return int8_t(uint8_t(uint64_t(v)));
    case DType::i16: return int16_t(uint16_t(uint64_t(v)));
    case DType::i32: return int32_t(uint32_t(uint64_t(v)));
    default: return v;
  }
}
inline int64_t int_min(DType t) { return t == DType::i1 ? 0 : -(int64_t(1) << (dtype_bits(t) - 1)) ; }
inline int64_t int_max(DType t) {
  return t == DType::i1 ? 1 : int64_t((uint64_t(1) << (dtype_bits(t) - 1)) - 1);
}

/// Float → integer conversion, C-like truncation toward zero with defined edge cases: NaN → 0, values
/// outside the dtype's range clamp to its min/max (like the GPU's saturating cvt.rzi). To i1: x != 0.
inline int64_t float_to_int(double x, DType t) {
  if (t == DType::i1) return x != 0.0 ? 1 : 0;  // NaN != 0 is true; only i1 treats NaN as nonzero
  if (std::isnan(x)) return 0;
  const double tx = std::trunc(x);
  const double lo = double(int_min(t)), hi = double(int_max(t));
  if (tx <= lo) return int_min(t);
  if (tx >= hi) return int_max(t);  // double(INT64_MAX) rounds up to 2^63, so >= clamps correctly
  return int64_t(tx);
}

/// Integer → float dtype t, rounded once (i64 beyond 2^53 is rounded to double first: a second rounding
/// only for values far outside the 16-bit formats' range, where the result is ±inf anyway).
inline double int_to_float(int64_t v, DType t) {
  if (t == DType::f32) return double(float(v));
  return round_float(double(v), t);
}

/// Rounds an f32 value to tf32 (10 stored mantissa bits, round to nearest, ties away from zero, as the
/// GPU's cvt.rna.tf32.f32). inf/NaN pass through.
inline float round_to_tf32(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;
  u = (u + 0x1000u) & 0xffffe000u;  // add half of the dropped 13-bit range, then truncate
  return std::bit_cast<float>(u);
}

}  // namespace tilejit::numerics
