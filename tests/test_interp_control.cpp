// for (carried values, step, zero trips, invalid step) and if (results from the chosen branch).
#include <catch2/catch.hpp>

#include "test_interp_helpers.h"
#include "tilejit/error.h"

using namespace tilejit;
using namespace tilejit::interp_testing;
using K = ir::OpKind;

namespace {

/// Creates a for op with the given bounds and initial carried values; `body(kb, iv, carried)` builds the
/// body and returns the values to yield. Returns the op's results.
template <class Body>
std::vector<ir::Value *> make_for(KernelBuilder &kb, ir::Value *lb, ir::Value *ub, ir::Value *step,
                                  std::vector<ir::Value *> init, Body body) {
  std::vector<ir::Value *> operands{lb, ub, step};
  std::vector<ir::Type> types;
  for (auto *v : init) operands.push_back(v), types.push_back(v->type);
  ir::Op *f = kb.b.create(K::For, operands, types, {}, kb.loc());
  ir::Block *region = f->region(0);
  auto *iv = region->add_arg(lb->type);
  std::vector<ir::Value *> carried;
  for (auto *v : init) carried.push_back(region->add_arg(v->type));
  const ir::Block *outer = kb.b.block();
  const size_t pos = kb.b.position();
  kb.b.set_insertion_point_to_end(region);
  auto yields = body(kb, iv, carried);
  kb.b.create(K::Yield, yields, {}, {}, kb.loc());
  kb.b.set_insertion_point(const_cast<ir::Block *>(outer), pos);
  std::vector<ir::Value *> results;
  for (int i = 0; i < f->num_results(); ++i) results.push_back(f->result(i));
  return results;
}


}  // namespace

TEST_CASE("for: a tile carried through the loop sums blocks of memory", "[interp][control]") {
  Rng rng;
  INFO("seed " << rng.seed);
  constexpr int64_t B = 32, L = 7;
  auto x = rng.floats(B * L);
  auto bx = buf_of(x, DType::f32);
  HostBuf out(B * 4);
  KernelBuilder kb;
  auto *px = kb.param("x", P(DType::f32)), *po = kb.param("out", P(DType::f32));
  auto *nblocks = kb.param("nblocks", s32());
  auto *zero = kb.const_f(0.0, T({B}, DType::f32));
  auto res = make_for(kb, kb.const_i(0, s32()), nblocks, kb.const_i(1, s32()), {zero},
                      [&](KernelBuilder &k, ir::Value *iv, std::vector<ir::Value *> c) -> std::vector<ir::Value *> {
                        auto *base = k.op(K::Mul, {iv, k.const_i(B, s32())}, s32());
                        auto *offs = k.op(K::Add, {k.splat(base, {B}), k.arange(0, B)}, T({B}, DType::i32));
                        auto *blk = k.load(k.ptrs(px, offs));
                        return {k.op(K::Add, {c[0], blk}, T({B}, DType::f32))};
                      });
  kb.store(kb.tile_ptrs(po, {B}), res[0]);
  interp::run(kb.fn, Grid{}, {bx.arg(), out.arg(), int_arg(L)});
  auto got = out.as<float>();
  for (int64_t j = 0; j < B; ++j) {
    float acc = 0;
    for (int64_t i = 0; i < L; ++i) acc += x[size_t(i * B + j)];
    REQUIRE(got[size_t(j)] == acc);
  }
  // Zero trips: the result is the initial value.
  interp::run(kb.fn, Grid{}, {bx.arg(), out.arg(), int_arg(0)});
  for (float v : out.as<float>()) REQUIRE(v == 0.0f);
}

TEST_CASE("for: carried values that swap places, step > 1, nested loops", "[interp][control]") {
  HostBuf out(4 * 4);
  KernelBuilder kb;
  auto *po = kb.param("out", P(DType::i32));
  auto *n = kb.param("n", s32());
  // Fibonacci: (a, b) = (b, a + b), n times — the yield of b into a's slot must not see the new a.
  auto fib = make_for(kb, kb.const_i(0, s32()), n, kb.const_i(1, s32()), {kb.const_i(0, s32()), kb.const_i(1, s32())},
                      [&](KernelBuilder &k, ir::Value *, std::vector<ir::Value *> c) -> std::vector<ir::Value *> {
                        return {c[1], k.op(K::Add, {c[0], c[1]}, s32())};
                      });
  // Sum of iv over range(2, 11, 3) = 2 + 5 + 8.
  auto stepped = make_for(kb, kb.const_i(2, s32()), kb.const_i(11, s32()), kb.const_i(3, s32()), {kb.const_i(0, s32())},
                          [&](KernelBuilder &k, ir::Value *iv, std::vector<ir::Value *> c) -> std::vector<ir::Value *> {
                            return {k.op(K::Add, {c[0], iv}, s32())};
                          });
  // sum_{i < 5} sum_{j < i} j = 0 + 0 + 1 + 3 + 6 = 10.
  auto nested = make_for(
      kb, kb.const_i(0, s32()), kb.const_i(5, s32()), kb.const_i(1, s32()), {kb.const_i(0, s32())},
      [&](KernelBuilder &k, ir::Value *i, std::vector<ir::Value *> c) -> std::vector<ir::Value *> {
        return make_for(k, k.const_i(0, s32()), i, k.const_i(1, s32()), {c[0]},
                        [&](KernelBuilder &k2, ir::Value *j, std::vector<ir::Value *> c2) -> std::vector<ir::Value *> {
                          return {k2.op(K::Add, {c2[0], j}, s32())};
                        });
      });
  kb.store(kb.tile_ptrs(po, {1}, 0), kb.splat(fib[0], {1}));
  kb.store(kb.tile_ptrs(po, {1}, 1), kb.splat(fib[1], {1}));
  kb.store(kb.tile_ptrs(po, {1}, 2), kb.splat(stepped[0], {1}));
  kb.store(kb.tile_ptrs(po, {1}, 3), kb.splat(nested[0], {1}));
  interp::run(kb.fn, Grid{}, {out.arg(), int_arg(10)});
  CHECK(out.as<int32_t>() == std::vector<int32_t>{55, 89, 15, 10});
}

TEST_CASE("for: a non-positive step is an InterpError naming the loop", "[interp][control]") {
  KernelBuilder kb;
  auto *step = kb.param("step", s32());
  kb.line = 40;
  make_for(kb, kb.const_i(0, s32()), kb.const_i(8, s32()), step, {kb.const_i(0, s32())},
           [&](KernelBuilder &, ir::Value *, std::vector<ir::Value *> c) -> std::vector<ir::Value *> { return c; });
  try {
    interp::run(kb.fn, Grid{2, 1, 1}, {int_arg(0)});
    FAIL("expected InterpError");
  } catch (const InterpError &e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("for at kernels/x.cpp:40: the loop step is 0"));
    CHECK_THAT(std::string(e.what()), Catch::Contains("program_id (0, 0, 0)"));
  }
  CHECK_THROWS_AS(interp::run(kb.fn, Grid{}, {int_arg(-1)}), InterpError);
}

TEST_CASE("if: the chosen branch runs and its yields are the results", "[interp][control]") {
  HostBuf out(4 * 4), side(4 * 4);
  KernelBuilder kb;
  auto *po = kb.param("out", P(DType::i32)), *ps = kb.param("side", P(DType::i32));
  auto *pid = kb.program_id(0);
  auto *odd = kb.cmp(ir::CmpPred::eq, kb.op(K::Rem, {pid, kb.const_i(2, s32())}, s32()), kb.const_i(1, s32()));
  auto *ptr_side = kb.op(K::PtrAdd, {ps, pid}, P(DType::i32));
  ir::Op *iff = kb.b.create(K::If, {odd}, {T({2}, DType::i32)}, {}, kb.loc());
  const size_t pos = kb.b.position();
  kb.b.set_insertion_point_to_end(iff->region(0));  // then: pid * 100 + [0, 1]; writes a side effect
  kb.store(ptr_side, kb.const_i(7, s32()));
  kb.b.create(K::Yield, {kb.op(K::Add, {kb.splat(kb.op(K::Mul, {pid, kb.const_i(100, s32())}, s32()), {2}), kb.arange(0, 2)},
                                T({2}, DType::i32))}, {}, {}, kb.loc());
  kb.b.set_insertion_point_to_end(iff->region(1));  // else: -[1, 2]
  kb.b.create(K::Yield, {kb.op(K::Neg, {kb.arange(1, 3)}, T({2}, DType::i32))}, {}, {}, kb.loc());
  kb.b.set_insertion_point(kb.fn.body.get(), pos);
  auto *offs = kb.op(K::Add, {kb.splat(kb.op(K::Mul, {pid, kb.const_i(2, s32())}, s32()), {2}), kb.arange(0, 2)},
                     T({2}, DType::i32));
  kb.store(kb.ptrs(po, offs), iff->result());
  interp::run(kb.fn, Grid{2, 1, 1}, {out.arg(), side.arg()});
  CHECK(out.as<int32_t>() == std::vector<int32_t>{-1, -2, 100, 101});
  CHECK(side.as<int32_t>() == std::vector<int32_t>{0, 7, 0, 0});  // only program 1 took the then branch
}
