// interp/numerics.h against independent references: exhaustive over the 16-bit patterns, random doubles
// over the whole f16/bf16 range, and the edge cases (ties, overflow, NaN, subnormals, signed zeros).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "interp/numerics.h"
#include "test_interp_helpers.h"
#include "tilejit/numerics.h"

using namespace tilejit;
using namespace tilejit::interp;
using namespace tilejit::interp_testing;

namespace {

/// Nearest-even reference by search over the positive bit patterns of a 16-bit format (values increase
/// with the pattern); `inf` is the inf pattern, whose "value" for rounding is 2^(emax+1).
template <class Decode>
uint16_t nearest_by_search(double x, Decode decode, uint16_t inf, double beyond_max) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  auto value = [&](uint32_t p) { return p == inf ? beyond_max : double(decode(uint16_t(p))); };
  uint32_t lo = 0, hi = inf;  // find the largest pattern with value <= a
  if (a >= beyond_max) return sign | inf;
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (value(mid) <= a) lo = mid;
    else hi = mid - 1;
  }
  if (value(lo) == a) return uint16_t(sign | lo);
  const double dlo = a - value(lo), dhi = value(lo + 1) - a;  // exact: same binade (Sterbenz)
  const uint32_t pick = dlo < dhi ? lo : dhi < dlo ? lo + 1 : (lo % 2 == 0 ? lo : lo + 1);
  return uint16_t(sign | pick);
}

double random_wide(Rng &r, int min_exp, int max_exp) {
  const double m = r.uniform(1.0f, 2.0f) + std::ldexp(double(r.integer(0, 1 << 20)), -44);  // bits beyond float
  const double v = std::ldexp(m, int(r.integer(min_exp, max_exp)));
  return r.integer(0, 1) ? -v : v;
}

}  // namespace

TEST_CASE("f16 decode and encode agree with _Float16 on every bit pattern", "[interp][numerics]") {
  for (uint32_t p = 0; p < 0x10000; ++p) {
    const auto b = uint16_t(p);
    const float got = f16_bits_to_float(b), want = ref_f16_value(b);
    if (std::isnan(want)) {
      REQUIRE(std::isnan(got));
      REQUIRE(std::isnan(f16_bits_to_float(double_to_f16_bits(got))));
      continue;
    }
    REQUIRE(std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want));
    REQUIRE(double_to_f16_bits(got) == b);  // round trip keeps the pattern (incl. -0 and subnormals)
  }
}

TEST_CASE("bf16 decode and encode round-trip every bit pattern", "[interp][numerics]") {
  for (uint32_t p = 0; p < 0x10000; ++p) {
    const auto b = uint16_t(p);
    const float got = bf16_bits_to_float(b);
    REQUIRE(std::bit_cast<uint32_t>(got) == uint32_t(b) << 16);
    if (std::isnan(got)) REQUIRE(std::isnan(bf16_bits_to_float(double_to_bf16_bits(got))));
    else REQUIRE(double_to_bf16_bits(got) == b);
  }
}

TEST_CASE("double to f16 rounds to nearest even like _Float16 and a search reference", "[interp][numerics]") {
  Rng r;
  INFO("seed " << r.seed);
  for (int i = 0; i < 200000; ++i) {
    const double x = random_wide(r, -27, 17);  // subnormals, normals and overflow
    const uint16_t want = ref_f16_bits(x);
    INFO("x = " << x);
    REQUIRE(double_to_f16_bits(x) == want);
    REQUIRE(nearest_by_search(x, ref_f16_value, 0x7c00, 65536.0) == want);  // the references agree
  }
}

TEST_CASE("double to bf16 rounds to nearest even once, straight from the double", "[interp][numerics]") {
  Rng r;
  INFO("seed " << r.seed);
  for (int i = 0; i < 200000; ++i) {
    const double x = random_wide(r, -136, 129);
    INFO("x = " << x);
    REQUIRE(double_to_bf16_bits(x) == nearest_by_search(x, ref_bf16_value, 0x7f80, 0x1p128));
  }
  for (int i = 0; i < 200000; ++i) {  // values exact in float: the float integer trick is a second reference
    const float x = float(random_wide(r, -136, 127));
    REQUIRE(double_to_bf16_bits(x) == ref_bf16_bits(x));
  }
}

TEST_CASE("16-bit rounding edge cases: ties, overflow, subnormals, zeros, NaN", "[interp][numerics]") {
  // f16: ulp(1) = 2^-10. Ties go to the even neighbour.
  CHECK(round_to_f16(1.0 + 0x1p-11) == 1.0);
  CHECK(round_to_f16(1.0 + 3 * 0x1p-11) == 1.0 + 0x1p-9);
  CHECK(round_to_f16(1.0 + 0x1p-11 + 0x1p-40) == 1.0 + 0x1p-10);  // just above the tie: a double bit
  CHECK(round_to_f16(65504.0) == 65504.0);
  CHECK(round_to_f16(65519.99) == 65504.0);
  CHECK(std::isinf(round_to_f16(65520.0)));  // the tie between max and 2^16 goes to "even" = inf
  CHECK(round_to_f16(-1e10) == -std::numeric_limits<double>::infinity());
  CHECK(round_to_f16(0x1p-24) == 0x1p-24);          // smallest subnormal
  CHECK(round_to_f16(0x1p-25) == 0.0);              // tie with zero → zero (even)
  CHECK(round_to_f16(0x1p-25 * 1.0001) == 0x1p-24);
  CHECK(round_to_f16(3 * 0x1p-25) == 2 * 0x1p-24);  // tie between 1 and 2 quanta → 2
  CHECK(round_to_f16(0x1p-14 - 0x1p-26) == 0x1p-14);  // rounds up into the smallest normal
  CHECK(std::signbit(round_to_f16(-0x1p-30)));        // underflow keeps the sign
  CHECK(double_to_f16_bits(-0.0) == 0x8000);
  CHECK(std::isnan(round_to_f16(std::nan(""))));
  CHECK((double_to_f16_bits(-std::nan("")) & 0x8000) == 0x8000);
  CHECK(round_to_f16(1e-300) == 0.0);
  // bf16: ulp(1) = 2^-7; max = 0x1.fep127.
  CHECK(round_to_bf16(1.0 + 0x1p-8) == 1.0);
  CHECK(round_to_bf16(1.0 + 3 * 0x1p-8) == 1.0 + 0x1p-6);
  CHECK(round_to_bf16(1.0 + 0x1p-8 + 0x1p-50) == 1.0 + 0x1p-7);  // a float would have lost that bit
  CHECK(round_to_bf16(0x1.fep127) == 0x1.fep127);
  CHECK(std::isinf(round_to_bf16(0x1.ffp127)));
  CHECK(round_to_bf16(0x1p-133) == 0x1p-133);  // smallest bf16 subnormal
  CHECK(round_to_bf16(0x1p-134) == 0.0);
  CHECK(std::isnan(round_to_bf16(std::nan(""))));
  CHECK(std::isinf(round_to_bf16(std::numeric_limits<double>::infinity())));
}

TEST_CASE("integer wrapping, float to int conversion and tf32 rounding", "[interp][numerics]") {
  CHECK(wrap_int(128, DType::i8) == -128);
  CHECK(wrap_int(-129, DType::i8) == 127);
  CHECK(wrap_int(int64_t(1) << 31, DType::i32) == INT32_MIN);
  CHECK(wrap_int(0x1ffff, DType::i16) == -1);
  CHECK(wrap_int(2, DType::i1) == 0);
  CHECK(wrap_int(3, DType::i1) == 1);
  CHECK(float_to_int(-2.9, DType::i32) == -2);
  CHECK(float_to_int(2.9, DType::i32) == 2);
  CHECK(float_to_int(std::nan(""), DType::i32) == 0);
  CHECK(float_to_int(1e20, DType::i32) == INT32_MAX);
  CHECK(float_to_int(-1e20, DType::i32) == INT32_MIN);
  CHECK(float_to_int(1e30, DType::i64) == INT64_MAX);
  CHECK(float_to_int(300.0, DType::i8) == 127);
  CHECK(float_to_int(0.25, DType::i1) == 1);
  CHECK(float_to_int(0.0, DType::i1) == 0);
  CHECK(int_to_float(16777217, DType::f32) == 16777216.0);  // ties to even in f32
  CHECK(int_to_float(257, DType::bf16) == 256.0);
  CHECK(round_to_tf32(1.0f + 0x1p-11f) == 1.0f + 0x1p-10f);  // tie rounds away from zero
  CHECK(round_to_tf32(1.0f + 0x1p-12f) == 1.0f);
  CHECK(round_to_tf32(-1.0f - 0x1p-11f) == -1.0f - 0x1p-10f);
}

TEST_CASE("interp rounding agrees with the public float conversions (tilejit/numerics.h)", "[interp][numerics]") {
  Rng r;
  INFO("seed " << r.seed);
  for (int i = 0; i < 200000; ++i) {
    const float x = float(random_wide(r, -30, 20));
    INFO("x = " << x);
    REQUIRE(double_to_f16_bits(x) == tilejit::float_to_f16(x));
    REQUIRE(double_to_bf16_bits(x) == tilejit::float_to_bf16(x));
  }
}
