// reassociate_scalar_factors: which products of uniform factors become one multiplication (in the IR), and the
// rewritten products' error against float64 on the interpreter.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <regex>
#include <vector>

#include "ir/passes.h"
#include "test_dsl_helpers.h"
#include "text_matches.h"
#include "tilejit/kernel.h"
#include "tilejit/launch.h"
#include "tilejit/ops.h"

using namespace tilejit;
using namespace tilejit::dsl_testing;
using ir::OpKind;

using testing::count_matches;

namespace {
/// The multiplications (or fmas) over tiles of 128 f32 elements, where the per-element work is.
int tile_ops(const std::string &ir, const char *op) {
  return count_matches(ir, std::string("= ") + op + R"( [^\n]*: tensor<(8x16|128)xf32>)");
}
}  // namespace

TEST_CASE("reassociate_scalar_factors: chains of scalar and constant factors become one product per element",
          "[ir][passes]") {
  auto fn = trace(
      [&] {
        Ptr<f32> x = param(0), out = param(1);
        F32 a = param(2), b = param(3);
        Tile r = arange(0, 8), k = arange(0, 16);
        Tile at = (r * 16)(_, None) + k(None, _);
        Tile t = load(x + at);
        // (t·a)·b, (t·a)/b (a reciprocal first), 2·(3·t), and a·tanh(t·a·b) into an fma's multiplicand: each one
        // multiplication per element (the fma one none).
        Tile y = (t * a) * b + (t * a) / b + 2.f * (3.f * t);
        Tile z = fma(a * tanh(t * a * b), b, y);
        // Not rewritten: a product used twice (it is computed anyway), a per-row factor, and f16.
        Tile twice = t * a;
        Tile rows = load(x + r)(_, None);
        Tile kept = twice * b + twice + (t * rows) * a + ((t.to(DType::f16) * 2.f) * 3.f).to(DType::f32);
        store(out + at, z + kept);
      },
      {P(DType::f32), P(DType::f32), S(DType::f32), S(DType::f32)});
  ir::optimize(*fn);
  const std::string ir = ir::print(*fn);
  INFO(ir);
  // y: 3 (one per term; tanh's argument t·(a·b) is the first term's, shared by CSE), twice 1, twice·b 1, t·rows
  // and its ·a 2 = 7; the fma takes a·b and keeps no multiplication. contract_fma then fuses the four products that
  // are only added (y's second and third terms, twice·b, (t·rows)·a) into fmas: 3 multiplications and 5 fmas.
  CHECK(tile_ops(ir, "mul") == 3);
  CHECK(tile_ops(ir, "fma") == 5);
  CHECK(std::regex_search(ir, std::regex(R"(= fma %\d+, %\d+, %\d+ : tensor<8x16xf32>)")));
  CHECK(ir.find("constant {value = 6} : tensor<8x16xf32>") != std::string::npos);  // 2·3 folded
  CHECK(std::regex_search(ir, std::regex(R"(= mul %p2, %p3 : f32)")));             // a·b once, as a scalar
  CHECK_NOTHROW(ir::verify(*fn));
}

TEST_CASE("reassociate_scalar_factors: products within 2 ulp of float64, before and inside a loop", "[ir][passes]") {
  constexpr int N = 256;
  auto kern = Kernel("scalar_factors", [](Ptr<f32> x, Ptr<f32> out, F32 a, F32 b, I32 n) {
    Tile i = arange(0, N);
    Tile t = load(x + i);
    store(out + i, (t * a) * b);
    store(out + N + i, fma(3.f * (t * a), b, t));
    Tile acc = zeros({N}, DType::f32);
    for_range(0, n, 1, [&](I32) { acc = acc + (t / a) * b; });  // once
    store(out + 2 * N + i, acc);
  });
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> expo(-30, 30);
  auto random_float = [&] { return std::ldexp(mant(rng), expo(rng)) * (rng() % 2 ? 1.f : -1.f); };
  std::vector<float> x(N);
  for (float &v : x) v = random_float();
  const float a = random_float(), b = random_float();
  Buffer bx(N * 4, Backend::Interpreter), bout(3 * N * 4, Backend::Interpreter);
  bx.upload(x);
  bout.fill_bytes(0xff);
  LaunchConfig cfg;
  cfg.backend = Backend::Interpreter;
  kern.launch(Grid{1}, cfg, bx, bout, a, b, 1);
  const std::vector<float> got = bout.download_as<float>(3 * N);
  const double ulp = std::ldexp(1.0, -23);
  for (int k = 0; k < N; ++k) {
    const double t = x[size_t(k)];
    const double want[3] = {t * a * b, 3.0 * t * a * b + t, t / a * b};
    // The fma's sum may cancel: its bound is relative to the product's magnitude.
    const double scale[3] = {std::fabs(want[0]), std::fabs(3.0 * t * a * b) + std::fabs(t), std::fabs(want[2])};
    for (int j = 0; j < 3; ++j) {
      INFO("element " << k << ", form " << j << ": got " << got[size_t(j * N + k)] << ", float64 " << want[j]);
      CHECK(std::fabs(double(got[size_t(j * N + k)]) - want[j]) <= 3 * ulp * scale[j]);
    }
  }
}

TEST_CASE("reassociate_scalar_factors: a product of finite factors that overflows is taken as ±FLT_MAX, so 0 stays 0",
          "[ir][passes]") {
  // (x·a)·b with a·b past FLT_MAX: x = 0 gives 0 as the written order does (0·inf would be NaN), large x still
  // overflows to ±inf, and an infinite factor stays infinite (x = 0 then gives NaN, as written).
  auto kern = Kernel("overflowing_factors", [](Ptr<f32> x, Ptr<f32> out, F32 a, F32 b) {
    Tile i = arange(0, 4);
    store(out + i, (load(x + i) * a) * b);
  });
  // The pass fired: one multiplication per element, by the clamped product.
  const std::string ir = ir::print(kern.function(DevicePtr{}, DevicePtr{}, 1.f, 1.f));
  INFO(ir);
  CHECK(std::regex_search(ir, std::regex(R"(= mul %p0, %p1 : f32|= mul %a, %b : f32|= mul %arg2, %arg3 : f32)")));
  CHECK(count_matches(ir, R"(= mul [^\n]*tensor<4xf32>)") == 1);
  Buffer bx(16, Backend::Interpreter), bout(16, Backend::Interpreter);
  bx.upload(std::vector<float>{0.f, -0.f, 4.f, -4.f});
  LaunchConfig cfg;
  cfg.backend = Backend::Interpreter;
  auto run = [&](float a, float b) {
    bout.fill_bytes(0xff);
    kern.launch(Grid{1}, cfg, bx, bout, a, b);
    return bout.download_as<float>(4);
  };
  std::vector<float> got = run(1e30f, -1e30f);
  CHECK(got[0] == 0.f);
  CHECK(std::signbit(got[0]));  // 0·(−FLT_MAX) = −0, as (0·1e30)·(−1e30)
  CHECK(got[1] == 0.f);
  CHECK(got[2] == -INFINITY);
  CHECK(got[3] == INFINITY);
  got = run(INFINITY, 2.f);
  CHECK(std::isnan(got[0]));
  CHECK(got[2] == INFINITY);
}

TEST_CASE("reassociate_scalar_factors: the product goes after the later scalar, inside the loop where one varies",
          "[ir][passes]") {
  auto fn = trace(
      [&] {
        Ptr<f32> x = param(0), out = param(1);
        F32 a = param(2);
        I32 n = param(3);
        Tile i = arange(0, 64);
        Tile t = load(x + i);
        Tile acc = zeros({64}, DType::f32);
        for_range(0, n, 1, [&](I32 it) {
          Tile b = it.to(DType::f32);  // varies with the iteration
          acc = acc + (t * a) * b + (t * a) * 4.f;
        });
        store(out + i, acc);
      },
      {P(DType::f32), P(DType::f32), S(DType::f32), S(DType::i32)});
  ir::optimize(*fn);
  const std::string ir = ir::print(*fn);
  INFO(ir);
  // a·4 before the loop, a·b in it; per element one multiplication each.
  const size_t loop = ir.find(" = for ");
  REQUIRE(loop != std::string::npos);
  const std::string before = ir.substr(0, loop), body = ir.substr(loop);
  CHECK(std::regex_search(before, std::regex(R"(= mul %p2, %\d+ : f32)")));
  CHECK(std::regex_search(body, std::regex(R"(= mul %p2, %\d+ : f32)")));
  CHECK(tile_ops(body, "mul") == 0);  // tile_ops counts 128-element tiles: none here
  // Each product per element fused with its sum (contract_fma).
  CHECK(count_matches(body, R"(= mul [^\n]*tensor<64xf32>)") == 0);
  CHECK(count_matches(body, R"(= fma [^\n]*tensor<64xf32>)") == 2);
  CHECK_NOTHROW(ir::verify(*fn));
}
