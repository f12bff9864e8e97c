// optimize() on random kernels: with FloatRewrites::Exact the optimized kernel computes bit-for-bit what the
// original computes (both run on the CPU interpreter over fresh random inputs), the result verifies, and optimize
// is idempotent (the Fast rewrites' error bounds are tested with each pass).
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "interp/interpreter.h"
#include "ir/passes.h"
#include "test_ir_helpers.h"

using namespace tilejit;
using namespace tilejit::ir;
using namespace tilejit::ir::testing;

namespace {
constexpr int64_t kN = 64;
constexpr int kOutputs = 8;  // tiles stored per kernel
const Type ft{{kN}, {DType::f32}}, it{{kN}, {DType::i32}}, bt{{kN}, {DType::i1}};

/// Builds the same random kernel for the same seed: loads x from `in`, combines tiles with random
/// elementwise, cast, shape, select, loop and branch ops (many with constant or repeated operands, so
/// that every pass has work), and stores kOutputs results to out[0 : kOutputs * kN].
void build_random_kernel(FnBuilder &f, uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](auto &pool) { return pool[std::uniform_int_distribution<size_t>(0, std::size(pool) - 1)(rng)]; };
  auto coin = [&](int percent) { return std::uniform_int_distribution<int>(0, 99)(rng) < percent; };
  Value *in = f.param("in", P({}, DType::f32));
  Value *out = f.param("out", P({}, DType::f32));
  Value *n = f.param("n", S(DType::i32));
  auto ptrs = [&](Value *base, Value *offsets) {
    return f.op(OpKind::PtrAdd, {f.op(OpKind::Splat, {base}, P({kN}, DType::f32)), offsets}, P({kN}, DType::f32));
  };
  Value *r = f.arange(0, kN);
  std::vector<Value *> fs{f.op(OpKind::Load, {ptrs(in, r)}, ft)};
  std::vector<Value *> is{r, f.op(OpKind::Splat, {n}, it)};
  const double fconsts[] = {0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 1e30, 0.1};
  const int64_t iconsts[] = {0, 1, -1, 2, 3, 7, 100000, -5};
  for (int step = 0; step < 40; ++step) {
    if (coin(15)) fs.push_back(f.cf(ft, pick(fconsts)));
    if (coin(15)) is.push_back(f.ci(it, pick(iconsts)));
    switch (std::uniform_int_distribution<int>(0, 9)(rng)) {
      case 0: case 1: {
        static const OpKind k[] = {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Minimum, OpKind::Maximum};
        fs.push_back(f.op(pick(k), {pick(fs), pick(fs)}, ft));
        break;
      }
      case 2: {
        static const OpKind k[] = {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::And, OpKind::Or, OpKind::Xor,
                                   OpKind::Minimum, OpKind::Maximum};
        is.push_back(f.op(pick(k), {pick(is), pick(is)}, it));
        break;
      }
      case 3: {
        Value *amount = f.ci(it, std::uniform_int_distribution<int>(0, 3)(rng));
        is.push_back(f.op(coin(50) ? OpKind::Shl : OpKind::Shr, {pick(is), amount}, it));
        break;
      }
      case 4: {
        static const OpKind k[] = {OpKind::Neg, OpKind::Abs, OpKind::Exp2, OpKind::Tanh, OpKind::Sqrt};
        fs.push_back(f.op(pick(k), {pick(fs)}, ft));
        break;
      }
      case 5:  // casts: int → float, float → bf16 → float, float → float
        if (coin(50)) fs.push_back(f.op(OpKind::Cast, {pick(is)}, ft));
        else fs.push_back(f.op(OpKind::Cast, {f.op(OpKind::Cast, {pick(fs)}, Type{{kN}, {DType::bf16}})}, ft));
        if (coin(30)) fs.push_back(f.op(OpKind::Cast, {fs.back()}, ft));
        break;
      case 6: {  // select on a comparison (or a constant mask)
        Attrs a; a.pred = CmpPred(std::uniform_int_distribution<int>(0, 5)(rng));
        Value *cond = coin(30) ? f.ci(bt, coin(50)) : f.op(OpKind::Cmp, {pick(is), pick(is)}, bt, a);
        fs.push_back(f.op(OpKind::Select, {cond, pick(fs), pick(fs)}, ft));
        break;
      }
      case 7: {  // shape round trip: expand_dims, broadcast, trans, reduce back to [kN]
        Value *x = pick(fs);
        Value *col = f.axis_op(OpKind::ExpandDims, x, Type{{kN, 1}, {DType::f32}}, 1);
        Value *wide = f.op(OpKind::Broadcast, {col}, Type{{kN, 4}, {DType::f32}});
        Attrs t; t.ints = {1, 0};
        Value *tr = f.op(OpKind::Trans, {f.op(OpKind::Trans, {wide}, Type{{4, kN}, {DType::f32}}, t)}, Type{{kN, 4}, {DType::f32}}, t);
        Attrs red; red.axis = 1; red.reduce = coin(50) ? ReduceKind::max : ReduceKind::sum;
        fs.push_back(f.op(OpKind::Reduce, {tr}, ft, red));
        break;
      }
      case 8: {  // a loop carrying a live and a dead value, with constant or dynamic bounds
        Value *lb = f.ci(S(DType::i32), 0);
        Value *ub = coin(50) ? f.ci(S(DType::i32), std::uniform_int_distribution<int>(0, 3)(rng)) : n;
        Value *x = pick(fs), *y = pick(fs);
        Op *loop = f.begin_for(lb, ub, f.ci(S(DType::i32), 1), {x, y});
        Block *body = loop->region(0);
        Value *ivf = f.op(OpKind::Cast, {f.op(OpKind::Splat, {body->arg(0)}, it)}, ft);
        Value *next = f.op(OpKind::Add, {f.op(OpKind::Mul, {body->arg(1), f.cf(ft, 0.5)}, ft), ivf}, ft);
        Value *dead = f.op(OpKind::Sub, {body->arg(2), next}, ft);
        Value *dup = f.op(OpKind::Mul, {body->arg(1), f.cf(ft, 0.5)}, ft);  // CSE fodder
        f.yield({f.op(OpKind::Add, {next, f.op(OpKind::Sub, {dup, dup}, ft)}, ft), dead});
        f.end();
        fs.push_back(loop->result(0));
        break;
      }
      case 9: {  // a branch on a constant or dynamic condition
        Attrs a; a.pred = CmpPred::lt;
        Value *cond = coin(50) ? f.ci(S(DType::i1), coin(50)) : f.op(OpKind::Cmp, {n, f.ci(S(DType::i32), 40)}, S(DType::i1), a);
        Value *x = pick(fs), *y = pick(fs);
        Op *br = f.begin_if(cond, {ft});
        f.yield({f.op(OpKind::Add, {x, y}, ft)});
        f.else_of(br);
        f.yield({f.op(OpKind::Mul, {x, f.cf(ft, 1.0)}, ft)});
        f.end();
        fs.push_back(br->result(0));
        break;
      }
    }
  }
  for (int k = 0; k < kOutputs; ++k) {
    Value *v = k == 0 ? fs.back() : k == 1 ? f.op(OpKind::Cast, {is.back()}, ft) : pick(fs);
    Value *offs = f.op(OpKind::Add, {r, f.ci(it, k * kN)}, it);
    f.b.create(OpKind::Store, {ptrs(out, offs), v}, {});
  }
}

std::vector<float> run_kernel(const Function &fn, const std::vector<float> &input, int32_t n) {
  std::vector<float> out(kOutputs * kN, 12345.0f);
  KernelArg a{KernelArg::Kind::Ptr, uint64_t(reinterpret_cast<uintptr_t>(input.data())), 0, 0, input.size() * 4};
  KernelArg b{KernelArg::Kind::Ptr, uint64_t(reinterpret_cast<uintptr_t>(out.data())), 0, 0, out.size() * 4};
  KernelArg c{KernelArg::Kind::Int, 0, n, 0, 0};
  interp::run(fn, Grid{}, {a, b, c});
  return out;
}

bool same_float(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}
}  // namespace

TEST_CASE("optimize: random kernels compute the same values, verify, and optimize is idempotent", "[ir][passes][optimize]") {
  std::mt19937 rng(20240611);
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  int shrunk = 0;
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    FnBuilder original("random"), optimized("random");
    build_random_kernel(original, seed);
    build_random_kernel(optimized, seed);
    REQUIRE(print(original.fn) == print(optimized.fn));
    REQUIRE_NOTHROW(verify(original.fn));
    optimize(optimized.fn, FloatRewrites::Exact);
    std::string once = print(optimized.fn);
    optimize(optimized.fn, FloatRewrites::Exact);
    INFO("seed " << seed << "\n" << print(original.fn) << "\noptimized:\n" << once);
    CHECK(print(optimized.fn) == once);
    shrunk += once.size() < print(original.fn).size();
    // The Fast rewrites on the same kernel: the result verifies and a second run changes nothing (their values are
    // checked against float64 with each pass's own tests).
    FnBuilder fast("random");
    build_random_kernel(fast, seed);
    REQUIRE_NOTHROW(optimize(fast.fn));
    std::string fast_once = print(fast.fn);
    optimize(fast.fn);
    CHECK(print(fast.fn) == fast_once);

    std::vector<float> input(kN);
    // Mostly ordinary values, plus the ones that make unsound identities visible (x + 0 on -0, x * 0 on inf).
    const float special[] = {-0.0f, 0.0f, INFINITY, -INFINITY, NAN, 3e38f, 1e-45f};
    for (float &x : input) x = std::uniform_int_distribution<int>(0, 9)(rng) == 0 ? special[rng() % 7] : value(rng);
    for (int32_t n : {3, 50}) {
      auto want = run_kernel(original.fn, input, n), got = run_kernel(optimized.fn, input, n);
      int mismatches = 0;
      for (size_t k = 0; k < want.size(); ++k) mismatches += !same_float(want[k], got[k]);
      CHECK(mismatches == 0);
    }
  }
  CHECK(shrunk == 60);
}
