// Reductions (sum/max/min, arg max/min) along each axis, and dot against reference loops.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "test_interp_helpers.h"

using namespace tilejit;
using namespace tilejit::interp_testing;
using K = ir::OpKind;

namespace {

constexpr int64_t M = 16, N = 24;

/// Loads an [M,N] tile of dtype d, reduces it along `axis` with `kind`, stores the result (dtype out).
HostBuf run_reduce(const HostBuf &in, DType d, K kind, ir::ReduceKind rk, int axis, DType out) {
  const int64_t len = axis == 0 ? N : M;
  KernelBuilder kb;
  auto *pi = kb.param("in", P(d)), *po = kb.param("out", P(out));
  auto *x = kb.load(kb.tile_ptrs(pi, {M, N}));
  ir::Attrs a;
  a.axis = axis;
  a.reduce = rk;
  auto *r = kb.op(kind, {x}, T({len}, out), a);
  kb.store(kb.tile_ptrs(po, {len}), r);
  HostBuf o(size_t(len * dtype_bytes(out)));
  interp::run(kb.fn, Grid{}, {in.arg(), o.arg()});
  return o;
}

}  // namespace

TEST_CASE("reduce sum accumulates in f32 in axis order, then rounds to the dtype", "[interp][reduce]") {
  Rng rng;
  INFO("seed " << rng.seed);
  for (DType d : {DType::f32, DType::bf16, DType::f16}) {
    auto x = rng.floats(M * N, -2, 2);
    auto bx = buf_of(x, d);
    const auto v = values_of(bx, d);
    for (int axis : {0, 1}) {
      INFO("dtype " << dtype_name(d) << " axis " << axis);
      const auto got = values_of(run_reduce(bx, d, K::Reduce, ir::ReduceKind::sum, axis, d), d);
      const int64_t len = axis == 0 ? N : M, red = axis == 0 ? M : N;
      for (int64_t o = 0; o < len; ++o) {
        float acc = 0;
        double exact = 0;
        for (int64_t j = 0; j < red; ++j) {
          const double e = axis == 0 ? v[size_t(j * N + o)] : v[size_t(o * N + j)];
          acc += float(e);
          exact += e;
        }
        REQUIRE(got[size_t(o)] == ref_round(acc, d));  // bit-exact with the sequential f32 loop
        // and close to the exact sum: f32 accumulation error (red·2^-24·Σ|x|) plus one dtype rounding
        REQUIRE(std::fabs(got[size_t(o)] - exact) <= 1e-5 * red * 2 + std::fabs(exact) * 0x1p-7);
      }
    }
  }
}

TEST_CASE("reduce max/min per axis, NaN propagates, integer sums wrap", "[interp][reduce]") {
  Rng rng;
  INFO("seed " << rng.seed);
  auto x = rng.floats(M * N);
  x[size_t(3 * N + 5)] = std::nanf("");  // row 3, column 5
  auto bx = buf_of(x, DType::f32);
  for (int axis : {0, 1}) {
    auto mx = run_reduce(bx, DType::f32, K::Reduce, ir::ReduceKind::max, axis, DType::f32).as<float>();
    auto mn = run_reduce(bx, DType::f32, K::Reduce, ir::ReduceKind::min, axis, DType::f32).as<float>();
    const int64_t len = axis == 0 ? N : M, red = axis == 0 ? M : N;
    for (int64_t o = 0; o < len; ++o) {
      float hi = -INFINITY, lo = INFINITY;
      bool nan = false;
      for (int64_t j = 0; j < red; ++j) {
        const float e = axis == 0 ? x[size_t(j * N + o)] : x[size_t(o * N + j)];
        nan |= std::isnan(e);
        hi = std::max(hi, e), lo = std::min(lo, e);
      }
      INFO("axis " << axis << " index " << o);
      if (nan) {
        REQUIRE(std::isnan(mx[size_t(o)]));
        REQUIRE(std::isnan(mn[size_t(o)]));
      } else {
        REQUIRE(mx[size_t(o)] == hi);
        REQUIRE(mn[size_t(o)] == lo);
      }
    }
  }
  std::vector<int8_t> xi(M * N);
  for (auto &v : xi) v = int8_t(rng.integer(-128, 127));
  auto bi = HostBuf::of(xi);
  auto s = run_reduce(bi, DType::i8, K::Reduce, ir::ReduceKind::sum, 1, DType::i8).as<int8_t>();
  auto mx = run_reduce(bi, DType::i8, K::Reduce, ir::ReduceKind::max, 1, DType::i8).as<int8_t>();
  for (int64_t r = 0; r < M; ++r) {
    int sum = 0, hi = -128;
    for (int64_t j = 0; j < N; ++j) sum += xi[size_t(r * N + j)], hi = std::max<int>(hi, xi[size_t(r * N + j)]);
    REQUIRE(s[size_t(r)] == int8_t(uint8_t(unsigned(sum))));
    REQUIRE(mx[size_t(r)] == hi);
  }
}

TEST_CASE("arg_reduce returns the first index of the extreme", "[interp][reduce]") {
  Rng rng;
  INFO("seed " << rng.seed);
  std::vector<float> x(M * N);
  for (auto &v : x) v = float(rng.integer(-3, 3));  // many ties
  x[size_t(2 * N + 9)] = std::nanf("");             // a NaN is the extreme for both
  auto bx = buf_of(x, DType::f32);
  for (int axis : {0, 1})
    for (auto rk : {ir::ReduceKind::max, ir::ReduceKind::min}) {
      auto got = run_reduce(bx, DType::f32, K::ArgReduce, rk, axis, DType::i32).as<int32_t>();
      const int64_t len = axis == 0 ? N : M, red = axis == 0 ? M : N;
      for (int64_t o = 0; o < len; ++o) {
        int64_t best = 0;
        auto at = [&](int64_t j) { return axis == 0 ? x[size_t(j * N + o)] : x[size_t(o * N + j)]; };
        for (int64_t j = 0; j < red; ++j) {
          if (std::isnan(at(j))) { best = j; break; }
          if (rk == ir::ReduceKind::max ? at(j) > at(best) : at(j) < at(best)) best = j;
        }
        INFO("axis " << axis << " " << ir::reduce_kind_name(rk) << " index " << o);
        REQUIRE(got[size_t(o)] == best);
      }
    }
}

namespace {

/// f32 → tf32: 10 stored mantissa bits, round to nearest with ties away from zero (cvt.rna.tf32.f32).
float ref_tf32(float x) {
  return std::bit_cast<float>((std::bit_cast<uint32_t>(x) + 0x1000u) & ~0x1fffu);
}

/// c = dot(a [Mx K], b [K x Nn], acc) with inputs of dtype d; returns the f32 result.
std::vector<float> run_dot(const HostBuf &a, const HostBuf &b, const HostBuf &acc, DType d, int64_t m, int64_t k,
                           int64_t n, bool tf32) {
  KernelBuilder kb;
  auto *pa = kb.param("a", P(d)), *pb = kb.param("b", P(d)), *pc = kb.param("acc", P(DType::f32));
  auto *po = kb.param("out", P(DType::f32));
  auto *ta = kb.load(kb.tile_ptrs(pa, {m, k}));
  auto *tb = kb.load(kb.tile_ptrs(pb, {k, n}));
  auto *tc = kb.load(kb.tile_ptrs(pc, {m, n}));
  ir::Attrs at;
  at.flag = tf32;
  auto *r = kb.op(K::Dot, {ta, tb, tc}, T({m, n}, DType::f32), at);
  kb.store(kb.tile_ptrs(po, {m, n}), r);
  HostBuf out(size_t(m * n * 4));
  interp::run(kb.fn, Grid{}, {a.arg(), b.arg(), acc.arg(), out.arg()});
  return out.as<float>();
}

}  // namespace

TEST_CASE("dot accumulates f32 products in k order from acc", "[interp][dot]") {
  Rng rng;
  INFO("seed " << rng.seed);
  constexpr int64_t m = 32, k = 48, n = 40;
  for (DType d : {DType::bf16, DType::f16, DType::f32}) {
    for (bool tf32 : {false, true}) {
      if (tf32 && d != DType::f32) continue;
      INFO("dtype " << dtype_name(d) << " tf32 " << tf32);
      auto a = rng.floats(m * k, -1, 1), b = rng.floats(k * n, -1, 1), c = rng.floats(m * n, -1, 1);
      auto ba = buf_of(a, d), bb = buf_of(b, d), bc = buf_of(c, DType::f32);
      const auto va = values_of(ba, d), vb = values_of(bb, d);
      auto got = run_dot(ba, bb, bc, d, m, k, n, tf32);
      auto op = [&](double v) { return tf32 ? ref_tf32(float(v)) : float(v); };
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          float acc = c[size_t(i * n + j)];
          double exact = acc;
          for (int64_t p = 0; p < k; ++p) {
            const float x = op(va[size_t(i * k + p)]), y = op(vb[size_t(p * n + j)]);
            acc = std::fma(x, y, acc);  // exact products for 16-bit inputs make fma = mul + add
            exact += double(va[size_t(i * k + p)]) * vb[size_t(p * n + j)];
          }
          INFO("element [" << i << ", " << j << "]");
          REQUIRE(got[size_t(i * n + j)] == acc);
          // Against the double reference: k f32 roundings of partial sums bounded by k·|a||b| (≤ k),
          // plus tf32 operand rounding (2^-11 relative per operand).
          const double tol = k * k * 0x1p-24 + (tf32 ? k * 2 * 0x1p-11 : 0);
          REQUIRE(std::fabs(got[size_t(i * n + j)] - exact) <= tol);
        }
    }
  }
}
