// hoist_invariant_loads: loads that do not change across a loop's iterations move in front of it (with the
// ops computing their address), guarded so a loop that runs zero times still reads nothing; loops that
// write memory keep their loads.
#include <cmath>
#include <catch2/catch.hpp>

#include "ir/passes.h"
#include "test_dsl_helpers.h"
#include "test_interp_helpers.h"
#include "tilejit/buffer.h"
#include "tilejit/error.h"
#include "tilejit/kernel.h"

using namespace tilejit;
using ir::OpKind;

namespace {
bool inside_loop(const ir::Op *op) {
  for (const ir::Block *b = op->parent; b; b = b->parent ? b->parent->parent : nullptr)
    if (b->parent && b->parent->kind == OpKind::For) return true;
  return false;
}
std::vector<ir::Op *> loads(ir::Function &fn) { return dsl_testing::ops_of(fn, OpKind::Load); }
}  // namespace

TEST_CASE("hoist_invariant_loads: a loop-invariant load and its address move out, masked by lb < ub",
          "[ir][passes][hoist]") {
  using dsl_testing::P;
  using dsl_testing::S;
  auto fn = dsl_testing::trace(
      [] {
        Ptr<f32> x(dsl_testing::param(0)), scale(dsl_testing::param(1)), out(dsl_testing::param(2));
        I32 h = dsl_testing::param(3), n = dsl_testing::param(4);
        Tile r = arange(0, 16);
        Tile acc = zeros({16}, DType::f32);
        for_range(0, n, 16, [&](I32 k) {
          Tile s = load(scale + h * 2);           // invariant: moves out, with h * 2 and the pointer add
          Tile v = load(x + k + r, k + r < n, 0.f);  // depends on k: stays
          acc = acc + v * s;
        });
        store(out + r, acc);
      },
      {P(DType::f32), P(DType::f32), P(DType::f32), S(DType::i32), S(DType::i32)});
  ir::optimize(*fn);
  auto ls = loads(*fn);
  REQUIRE(ls.size() == 2);
  ir::Op *hoisted = ls[0]->result()->type.is_scalar() ? ls[0] : ls[1];
  ir::Op *stays = hoisted == ls[0] ? ls[1] : ls[0];
  CHECK_FALSE(inside_loop(hoisted));
  CHECK(inside_loop(stays));
  REQUIRE(hoisted->num_operands() == 2);  // (ptr, mask)
  ir::Op *guard = hoisted->operand(1)->def;
  REQUIRE(guard != nullptr);
  CHECK(guard->kind == OpKind::Cmp);
  CHECK(guard->attrs.pred == ir::CmpPred::lt);
  CHECK(guard->operand(1) == fn->param(4));  // the loop's upper bound
  CHECK_FALSE(inside_loop(hoisted->operand(0)->def));  // the address computation moved too
}

TEST_CASE("hoist_invariant_loads: a loop that stores keeps its loads, a masked load keeps its mask",
          "[ir][passes][hoist]") {
  using dsl_testing::P;
  using dsl_testing::S;
  SECTION("store in the loop") {
    auto fn = dsl_testing::trace(
        [] {
          Ptr<f32> p(dsl_testing::param(0));
          I32 n = dsl_testing::param(1);
          for_range(0, n, 1, [&](I32 k) { store(p + k + 1, load(p)); });  // p[0] could be rewritten
        },
        {P(DType::f32), S(DType::i32)});
    ir::optimize(*fn);
    auto ls = loads(*fn);
    REQUIRE(ls.size() == 1);
    CHECK(inside_loop(ls[0]));
  }
  SECTION("masked invariant load") {
    auto fn = dsl_testing::trace(
        [] {
          Ptr<f32> p(dsl_testing::param(0)), out(dsl_testing::param(1));
          I32 n = dsl_testing::param(2), m = dsl_testing::param(3);
          Tile r = arange(0, 8);
          Tile acc = zeros({8}, DType::f32);
          for_range(0, n, 1, [&](I32) { acc = acc + load(p + r, r < m, 1.f); });
          store(out + r, acc);
        },
        {P(DType::f32), P(DType::f32), S(DType::i32), S(DType::i32)});
    ir::optimize(*fn);
    auto ls = loads(*fn);
    REQUIRE(ls.size() == 1);
    CHECK_FALSE(inside_loop(ls[0]));
    REQUIRE(ls[0]->num_operands() == 3);  // other kept
    ir::Op *both = ls[0]->operand(1)->def;
    REQUIRE(both != nullptr);
    CHECK(both->kind == OpKind::And);
  }
}

TEST_CASE("hoist_invariant_loads on the interpreter: same results, a loop that runs zero times reads nothing",
          "[ir][passes][hoist][interp]") {
  interp_testing::Rng rng;
  INFO("seed " << rng.seed);
  const LaunchConfig interp{.backend = Backend::Interpreter};
  auto k = Kernel("scaled_sum", [](Ptr<f32> x, Ptr<f32> scale, Ptr<f32> out, I32 h, I32 n) {
    Tile r = arange(0, 16);
    Tile acc = zeros({16}, DType::f32);
    for_range(0, n, 16, [&](I32 k0) {
      Tile s = load(scale + h);  // past scale's end when n == 0 and h is out of range: must not be read
      acc = acc + load(x + k0 + r, k0 + r < n, 0.f) * s;
    });
    store(out + r, acc);
  });
  constexpr int n = 40;
  auto xs = rng.floats(n);
  auto scales = rng.floats(4);
  Buffer bx(n * 4, Backend::Interpreter), bs(4 * 4, Backend::Interpreter), out(16 * 4, Backend::Interpreter);
  bx.upload(xs);
  bs.upload(scales);
  out.fill_bytes(0xff);
  k.launch(Grid{1}, interp, bx, bs, out, 3, n);
  auto got = out.download_as<float>(16);
  for (int i = 0; i < 16; ++i) {
    float acc = 0;
    for (int k0 = 0; k0 < n; k0 += 16)
      if (k0 + i < n) {
        acc = std::fma(xs[size_t(k0 + i)], scales[3], acc);  // the sum of a product: one fma (ir contract_fma)
      }
    INFO("lane " << i);
    CHECK(got[size_t(i)] == acc);
  }
  out.fill_bytes(0xff);
  REQUIRE_NOTHROW(k.launch(Grid{1}, interp, bx, bs, out, 1000, 0));  // scale[1000] is out of range
  for (float v : out.download_as<float>(16)) CHECK(v == 0.f);
  // The guard only lifts the read when the loop does not run: with iterations, the bad index faults.
  CHECK_THROWS_AS(k.launch(Grid{1}, interp, bx, bs, out, 1000, n), Error);
}

TEST_CASE("hoist_invariant_loads: an integer division or remainder by a runtime value stays in the loop",
          "[ir][passes][hoist][interp]") {
  const LaunchConfig interp{.backend = Backend::Interpreter};
  // x[m / n] and x[m % n] are loop-invariant, but n = 0 makes the loop run zero times: hoisted, the division
  // would fault where the original never divided.
  auto k = Kernel("div_in_loop", [](Ptr<f32> x, Ptr<f32> out, I32 m, I32 n) {
    Tile acc = zeros({}, DType::f32);
    for_range(0, n, 1, [&](I32) { acc = acc + load(x + m / n) + load(x + m % n); });
    store(out, acc);
  });
  Buffer x(64 * 4, Backend::Interpreter), out(4, Backend::Interpreter);
  std::vector<float> xs(64);
  for (int i = 0; i < 64; ++i) xs[size_t(i)] = float(i);
  x.upload(xs);
  k.launch(Grid{1}, interp, x, out, 11, 4);  // 4 · (x[2] + x[3])
  CHECK(out.download_as<float>(1)[0] == 20.f);
  REQUIRE_NOTHROW(k.launch(Grid{1}, interp, x, out, 11, 0));
  CHECK(out.download_as<float>(1)[0] == 0.f);
  // A nonzero constant divisor is safe and does move out.
  auto fn = dsl_testing::trace(
      [] {
        Ptr<f32> p(dsl_testing::param(0)), o(dsl_testing::param(1));
        I32 m = dsl_testing::param(2), n = dsl_testing::param(3);
        Tile acc = zeros({}, DType::f32);
        for_range(0, n, 1, [&](I32) { acc = acc + load(p + m / 3); });
        store(o, acc);
      },
      {dsl_testing::P(DType::f32), dsl_testing::P(DType::f32), dsl_testing::S(DType::i32), dsl_testing::S(DType::i32)});
  ir::optimize(*fn);
  auto ls = loads(*fn);
  REQUIRE(ls.size() == 1);
  CHECK_FALSE(inside_loop(ls[0]));
}
