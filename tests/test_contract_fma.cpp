// contract_fma: which products fuse with the sum they feed (in the IR), where a negation goes, what stays, and
// the fused results bit for bit std::fma's on the interpreter.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "ir/passes.h"
#include "test_dsl_helpers.h"
#include "text_matches.h"
#include "tilejit/kernel.h"
#include "tilejit/launch.h"
#include "tilejit/ops.h"

using namespace tilejit;
using namespace tilejit::dsl_testing;
using testing::count_matches;

namespace {
/// Ops over the [8, 16] f32 tiles, where the per-element work is.
int tile_ops(const std::string &ir, const char *op) {
  return count_matches(ir, std::string("= ") + op + R"( [^\n]*: tensor<8x16xf32>)");
}

std::unique_ptr<ir::Function> sums_of_products() {
  return trace(
      [&] {
        Ptr<f32> x = param(0), out = param(1);
        F32 a = param(2);
        Tile r = arange(0, 8), k = arange(0, 16);
        Tile at = (r * 16)(_, None) + k(None, _);
        Tile t = load(x + at), u = load(x + 128 + at), v = load(x + 256 + at);
        Tile row = load(x + r)(_, None);
        // Fused: t·u + v, v − t·a (a negated once, as a scalar), u·v − t (t negated), v − row·t (the row negated).
        Tile fused = (t * u + v) + (v - t * a) + (u * v - t) + (v - row * t);
        // Kept: a product with two uses, an f16 product, mul_rn's product.
        Tile twice = t * v;
        Tile kept = (twice + u) + twice + ((t.to(DType::f16) * u.to(DType::f16)) + v.to(DType::f16)).to(DType::f32) +
                    (mul_rn(t, v) + u);
        store(out + at, fused + kept);
      },
      {P(DType::f32), P(DType::f32), S(DType::f32)});
}
}  // namespace

TEST_CASE("contract_fma: a product added or subtracted once becomes an fma, shared, narrow and mul_rn products stay",
          "[ir][passes]") {
  auto fn = sums_of_products();
  ir::optimize(*fn);
  const std::string ir = ir::print(*fn);
  INFO(ir);
  // fused: 4 fmas; kept: twice and mul_rn's.
  CHECK(tile_ops(ir, "fma") == 4);
  CHECK(tile_ops(ir, "mul") == 2);
  CHECK(count_matches(ir, R"(= mul [^\n]*\{rn\} : tensor<8x16xf32>)") == 1);
  CHECK(count_matches(ir, R"(= neg %p2 : f32)") == 1);                 // the scalar, not its broadcast
  CHECK(count_matches(ir, R"(= neg [^\n]*: tensor<8xf32>)") == 1);     // the row's values, once per row
  CHECK(count_matches(ir, R"(= neg [^\n]*: tensor<8x16xf32>)") == 1);  // t in u·v − t
  CHECK(count_matches(ir, R"(= mul [^\n]*: tensor<8x16xf16>)") == 1);
  CHECK_NOTHROW(ir::verify(*fn));

  auto exact = sums_of_products();
  ir::optimize(*exact, ir::FloatRewrites::Exact);
  CHECK(tile_ops(ir::print(*exact), "fma") == 0);
}

TEST_CASE("contract_fma: the interpreter's fused results are std::fma's bit for bit, mul_rn's the rounded product's",
          "[ir][passes]") {
  constexpr int N = 256;
  // The same inputs for each form, loaded once per form (one shared product would be computed, not fused).
  auto k = Kernel("sums_of_products", [](Ptr<f32> x, Ptr<f32> y, Ptr<f32> z, Ptr<f32> out) {
    Tile i = arange(0, N);
    auto a = [&](int j) { return load(x + j * N + i); };
    auto b = [&](int j) { return load(y + j * N + i); };
    auto c = [&](int j) { return load(z + j * N + i); };
    store(out + i, a(0) * b(0) + c(0));
    store(out + N + i, c(1) - a(1) * b(1));
    store(out + 2 * N + i, a(2) * b(2) - c(2));
    store(out + 3 * N + i, mul_rn(a(3), b(3)) + c(3));
  });
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> d(-4.f, 4.f);
  std::vector<float> x(4 * N), y(4 * N), z(4 * N);
  for (int i = 0; i < N; ++i) {
    x[size_t(i)] = d(rng);
    y[size_t(i)] = d(rng);
    z[size_t(i)] = -x[size_t(i)] * y[size_t(i)];  // near-cancellation: where a fused and a rounded product differ
    if (i % 2) z[size_t(i)] = d(rng);
  }
  for (int j = 1; j < 4; ++j)
    for (int i = 0; i < N; ++i) {
      x[size_t(j * N + i)] = x[size_t(i)];
      y[size_t(j * N + i)] = y[size_t(i)];
      z[size_t(j * N + i)] = z[size_t(i)];
    }
  // Negated for c − a·b's cancellation (a·b − c cancels with the same z).
  for (int i = 0; i < N; i += 2) z[size_t(N + i)] = -z[size_t(i)];
  Buffer bx(4 * N * 4, Backend::Interpreter), by(4 * N * 4, Backend::Interpreter), bz(4 * N * 4, Backend::Interpreter),
      out(4 * N * 4, Backend::Interpreter);
  bx.upload(x);
  by.upload(y);
  bz.upload(z);
  out.fill_bytes(0xff);
  LaunchConfig cfg;
  cfg.backend = Backend::Interpreter;
  k.launch(Grid{1}, cfg, bx, by, bz, out);
  const std::vector<float> got = out.download_as<float>(4 * N);
  int differs = 0;  // cases where fusing changes the result: the test would not notice a product rounded first
  for (int i = 0; i < N; ++i) {
    const float a = x[size_t(i)], b = y[size_t(i)], c = z[size_t(i)];
    volatile float p = a * b;  // rounded on its own (no host contraction across the volatile)
    INFO(a << " · " << b << ", " << c);
    CHECK(got[size_t(i)] == std::fma(a, b, c));
    CHECK(got[size_t(N + i)] == std::fma(-a, b, z[size_t(N + i)]));
    CHECK(got[size_t(2 * N + i)] == std::fma(a, b, -c));
    CHECK(got[size_t(3 * N + i)] == p + c);
    differs += std::fma(a, b, c) != p + c;
  }
  CHECK(differs > N / 4);
}
