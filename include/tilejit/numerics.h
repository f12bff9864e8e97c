// Conversions between float and the 16-bit float formats, bit-exact with the GPU's cvt.rn:
// round to nearest, ties to even; overflow → ±inf; NaN stays NaN (quiet); subnormals kept.
// Sources: IEEE 754-2008 binary16; bfloat16 = the upper 16 bits of binary32 (Google Brain format).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace tilejit {

inline uint32_t float_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

/// float → bf16 bits, round to nearest even.
inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN → quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
inline float bf16_to_float(uint16_t h) { return bits_float(uint32_t(h) << 16); }

/// float → IEEE binary16 bits, round to nearest even.
inline uint16_t float_to_f16(float f) {
  uint32_t u = float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);          // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);         // ≥ 65520 rounds to inf
  if (a < 0x38800000u) {                                         // below 2^-14: subnormal or zero
    // value = a_float; subnormal unit is 2^-24. Round a_float / 2^-24 to nearest even.
    float v = bits_float(a) * 16777216.0f;                       // exact (power-of-two scale)
    float r = std::nearbyint(v);                                 // default rounding: ties to even
    return uint16_t(sign | uint32_t(r));
  }
  uint32_t mant = a & 0x7fffffu;
  uint32_t exp = (a >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;     // carries into the exponent correctly
  return uint16_t(sign | h);
}
inline float f16_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) return bits_float(sign) + (sign ? -1.f : 1.f) * float(mant) * 5.9604644775390625e-8f;
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

/// Rounds a float to the nearest bf16 / f16 value (returned as float).
inline float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }
inline float round_f16(float f) { return f16_to_float(float_to_f16(f)); }

}  // namespace tilejit
