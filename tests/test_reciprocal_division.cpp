// reciprocal_division: where a divisor broadcast from fewer elements becomes one reciprocal per element of it,
// which divisions stay, and the results' error against float64 on the interpreter.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ir/passes.h"
#include "test_dsl_helpers.h"
#include "tilejit/kernel.h"
#include "tilejit/launch.h"
#include "tilejit/ops.h"

using namespace tilejit;
using namespace tilejit::dsl_testing;
using ir::OpKind;

namespace {
/// The ops of `kind` directly in `b` (not in nested regions).
int count_in(const ir::Block &b, OpKind kind) {
  int n = 0;
  for (const auto &op : b.ops) n += op->kind == kind;
  return n;
}
const ir::Op *first_for(const ir::Block &b) {
  for (const auto &op : b.ops)
    if (op->kind == OpKind::For) return op.get();
  return nullptr;
}
}  // namespace

TEST_CASE("reciprocal_division: a scalar, per-row or per-column divisor becomes one reciprocal per element of it",
          "[ir][passes]") {
  auto fn = trace(
      [&] {
        Ptr<f32> x = param(0), rows = param(1), out = param(2);
        F32 c = param(3);
        I32 n = param(4);
        Tile r = arange(0, 8), k = arange(0, 16);
        Tile tile = load(x + (r * 16)(_, None) + k(None, _));
        Tile per_row = load(rows + r), per_col = load(rows + k);
        // Loop-invariant divisors: the reciprocals go in front of the loop, the loop keeps multiplications.
        Tile acc = zeros({8, 16}, DType::f32);
        for_range(0, n, 1, [&](I32) { acc = acc + tile / c + tile / per_row(_, None) + tile / per_col(None, _); });
        // Elementwise division (as many divisor elements as results), div_rn and f16 divisions stay divisions.
        Tile narrow = (tile.to(DType::f16) / c.to(DType::f16)).to(DType::f32);
        // A constant divisor: a multiplication by its reciprocal, rounded at compile time.
        store(out + (r * 16)(_, None) + k(None, _), acc / tile + div_rn(tile, c) + narrow + tile / 3.f);
      },
      {P(DType::f32), P(DType::f32), P(DType::f32), S(DType::f32), S(DType::i32)});
  ir::optimize(*fn);
  const ir::Op *loop = first_for(*fn->body);
  REQUIRE(loop);
  CHECK(count_in(*loop->region(0), OpKind::Div) == 0);
  // Three products, each fused with the sum it feeds (contract_fma).
  CHECK(count_in(*loop->region(0), OpKind::Mul) + count_in(*loop->region(0), OpKind::Fma) == 3);
  CHECK(count_in(*loop->region(0), OpKind::Mul) == 0);
  // 1/c, 1/per_row and 1/per_col before the loop; acc / tile, div_rn and the f16 division after it.
  CHECK(count_in(*fn->body, OpKind::Div) == 6);
  int rn = 0;
  for (const auto &op : fn->body->ops) rn += op->kind == OpKind::Div && op->attrs.flag;
  CHECK(rn == 1);
  CHECK(ir::print(*fn).find("div %") != std::string::npos);
  CHECK(ir::print(*fn).find(" {rn}") != std::string::npos);
  CHECK(ir::print(*fn).find("constant {value = 0.3333333432674408}") != std::string::npos);  // f32(1/3)
  CHECK_NOTHROW(ir::verify(*fn));
}

TEST_CASE("reciprocal_division: quotients within 2^-23 relative of float64, special values as division's, div_rn "
          "exact",
          "[ir][passes]") {
  constexpr int N = 256;
  auto k = Kernel("div_by_scalar", [](Ptr<f32> x, Ptr<f32> d, Ptr<f32> out, F32 c) {
    Tile i = arange(0, N);
    store(out + i, load(x + i) / c);
    // A per-row divisor over a [16, 16] view of the same elements.
    Tile r = arange(0, 16), col = arange(0, 16);
    Tile at = (r * 16)(_, None) + col(None, _);
    store(out + N + at, load(x + at) / load(d + r)(_, None));
    store(out + 2 * N + i, div_rn(load(x + i), c));  // correctly rounded
  });
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> expo(-40, 40);
  auto random_float = [&] { return std::ldexp(mant(rng), expo(rng)) * (rng() % 2 ? 1.f : -1.f); };
  std::vector<float> x(N), d(16);
  for (float &v : x) v = random_float();
  for (float &v : d) v = random_float();
  const float c = random_float();
  // Special values: 0/0, inf/inf and nan give NaN; x/0 ±inf; x/inf 0.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  x[0] = 0.f, x[1] = inf, x[2] = nan;
  d[1] = 0.f, d[2] = inf, d[3] = -0.f;
  x[16] = 0.f;  // row 1 (divisor 0): 0/0
  x[32] = inf;  // row 2 (divisor inf): inf/inf
  Buffer bx(N * 4, Backend::Interpreter), bd(16 * 4, Backend::Interpreter), bout(3 * N * 4, Backend::Interpreter);
  bx.upload(x);
  bd.upload(d);
  bout.fill_bytes(0xff);
  LaunchConfig cfg;
  cfg.backend = Backend::Interpreter;
  k.launch(Grid{1}, cfg, bx, bd, bout, c);
  const std::vector<float> got = bout.download_as<float>(3 * N);
  auto check = [&](size_t at, float num, float den) {
    const double exact = double(num) / double(den);
    INFO(num << " / " << den << ": got " << got[at] << ", float64 " << exact);
    if (std::isnan(exact)) {
      CHECK(std::isnan(got[at]));
    } else if (std::isinf(exact) || exact == 0) {
      CHECK(double(got[at]) == exact);
      CHECK(std::signbit(got[at]) == std::signbit(exact));
    } else {
      CHECK(std::fabs(double(got[at]) - exact) <= (std::ldexp(1.0, -23) + std::ldexp(1.0, -47)) * std::fabs(exact));
    }
  };
  for (int i = 0; i < N; ++i) check(size_t(i), x[size_t(i)], c);
  for (int i = 0; i < N; ++i) check(size_t(N + i), x[size_t(i)], d[size_t(i / 16)]);
  // div_rn: the correctly rounded quotient, bit for bit (NaN aside).
  for (int i = 3; i < N; ++i) {
    INFO("div_rn " << x[size_t(i)] << " / " << c);
    CHECK(got[size_t(2 * N + i)] == x[size_t(i)] / c);
  }
}
