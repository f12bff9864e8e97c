// Elementwise ops through the interpreter (load → op → store) against straightforward C++: float ops in
// the dtype's own arithmetic (float for f32 and bf16, _Float16 for f16, double for f64), integer ops with
// explicit wrapping. Exact comparisons unless a tolerance is stated.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "test_interp_helpers.h"
#include "tilejit/error.h"

using namespace tilejit;
using namespace tilejit::interp_testing;
using K = ir::OpKind;

namespace {

constexpr int64_t kN = 256;

/// out = op(inputs...) over kN elements; inputs are raw buffers of dtype `in`, the output of dtype `out`.
HostBuf run_op(K kind, DType in, DType out, const std::vector<const HostBuf *> &inputs, ir::Attrs attrs = {},
               std::vector<DType> in_types = {}) {
  KernelBuilder kb;
  std::vector<ir::Value *> params, vals;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DType d = i < in_types.size() ? in_types[i] : in;
    params.push_back(kb.param("in" + std::to_string(i), P(d)));
  }
  auto *po = kb.param("out", P(out));
  for (auto *p : params) vals.push_back(kb.load(kb.tile_ptrs(p, {kN})));
  auto *r = kb.op(kind, vals, T({kN}, out), attrs);
  kb.store(kb.tile_ptrs(po, {kN}), r);
  HostBuf o(size_t(kN * dtype_bytes(out)));
  std::vector<KernelArg> args;
  for (auto *b : inputs) args.push_back(b->arg());
  args.push_back(o.arg());
  interp::run(kb.fn, Grid{}, args);
  return o;
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b)); }

/// Reference binary op in the dtype's own arithmetic.
double ref_binary(K k, DType d, double x, double y) {
  auto apply = [k](auto a, auto b) -> double {
    using V = decltype(a);
    switch (k) {
      case K::Add: return double(V(a + b));
      case K::Sub: return double(V(a - b));
      case K::Mul: return double(V(a * b));
      case K::Div: return double(V(a / b));
      case K::Rem: return std::fmod(double(a), double(b));
      case K::Minimum: return std::isnan(double(a)) || std::isnan(double(b)) ? NAN : double(a < b ? a : b);
      case K::Maximum: return std::isnan(double(a)) || std::isnan(double(b)) ? NAN : double(a > b ? a : b);
      default: return NAN;
    }
  };
  switch (d) {
    case DType::f16: return apply(_Float16(x), _Float16(y));
    case DType::bf16: return ref_round_bf16(float(apply(float(x), float(y))));
    case DType::f32: return apply(float(x), float(y));
    default: return apply(x, y);
  }
}

}  // namespace

TEST_CASE("float binary ops match the dtype's own arithmetic", "[interp][elementwise]") {
  Rng rng;
  INFO("seed " << rng.seed);
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    for (K k : {K::Add, K::Sub, K::Mul, K::Div, K::Rem, K::Minimum, K::Maximum}) {
      INFO("dtype " << dtype_name(d) << " op " << ir::op_name(k));
      auto a = rng.floats(kN), b = rng.floats(kN);
      b[3] = 0.0f;                        // x / 0 = ±inf, fmod(x, 0) = NaN
      a[5] = std::nanf("");               // NaN propagates through every op, min/max included
      b[6] = std::nanf("");
      a[7] = 3e4f, b[7] = 3e4f;           // f16 overflow on add/mul
      a[8] = 1e-3f, b[8] = 1e-3f;         // f16 product in the subnormal range
      auto ba = buf_of(a, d), bb = buf_of(b, d);
      const auto xa = values_of(ba, d), xb = values_of(bb, d);
      const auto got = values_of(run_op(k, d, d, {&ba, &bb}), d);
      for (int64_t i = 0; i < kN; ++i) {
        INFO("element " << i << ": " << xa[size_t(i)] << ", " << xb[size_t(i)]);
        REQUIRE(same(got[size_t(i)], ref_binary(k, d, xa[size_t(i)], xb[size_t(i)])));
      }
    }
  }
}

TEST_CASE("float minimum/maximum order signed zeros", "[interp][elementwise]") {
  auto a = std::vector<float>(kN, -0.0f), b = std::vector<float>(kN, 0.0f);
  auto ba = buf_of(a, DType::f32), bb = buf_of(b, DType::f32);
  auto mx = run_op(K::Maximum, DType::f32, DType::f32, {&ba, &bb}).as<float>();
  auto mn = run_op(K::Minimum, DType::f32, DType::f32, {&ba, &bb}).as<float>();
  CHECK(!std::signbit(mx[0]));
  CHECK(std::signbit(mn[0]));
}

TEST_CASE("integer binary ops wrap to their width", "[interp][elementwise]") {
  Rng rng;
  INFO("seed " << rng.seed);
  SECTION("i32") {
    std::vector<int32_t> a(kN), b(kN);
    for (int64_t i = 0; i < kN; ++i) {
      a[size_t(i)] = int32_t(rng.integer(INT32_MIN, INT32_MAX));
      b[size_t(i)] = int32_t(rng.integer(-1000, 1000));
      if (b[size_t(i)] == 0) b[size_t(i)] = 7;
    }
    a[0] = INT32_MIN, b[0] = -1;  // the one overflowing division: wraps to INT32_MIN, remainder 0
    auto ba = HostBuf::of(a), bb = HostBuf::of(b);
    auto w = [](int64_t v) { return int32_t(uint32_t(uint64_t(v))); };
    for (K k : {K::Add, K::Sub, K::Mul, K::Div, K::Rem, K::Minimum, K::Maximum, K::And, K::Or, K::Xor}) {
      INFO(ir::op_name(k));
      auto got = run_op(k, DType::i32, DType::i32, {&ba, &bb}).as<int32_t>();
      for (int64_t i = 0; i < kN; ++i) {
        const int64_t x = a[size_t(i)], y = b[size_t(i)];
        int32_t want = 0;
        switch (k) {
          case K::Add: want = w(x + y); break;
          case K::Sub: want = w(x - y); break;
          case K::Mul: want = w(x * y); break;
          case K::Div: want = w(x / y); break;
          case K::Rem: want = w(x % y); break;
          case K::Minimum: want = int32_t(std::min(x, y)); break;
          case K::Maximum: want = int32_t(std::max(x, y)); break;
          case K::And: want = int32_t(x & y); break;
          case K::Or: want = int32_t(x | y); break;
          case K::Xor: want = int32_t(x ^ y); break;
          default: break;
        }
        INFO("element " << i << ": " << x << ", " << y);
        REQUIRE(got[size_t(i)] == want);
      }
    }
  }
  SECTION("i8 shifts, add and mul") {
    std::vector<int8_t> a(kN), s(kN);
    for (int64_t i = 0; i < kN; ++i) {
      a[size_t(i)] = int8_t(rng.integer(-128, 127));
      s[size_t(i)] = int8_t(rng.integer(-2, 9));  // includes amounts outside [0, 8)
    }
    auto ba = HostBuf::of(a), bs = HostBuf::of(s);
    auto shl = run_op(K::Shl, DType::i8, DType::i8, {&ba, &bs}).as<int8_t>();
    auto shr = run_op(K::Shr, DType::i8, DType::i8, {&ba, &bs}).as<int8_t>();
    auto add = run_op(K::Add, DType::i8, DType::i8, {&ba, &bs}).as<int8_t>();
    auto mul = run_op(K::Mul, DType::i8, DType::i8, {&ba, &bs}).as<int8_t>();
    for (int64_t i = 0; i < kN; ++i) {
      const int x = a[size_t(i)], n = s[size_t(i)];
      const bool in_range = n >= 0 && n < 8;
      INFO("element " << i << ": " << x << ", " << n);
      REQUIRE(shl[size_t(i)] == (in_range ? int8_t(uint8_t(unsigned(x) << n)) : 0));
      REQUIRE(shr[size_t(i)] == (in_range ? int8_t(x >> n) : int8_t(x < 0 ? -1 : 0)));
      REQUIRE(add[size_t(i)] == int8_t(uint8_t(unsigned(x + n))));
      REQUIRE(mul[size_t(i)] == int8_t(uint8_t(unsigned(x * n))));
    }
  }
  SECTION("i64 overflow wraps") {
    std::vector<int64_t> a(kN, INT64_MAX), b(kN, 2);
    a[1] = INT64_MIN, b[1] = -1;
    auto ba = HostBuf::of(a), bb = HostBuf::of(b);
    auto add = run_op(K::Add, DType::i64, DType::i64, {&ba, &bb}).as<int64_t>();
    auto div = run_op(K::Div, DType::i64, DType::i64, {&ba, &bb}).as<int64_t>();
    CHECK(add[0] == INT64_MIN + 1);
    CHECK(div[1] == INT64_MIN);
    CHECK(div[0] == INT64_MAX / 2);
  }
}

TEST_CASE("integer division by zero names the op, line, element and program", "[interp][elementwise]") {
  std::vector<int32_t> a(kN, 5), b(kN, 1);
  b[37] = 0;
  auto ba = HostBuf::of(a), bb = HostBuf::of(b);
  for (K k : {K::Div, K::Rem}) {
    try {
      run_op(k, DType::i32, DType::i32, {&ba, &bb});
      FAIL("expected InterpError");
    } catch (const InterpError &e) {
      const std::string m = e.what();
      CHECK_THAT(m, Catch::Contains(std::string(ir::op_name(k)) + " at kernels/x.cpp:12"));
      CHECK_THAT(m, Catch::Contains("by zero at element [37] of the 256 tile"));
      CHECK_THAT(m, Catch::Contains("program_id (0, 0, 0)"));
    }
  }
}

TEST_CASE("unary math is within one ulp of libm, rounded to the dtype", "[interp][elementwise]") {
  Rng rng;
  INFO("seed " << rng.seed);
  struct M { K k; float (*f)(float); float lo, hi; };
  const M ms[] = {
      {K::Exp, [](float x) { return std::exp(x); }, -8, 8},
      {K::Exp2, [](float x) { return std::exp2(x); }, -8, 8},
      {K::Log, [](float x) { return std::log(x); }, 1e-3f, 100},
      {K::Log2, [](float x) { return std::log2(x); }, 1e-3f, 100},
      {K::Sqrt, [](float x) { return std::sqrt(x); }, 0, 100},
      {K::Rsqrt, [](float x) { return 1.0f / std::sqrt(x); }, 1e-3f, 100},
      {K::Tanh, [](float x) { return std::tanh(x); }, -4, 4},
      {K::Sigmoid, [](float x) { return float(1.0 / (1.0 + std::exp(-double(x)))); }, -10, 10},
      {K::Abs, [](float x) { return std::fabs(x); }, -4, 4},
      {K::Neg, [](float x) { return -x; }, -4, 4},
  };
  for (DType d : {DType::f32, DType::bf16, DType::f16}) {
    // One ulp of the dtype relative to the value (f32: 2^-23; bf16: 2^-7; f16: 2^-10), plus the libm
    // reference's own error for f32.
    const double rel = d == DType::f32 ? 0x1p-22 : d == DType::bf16 ? 0x1p-7 : 0x1p-10;
    for (const M &m : ms) {
      INFO("dtype " << dtype_name(d) << " op " << ir::op_name(m.k));
      auto a = rng.floats(kN, m.lo, m.hi);
      auto ba = buf_of(a, d);
      const auto x = values_of(ba, d);
      const auto got = values_of(run_op(m.k, d, d, {&ba}), d);
      for (int64_t i = 0; i < kN; ++i) {
        const double want = ref_round(m.f(float(x[size_t(i)])), d);
        INFO("x = " << x[size_t(i)] << " got " << got[size_t(i)] << " want " << want);
        REQUIRE(std::fabs(got[size_t(i)] - want) <= rel * std::fabs(want) + 1e-30);
      }
    }
  }
  SECTION("NaN and infinities") {
    std::vector<float> a(kN, 1.0f);
    a[0] = -1.0f, a[1] = 0.0f, a[2] = std::numeric_limits<float>::infinity(), a[3] = -a[2];
    auto ba = buf_of(a, DType::f32);
    auto lg = run_op(K::Log, DType::f32, DType::f32, {&ba}).as<float>();
    auto ex = run_op(K::Exp, DType::f32, DType::f32, {&ba}).as<float>();
    auto sg = run_op(K::Sigmoid, DType::f32, DType::f32, {&ba}).as<float>();
    CHECK(std::isnan(lg[0]));
    CHECK(lg[1] == -std::numeric_limits<float>::infinity());
    CHECK(std::isinf(ex[2]));
    CHECK(ex[3] == 0.0f);
    CHECK(sg[2] == 1.0f);
    CHECK(sg[3] == 0.0f);
  }
}

TEST_CASE("integer unary ops: neg, abs, not", "[interp][elementwise]") {
  std::vector<int16_t> a = {5, -7, 0, INT16_MIN, INT16_MAX, -1};
  a.resize(kN, 3);
  auto ba = HostBuf::of(a);
  auto neg = run_op(K::Neg, DType::i16, DType::i16, {&ba}).as<int16_t>();
  auto abs = run_op(K::Abs, DType::i16, DType::i16, {&ba}).as<int16_t>();
  auto inv = run_op(K::Not, DType::i16, DType::i16, {&ba}).as<int16_t>();
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(neg[i] == int16_t(uint16_t(-int(a[i]))));
    REQUIRE(abs[i] == int16_t(uint16_t(std::abs(int(a[i])))));
    REQUIRE(inv[i] == int16_t(~a[i]));
  }
  std::vector<uint8_t> m = {0, 1, 1, 0};
  m.resize(kN, 1);
  auto bm = HostBuf::of(m);
  auto lnot = run_op(K::Not, DType::i1, DType::i1, {&bm}).as<uint8_t>();
  for (size_t i = 0; i < m.size(); ++i) REQUIRE(lnot[i] == (m[i] ? 0 : 1));
}

TEST_CASE("fma is fused in f32 and rounded once in the 16-bit formats", "[interp][elementwise]") {
  Rng rng;
  INFO("seed " << rng.seed);
  auto a = rng.floats(kN), b = rng.floats(kN), c = rng.floats(kN);
  a[0] = 1.0f + 0x1p-12f, b[0] = 1.0f - 0x1p-12f, c[0] = -1.0f;  // a*b+c = -2^-24 only when fused
  auto ba = buf_of(a, DType::f32), bb = buf_of(b, DType::f32), bc = buf_of(c, DType::f32);
  auto got = run_op(K::Fma, DType::f32, DType::f32, {&ba, &bb, &bc}).as<float>();
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(got[i] == std::fma(a[i], b[i], c[i]));
  CHECK(got[0] == -0x1p-24f);
  auto ha = buf_of(a, DType::f16), hb = buf_of(b, DType::f16), hc = buf_of(c, DType::f16);
  const auto xa = values_of(ha, DType::f16), xb = values_of(hb, DType::f16), xc = values_of(hc, DType::f16);
  auto hgot = values_of(run_op(K::Fma, DType::f16, DType::f16, {&ha, &hb, &hc}), DType::f16);
  // f16 products are exact in double, and the sum of three f16 values here is too: one rounding.
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(hgot[i] == ref_round_f16(xa[i] * xb[i] + xc[i]));
}

TEST_CASE("cmp follows IEEE for floats (NaN unordered) and signed order for ints", "[interp][elementwise]") {
  Rng rng;
  INFO("seed " << rng.seed);
  auto a = rng.floats(kN, -3, 3), b = rng.floats(kN, -3, 3);
  for (size_t i = 0; i < 16; ++i) b[i] = a[i];  // equal pairs
  a[20] = std::nanf("");
  b[21] = std::nanf("");
  auto ba = buf_of(a, DType::f32), bb = buf_of(b, DType::f32);
  std::vector<int32_t> ia(kN), ib(kN);
  for (int64_t i = 0; i < kN; ++i) ia[size_t(i)] = int32_t(rng.integer(-5, 5)), ib[size_t(i)] = int32_t(rng.integer(-5, 5));
  auto bia = HostBuf::of(ia), bib = HostBuf::of(ib);
  for (ir::CmpPred p : {ir::CmpPred::eq, ir::CmpPred::ne, ir::CmpPred::lt, ir::CmpPred::le, ir::CmpPred::gt,
                        ir::CmpPred::ge}) {
    INFO("pred " << ir::cmp_pred_name(p));
    ir::Attrs at;
    at.pred = p;
    auto fgot = run_op(K::Cmp, DType::f32, DType::i1, {&ba, &bb}, at).as<uint8_t>();
    auto igot = run_op(K::Cmp, DType::i32, DType::i1, {&bia, &bib}, at).as<uint8_t>();
    auto ref = [p](auto x, auto y) {
      switch (p) {
        case ir::CmpPred::eq: return x == y;
        case ir::CmpPred::ne: return x != y;
        case ir::CmpPred::lt: return x < y;
        case ir::CmpPred::le: return x <= y;
        case ir::CmpPred::gt: return x > y;
        default: return x >= y;
      }
    };
    for (size_t i = 0; i < size_t(kN); ++i) {
      REQUIRE(fgot[i] == uint8_t(ref(a[i], b[i])));
      REQUIRE(igot[i] == uint8_t(ref(ia[i], ib[i])));
    }
  }
}

TEST_CASE("select picks a where the condition holds", "[interp][elementwise]") {
  Rng rng;
  INFO("seed " << rng.seed);
  auto a = rng.floats(kN), b = rng.floats(kN);
  std::vector<uint8_t> c(kN);
  for (auto &x : c) x = uint8_t(rng.integer(0, 1));
  auto bc = HostBuf::of(c), ba = buf_of(a, DType::bf16), bb = buf_of(b, DType::bf16);
  auto got = values_of(run_op(K::Select, DType::bf16, DType::bf16, {&bc, &ba, &bb}, {},
                              {DType::i1, DType::bf16, DType::bf16}),
                       DType::bf16);
  for (size_t i = 0; i < size_t(kN); ++i)
    REQUIRE(got[i] == (c[i] ? ref_round_bf16(a[i]) : ref_round_bf16(b[i])));
}

TEST_CASE("cast between dtypes: rounding, truncation, clamping, wrapping", "[interp][elementwise]") {
  Rng rng;
  INFO("seed " << rng.seed);
  auto a = rng.floats(kN, -1e5f, 1e5f);
  a[0] = std::nanf(""), a[1] = 3e9f, a[2] = -3e9f, a[3] = -2.7f, a[4] = 0.0f, a[5] = 65520.0f, a[6] = 1e-6f;
  auto ba = buf_of(a, DType::f32);
  auto to_i32 = run_op(K::Cast, DType::f32, DType::i32, {&ba}).as<int32_t>();
  auto to_bf16 = values_of(run_op(K::Cast, DType::f32, DType::bf16, {&ba}), DType::bf16);
  auto to_f16 = values_of(run_op(K::Cast, DType::f32, DType::f16, {&ba}), DType::f16);
  auto to_i1 = run_op(K::Cast, DType::f32, DType::i1, {&ba}).as<uint8_t>();
  auto to_i8 = run_op(K::Cast, DType::f32, DType::i8, {&ba}).as<int8_t>();
  for (size_t i = 0; i < size_t(kN); ++i) {
    const float x = a[i];
    INFO("x = " << x);
    const double t = std::trunc(double(x));
    const int32_t want_i32 = std::isnan(x) ? 0 : t >= 2147483647.0 ? INT32_MAX : t <= -2147483648.0 ? INT32_MIN : int32_t(t);
    const int8_t want_i8 = std::isnan(x) ? 0 : t >= 127 ? 127 : t <= -128 ? -128 : int8_t(t);
    REQUIRE(to_i32[i] == want_i32);
    REQUIRE(to_i8[i] == want_i8);
    REQUIRE(same(to_bf16[i], ref_round_bf16(x)));
    REQUIRE(same(to_f16[i], ref_round_f16(x)));
    REQUIRE(to_i1[i] == uint8_t(x != 0.0f));
  }
  CHECK(std::isinf(to_f16[5]));
  CHECK(to_f16[6] == 17 * 0x1p-24);  // 1e-6 is a subnormal in f16: 16.78 quanta → 17

  std::vector<int32_t> ints(kN);
  for (auto &v : ints) v = int32_t(rng.integer(INT32_MIN, INT32_MAX));
  ints[0] = 16777217;  // not representable in f32: ties to even
  auto bi = HostBuf::of(ints);
  auto i_f32 = run_op(K::Cast, DType::i32, DType::f32, {&bi}).as<float>();
  auto i_i8 = run_op(K::Cast, DType::i32, DType::i8, {&bi}).as<int8_t>();
  auto i_i64 = run_op(K::Cast, DType::i32, DType::i64, {&bi}).as<int64_t>();
  for (size_t i = 0; i < size_t(kN); ++i) {
    REQUIRE(i_f32[i] == float(ints[i]));
    REQUIRE(i_i8[i] == int8_t(uint8_t(uint32_t(ints[i]))));
    REQUIRE(i_i64[i] == int64_t(ints[i]));
  }
  std::vector<uint8_t> bits(kN);
  for (auto &v : bits) v = uint8_t(rng.integer(0, 1));
  auto bb = HostBuf::of(bits);
  auto b_i32 = run_op(K::Cast, DType::i1, DType::i32, {&bb}).as<int32_t>();
  auto b_f32 = run_op(K::Cast, DType::i1, DType::f32, {&bb}).as<float>();
  for (size_t i = 0; i < size_t(kN); ++i) {
    REQUIRE(b_i32[i] == bits[i]);  // i1 zero-extends: true is 1, not -1
    REQUIRE(b_f32[i] == float(bits[i]));
  }
}
