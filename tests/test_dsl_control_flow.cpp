// for_range / if_ tracing: automatic loop-carried values and branch results.
#include <catch2/catch.hpp>

#include <string>

#include "test_dsl_helpers.h"

using namespace tilejit;
using namespace tilejit::dsl_testing;
using Catch::Contains;
using ir::OpKind;

namespace {
std::string at(int line) { return "test_dsl_control_flow.cpp:" + std::to_string(line); }
ir::Op *single(ir::Function &fn, OpKind k) {
  auto ops = ops_of(fn, k);
  REQUIRE(ops.size() == 1);
  return ops[0];
}
ir::Op *terminator(ir::Block *b) {
  REQUIRE(!b->ops.empty());
  return b->ops.back().get();
}
}  // namespace

TEST_CASE("for_range: one carried value", "[dsl][loops]") {
  ir::Value *acc_after = nullptr;
  auto fn = trace(
      [&] {
        I32 n = param(0);
        auto x = arange(0, 16);
        auto acc = zeros({16}, DType::f32);
        for_range(0, n, 2, [&](I32 k) { acc = acc + x * k; });
        acc_after = value_of(acc);
        store(Ptr<f32>(param(1)) + x, acc);
      },
      {S(DType::i32), P(DType::f32)});
  REQUIRE_NOTHROW(ir::verify(*fn));
  ir::Op *loop = single(*fn, OpKind::For);
  CHECK(loop->num_operands() == 4);  // lb, ub, step, init
  CHECK(loop->operand(1) == fn->param(0));
  CHECK(loop->operand(3)->def->kind == OpKind::Constant);
  REQUIRE(loop->num_results() == 1);
  CHECK(loop->result()->type == T({16}, DType::f32));
  CHECK(acc_after == loop->result());
  ir::Block *body = loop->region(0);
  REQUIRE(body->args.size() == 2);
  CHECK(body->arg(0)->type == S(DType::i32));
  CHECK(body->arg(1)->index == 1);
  ir::Op *y = terminator(body);
  CHECK(y->kind == OpKind::Yield);
  REQUIRE(y->num_operands() == 1);
  CHECK(y->operand(0)->def->kind == OpKind::Add);
  CHECK(y->operand(0)->def->operand(0) == body->arg(1));  // reads the carried value
  // x is not carried: the body reads the outer arange directly.
  bool reads_outer_x = false;
  ir::walk(*body, [&](ir::Op &op) {
    for (auto *o : op.operands) reads_outer_x |= o->def && o->def->kind == OpKind::Arange;
  });
  CHECK(reads_outer_x);
}

TEST_CASE("for_range: two carried values and one not", "[dsl][loops]") {
  auto fn = trace([] {
    auto m = full({32}, -1.0, DType::f32);
    auto l = zeros({32}, DType::f32);
    auto c = arange(0, 32);
    Tile ptr_unused = 7;  // a literal handle that is only read: fine
    for_range(0, 8, 1, [&](I32 k) {
      auto s = c.to(DType::f32) + ptr_unused;
      l = l * 0.5f + s;
      m = maximum(m, s);
    });
    CHECK(m.dtype() == DType::f32);
  });
  REQUIRE_NOTHROW(ir::verify(*fn));
  ir::Op *loop = single(*fn, OpKind::For);
  CHECK(loop->num_operands() == 5);
  CHECK(loop->num_results() == 2);
  CHECK(loop->region(0)->args.size() == 3);
  // Inits in handle-creation order: m before l.
  CHECK(loop->operand(3)->def->attrs.fvalue == -1.0);
  CHECK(loop->operand(4)->def->attrs.fvalue == 0.0);
  ir::Op *y = terminator(loop->region(0));
  CHECK(y->operand(0)->def->kind == OpKind::Maximum);
  CHECK(y->operand(1)->def->kind == OpKind::Add);
  for (int i = 0; i < 3; ++i) CHECK(loop->region(0)->arg(i)->index == i);
}

TEST_CASE("for_range: nothing carried", "[dsl][loops]") {
  auto fn = trace(
      [] {
        Ptr<f32> p = param(0);
        auto offs = arange(0, 16);
        for_range(0, 4, 1, [&](I32 k) { store(p + k * 16 + offs, 1.f); });
      },
      {P(DType::f32)});
  REQUIRE_NOTHROW(ir::verify(*fn));
  ir::Op *loop = single(*fn, OpKind::For);
  CHECK(loop->num_operands() == 3);
  CHECK(loop->num_results() == 0);
  CHECK(loop->region(0)->args.size() == 1);
  CHECK(terminator(loop->region(0))->num_operands() == 0);
  // The body's pointer arithmetic reads the function parameter, not a removed block argument.
  auto adds = ops_of(*fn, OpKind::PtrAdd);
  REQUIRE(!adds.empty());
  CHECK(adds[0]->operand(0)->type.is_ptr());
  bool uses_param = false;
  ir::walk(*loop->region(0), [&](ir::Op &op) {
    for (auto *o : op.operands) uses_param |= o == fn->param(0);
  });
  CHECK(uses_param);
}

TEST_CASE("for_range: nested loops carry through both levels", "[dsl][loops]") {
  auto fn = trace([] {
    auto acc = zeros({16, 16}, DType::f32);
    auto a = full({16, 16}, 1.0, DType::f16);
    auto count = full({}, 0, DType::i32);
    for_range(0, 4, 1, [&](I32 i) {
      for_range(0, 3, 1, [&](I32 j) { acc = dot(a, a, acc); });
      count = count + 1;
    });
  });
  REQUIRE_NOTHROW(ir::verify(*fn));
  auto loops = ops_of(*fn, OpKind::For);
  REQUIRE(loops.size() == 2);
  CHECK(loops[0]->num_results() == 2);  // acc, count
  CHECK(loops[1]->num_results() == 1);  // acc
  CHECK(loops[1]->operand(3) == loops[0]->region(0)->arg(1));  // inner init = outer carried acc
  ir::Op *outer_yield = terminator(loops[0]->region(0));
  CHECK(outer_yield->operand(0) == loops[1]->result());
  CHECK(outer_yield->operand(1)->def->kind == OpKind::Add);
}

TEST_CASE("for_range: if_ inside a loop", "[dsl][loops]") {
  auto fn = trace([] {
    auto acc = zeros({16}, DType::f32);
    for_range(0, 10, 1, [&](I32 k) {
      if_(k > 2, [&] { acc = acc * 2.f; });
    });
  });
  REQUIRE_NOTHROW(ir::verify(*fn));
  ir::Op *loop = single(*fn, OpKind::For);
  ir::Op *branch = single(*fn, OpKind::If);
  REQUIRE(branch->num_results() == 1);
  CHECK(terminator(branch->region(0))->operand(0)->def->kind == OpKind::Mul);
  CHECK(terminator(branch->region(1))->operand(0) == loop->region(0)->arg(1));  // else: unchanged
  CHECK(terminator(loop->region(0))->operand(0) == branch->result());
}

TEST_CASE("for_range: bounds, compound assignment and carried pointers", "[dsl][loops]") {
  auto fn = trace(
      [] {
        Ptr<f32> p = param(0);
        I64 n = param(1);
        auto acc = zeros({16}, DType::f32);
        auto offs = arange(0, 16);
        for_range(0, n, 16, [&](I32 k) {
          CHECK(k.dtype() == DType::i64);  // an i64 bound makes the loop i64
          acc += load(p + offs);
          p += 16;
        });
      },
      {P(DType::f32), S(DType::i64)});
  REQUIRE_NOTHROW(ir::verify(*fn));
  ir::Op *loop = single(*fn, OpKind::For);
  CHECK(loop->operand(0)->type == S(DType::i64));
  REQUIRE(loop->num_results() == 2);
  CHECK(loop->result(0)->type == P(DType::f32));  // p was created first
  CHECK(loop->result(1)->type == T({16}, DType::f32));
}

TEST_CASE("for_range: errors", "[dsl][loops][errors]") {
  // (Bodies are written outside the REQUIRE macros: GCC gives code inside a macro argument the macro's line.)
  int line = __LINE__ + 3;
  auto changes_type = [] {
    auto acc = zeros({16}, DType::f32);
    for_range(0, 4, 1, [&](I32) { acc = acc.to(DType::bf16); });
  };
  REQUIRE_THROWS_WITH(trace(changes_type),
                      Contains("for_range: a loop-carried variable changes type") && Contains("16 (f32)") &&
                          Contains("16 (bf16)") && Contains(at(line)));
  line = __LINE__ + 3;
  auto literal_carried = [] {
    Tile m = 0.f;
    for_range(0, 4, 1, [&](I32) { m = maximum(m, arange(0, 16).to(DType::f32)); });
  };
  REQUIRE_THROWS_WITH(trace(literal_carried),
                      Contains("for_range: a variable holding literal 0 before the loop was reassigned") &&
                          Contains(at(line)));
  REQUIRE_THROWS_WITH(trace([] {
                        Tile t;
                        for_range(0, 4, 1, [&](I32 k) { t = k * 2; });
                      }),
                      Contains("for_range: a Tile declared without a value before the loop was assigned inside it"));
  REQUIRE_THROWS_WITH(trace([] { for_range(0, 1.5f, 1, [](I32) {}); }),
                      Contains("for_range: the end must be an integer scalar, got literal 1.5"));
  REQUIRE_THROWS_WITH(trace([] { for_range(0, arange(0, 16), 1, [](I32) {}); }),
                      Contains("for_range: the end must be an integer scalar, got 16 (i32)"));
}

TEST_CASE("if_: branch results", "[dsl][branches]") {
  auto fn = trace(
      [] {
        I32 n = param(0);
        auto x = zeros({16}, DType::f32);
        auto y = full({16}, 2.0, DType::f32);
        auto untouched = arange(0, 16);
        if_(
            n > 0, [&] { x = x + 1.f; },
            [&] {
              x = y * 3.f;
              y = 5.f;  // a literal is materialized as the other branch's type
            });
        CHECK(x.dtype() == DType::f32);
        CHECK(!y.is_literal());
        CHECK(value_of(untouched)->def->kind == OpKind::Arange);
      },
      {S(DType::i32)});
  REQUIRE_NOTHROW(ir::verify(*fn));
  ir::Op *branch = single(*fn, OpKind::If);
  REQUIRE(branch->num_results() == 2);
  ir::Op *ty = terminator(branch->region(0)), *ey = terminator(branch->region(1));
  CHECK(ty->operand(0)->def->kind == OpKind::Add);
  CHECK(ty->operand(1)->def->kind == OpKind::Constant);  // y unchanged in then: the outer full()
  CHECK(ey->operand(0)->def->kind == OpKind::Mul);
  CHECK(ey->operand(1)->def->attrs.fvalue == 5.0);
  CHECK(ey->operand(1)->type == T({16}, DType::f32));

  // No else branch and nothing changed: no results.
  auto fn2 = trace([] { if_(true, [] { arange(0, 16); }); });
  REQUIRE_NOTHROW(ir::verify(*fn2));
  CHECK(single(*fn2, OpKind::If)->num_results() == 0);

  int line = __LINE__ + 3;
  auto branch_types = [] {
    auto x = zeros({16}, DType::f32);
    if_(true, [&] { x = x.to(DType::f16); });
  };
  REQUIRE_THROWS_WITH(trace(branch_types),
                      Contains("if_: a variable gets different types in the two branches: 16 (f16) in then, 16 (f32) in else") &&
                          Contains(at(line)));
  REQUIRE_THROWS_WITH(trace([] { if_(arange(0, 16) > 2, [] {}); }), Contains("if_: the condition must be an i1 scalar, got 16 (i1)"));
}
