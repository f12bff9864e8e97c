// Tracing of DSL ops: emitted IR ops and types, broadcasting, dtype promotion, and error messages.
#include <catch2/catch.hpp>

#include <string>

#include "ir/passes.h"
#include "test_dsl_helpers.h"

using namespace tilejit;
using namespace tilejit::dsl_testing;
using Catch::Contains;
using ir::OpKind;

namespace {
std::string at(int line) { return "test_dsl_ops.cpp:" + std::to_string(line); }
}  // namespace

TEST_CASE("dsl: the vector-add body traces to the expected ops and types", "[dsl]") {
  Constexpr<int> BLOCK{1024};
  auto fn = trace(
      [&] {
        Ptr<f32> x = param(0), y = param(1), out = param(2);
        I32 n = param(3);
        auto offs = program_id(0) * BLOCK + arange(0, BLOCK);
        auto mask = offs < n;
        store(out + offs, load(x + offs, mask, 0.f) + load(y + offs, mask, 0.f), mask);
        CHECK(offs.shape() == std::vector<int64_t>{1024});
        CHECK(offs.dtype() == DType::i32);
        CHECK(mask.dtype() == DType::i1);
        CHECK((x + offs).is_ptr());
      },
      {P(DType::f32), P(DType::f32), P(DType::f32), S(DType::i32)});
  REQUIRE_NOTHROW(ir::verify(*fn));
  CHECK(count(*fn, OpKind::ProgramId) == 1);
  CHECK(count(*fn, OpKind::Arange) == 1);
  CHECK(count(*fn, OpKind::Cmp) == 1);
  CHECK(count(*fn, OpKind::PtrAdd) == 4);  // three in the body, one in the CHECK
  auto loads = ops_of(*fn, OpKind::Load);
  REQUIRE(loads.size() == 2);
  CHECK(loads[0]->num_operands() == 3);  // ptr, mask, other
  CHECK(loads[0]->result()->type == T({1024}, DType::f32));
  CHECK(loads[0]->operand(2)->def->kind == OpKind::Constant);
  CHECK(loads[0]->operand(2)->type == T({1024}, DType::f32));
  auto stores = ops_of(*fn, OpKind::Store);
  REQUIRE(stores.size() == 1);
  auto &st = *stores[0];
  CHECK(st.num_operands() == 3);
  CHECK(st.operand(1)->def->kind == OpKind::Add);
  // The scalar program_id * BLOCK is splat to the arange's shape before the add.
  CHECK(count(*fn, OpKind::Splat) >= 1);
  // Every op records this file as its location.
  ir::walk(*fn->body, [&](ir::Op &op) { CHECK(std::string(op.loc.file).find("test_dsl_ops.cpp") != std::string::npos); });
}

TEST_CASE("dsl: numpy broadcasting emits expand_dims / broadcast / splat", "[dsl]") {
  trace([] {
    auto a = zeros({64, 1}, DType::f32);
    auto b = zeros({1, 32}, DType::f32);
    auto c = a + b;
    CHECK(c.shape() == std::vector<int64_t>{64, 32});
    auto *add = value_of(c)->def;
    CHECK(add->operand(0)->def->kind == OpKind::Broadcast);
    CHECK(add->operand(1)->def->kind == OpKind::Broadcast);

    auto row = zeros({32}, DType::f32);
    auto d = row + zeros({64, 32}, DType::f32);  // missing leading dim
    CHECK(d.shape() == std::vector<int64_t>{64, 32});
    auto *lhs = value_of(d)->def->operand(0);
    REQUIRE(lhs->def->kind == OpKind::Broadcast);
    CHECK(lhs->def->operand(0)->def->kind == OpKind::ExpandDims);
    CHECK(lhs->def->operand(0)->type.shape == std::vector<int64_t>{1, 32});

    auto s = program_id(0) + zeros({16, 16}, DType::i32);
    CHECK(value_of(s)->def->operand(0)->def->kind == OpKind::Splat);

    auto idx = arange(0, 16);
    auto grid = idx(_, None) * 16 + idx(None, _);
    CHECK(grid.shape() == std::vector<int64_t>{16, 16});
    CHECK(idx(_, None).shape() == std::vector<int64_t>{16, 1});
    CHECK(idx(None, _).shape() == std::vector<int64_t>{1, 16});
    CHECK(zeros({4, 8}, DType::f32)(_, None, _).shape() == std::vector<int64_t>{4, 1, 8});
  });
  // (Bodies are written outside the REQUIRE macros: GCC gives code inside a macro argument the macro's line.)
  const int line = __LINE__ + 1;
  auto bad_broadcast = [] { auto bad = zeros({64, 32}, DType::f32) + zeros({16}, DType::f32); };
  REQUIRE_THROWS_WITH(trace(bad_broadcast),
                      Contains("add: cannot broadcast shapes 64x32 and 16") && Contains(at(line)));
}

TEST_CASE("dsl: dtype promotion follows Triton, literals are weak", "[dsl]") {
  trace([] {
    auto f16t = zeros({16}, DType::f16), bf16t = zeros({16}, DType::bf16), f32t = zeros({16}, DType::f32);
    auto i32t = zeros({16}, DType::i32), i64t = zeros({16}, DType::i64), i1t = zeros({16}, DType::i1);
    CHECK((f16t + bf16t).dtype() == DType::f32);
    CHECK((f16t + f32t).dtype() == DType::f32);
    CHECK((bf16t * f32t).dtype() == DType::f32);
    CHECK((i32t + f16t).dtype() == DType::f16);
    CHECK((i32t + i64t).dtype() == DType::i64);
    CHECK((i1t + i32t).dtype() == DType::i32);
    // Weak literals take the tile's dtype; a float literal with an int tile gives f32.
    CHECK((bf16t * 0.5f).dtype() == DType::bf16);
    CHECK((0.5 * f16t).dtype() == DType::f16);
    CHECK((i32t * 0.5f).dtype() == DType::f32);
    CHECK((f16t + 2).dtype() == DType::f16);
    CHECK((i64t + 1).dtype() == DType::i64);
    CHECK((i32t + 1).dtype() == DType::i32);
    CHECK((i1t + 1).dtype() == DType::i32);
    CHECK((i1t & true).dtype() == DType::i1);
    // bf16 * 0.5f needs no cast: the literal becomes a bf16 constant.
    auto p = bf16t * 0.5f;
    auto *mul = value_of(p)->def;
    CHECK(mul->operand(1)->def->kind == OpKind::Constant);
    CHECK(mul->operand(1)->type == T({16}, DType::bf16));
    CHECK(mul->operand(1)->def->attrs.fvalue == 0.5);
    // Mixed strong dtypes insert a cast.
    auto q = f16t + bf16t;
    CHECK(value_of(q)->def->operand(0)->def->kind == OpKind::Cast);
    // Comparisons give i1 and int division stays int.
    CHECK((f32t < 1).dtype() == DType::i1);
    CHECK((i32t / 3).dtype() == DType::i32);
    CHECK(value_of(i32t / 3)->def->kind == OpKind::Div);
    // Constexpr values act as weak literals.
    Constexpr<int> four{4};
    auto r = f16t * four;
    CHECK(r.dtype() == DType::f16);
    CHECK(value_of(r)->def->operand(1)->def->attrs.fvalue == 4.0);
  });
}

TEST_CASE("dsl: operators emit the matching IR ops", "[dsl]") {
  trace([] {
    auto a = zeros({32}, DType::i32), b = full({32}, 3, DType::i32);
    CHECK(value_of(a - b)->def->kind == OpKind::Sub);
    CHECK(value_of(a % b)->def->kind == OpKind::Rem);
    CHECK(value_of(a & b)->def->kind == OpKind::And);
    CHECK(value_of(a | b)->def->kind == OpKind::Or);
    CHECK(value_of(a ^ b)->def->kind == OpKind::Xor);
    CHECK(value_of(a << b)->def->kind == OpKind::Shl);
    CHECK(value_of(a >> b)->def->kind == OpKind::Shr);
    CHECK(value_of(-a)->def->kind == OpKind::Neg);
    CHECK(value_of(~a)->def->kind == OpKind::Not);
    auto m = a < b;
    CHECK(value_of(!m)->def->kind == OpKind::Not);
    CHECK(value_of(m && (a > 1))->def->kind == OpKind::And);
    CHECK(value_of(m || (a >= 1))->def->kind == OpKind::Or);
    auto ne = a != b;
    CHECK(value_of(ne)->def->attrs.pred == ir::CmpPred::ne);
    CHECK(value_of(a == b)->def->attrs.pred == ir::CmpPred::eq);
    CHECK(value_of(a <= b)->def->attrs.pred == ir::CmpPred::le);
    // !int is int == 0.
    CHECK(value_of(!a)->def->kind == OpKind::Cmp);
    Tile t = a;
    t += 1;
    t *= b;
    CHECK(value_of(t)->def->kind == OpKind::Mul);
  });
}

TEST_CASE("dsl: creation, shape and math ops", "[dsl]") {
  auto fn = trace([] {
    auto r = arange(16, 48);
    CHECK(r.shape() == std::vector<int64_t>{32});
    CHECK(value_of(r)->def->attrs.ints == std::vector<int64_t>{16, 48});
    auto f = full({16, 32}, 2.5, DType::bf16);
    CHECK(value_of(f)->def->kind == OpKind::Constant);
    CHECK(value_of(f)->type == T({16, 32}, DType::bf16));
    CHECK(value_of(zeros_like(f))->type == T({16, 32}, DType::bf16));
    CHECK(value_of(full_like(f, 1.0))->def->attrs.fvalue == 1.0);
    CHECK(value_of(full({4}, 7, DType::i32))->def->attrs.ivalue == 7);
    CHECK(trans(f).shape() == std::vector<int64_t>{32, 16});
    CHECK(value_of(trans(f))->def->attrs.ints == std::vector<int64_t>{1, 0});
    auto g = zeros({2, 4, 8}, DType::f32);
    CHECK(trans(g, {2, 0, 1}).shape() == std::vector<int64_t>{8, 2, 4});
    CHECK(reshape(f, {512}).shape() == std::vector<int64_t>{512});
    CHECK(expand_dims(r, 0).shape() == std::vector<int64_t>{1, 32});
    CHECK(expand_dims(r, -1).shape() == std::vector<int64_t>{32, 1});
    CHECK(broadcast_to(r, {8, 32}).shape() == std::vector<int64_t>{8, 32});
    // Unary math: ints become f32 first (except abs).
    auto e = exp(r);
    CHECK(e.dtype() == DType::f32);
    CHECK(value_of(e)->def->operand(0)->def->kind == OpKind::Cast);
    CHECK(exp2(f).dtype() == DType::bf16);
    CHECK(abs(r).dtype() == DType::i32);
    CHECK(value_of(sigmoid(f))->def->kind == OpKind::Sigmoid);
    CHECK(value_of(rsqrt(f))->def->kind == OpKind::Rsqrt);
    CHECK(value_of(log2(f))->def->kind == OpKind::Log2);
    CHECK(value_of(tanh(f))->def->kind == OpKind::Tanh);
    CHECK(value_of(sqrt(f))->def->kind == OpKind::Sqrt);
    CHECK(value_of(log(f))->def->kind == OpKind::Log);
    CHECK(value_of(fma(f, f, 1.f))->type == T({16, 32}, DType::bf16));
    CHECK(value_of(minimum(r, 3))->def->kind == OpKind::Minimum);
    CHECK(value_of(maximum(f, 0.f))->def->kind == OpKind::Maximum);
    auto w = where(r < 20, r, 0);
    CHECK(value_of(w)->def->kind == OpKind::Select);
    CHECK(w.dtype() == DType::i32);
    CHECK(value_of(where(r(_, None) < 20, 1.f, zeros({32, 8}, DType::bf16)))->type == T({32, 8}, DType::bf16));
    CHECK(cast(f, DType::f32).dtype() == DType::f32);
    auto idx = index_to_f32(r(_, None) - arange(0, 8)(None, _) + program_id(0));
    CHECK(value_of(idx)->type == T({32, 8}, DType::f32));
    CHECK(value_of(idx)->def->kind == OpKind::Cast);
    CHECK(value_of(idx)->def->attrs.flag);  // the index form
    // fma_index: an Fma {split} whose first factor is the index cast at the broadcast shape.
    auto fi = fma_index(r(_, None) - arange(0, 8)(None, _), -0.5f, zeros({32, 8}, DType::f32));
    CHECK(value_of(fi)->type == T({32, 8}, DType::f32));
    CHECK(value_of(fi)->def->kind == OpKind::Fma);
    CHECK(value_of(fi)->def->attrs.flag);
    CHECK(value_of(fi)->def->operand(0)->def->attrs.flag);
    auto fb = fma_index(r(_, None), zeros({1, 8}, DType::bf16), 1.f);  // broadcast, bf16 promoted to f32
    CHECK(value_of(fb)->type == T({32, 8}, DType::f32));
    CHECK(value_of(fb)->def->operand(0)->type == T({32, 8}, DType::f32));
    CHECK(value_of(fma_index(3, f, f))->def->kind == OpKind::Fma);  // a literal index: the plain fma
    CHECK_FALSE(value_of(fma_index(3, f, f))->def->attrs.flag);
    CHECK(f.to(DType::f16).dtype() == DType::f16);
    CHECK(value_of(cdiv(program_id(0), 16))->def->kind == OpKind::Div);
    static_assert(cdiv(1000, 256) == 4);
    CHECK(program_id(2).dtype() == DType::i32);
    CHECK(value_of(num_programs(1))->def->kind == OpKind::NumPrograms);
  });
  REQUIRE_NOTHROW(ir::verify(*fn));
  INFO(ir::print(*fn));
  CHECK(ir::print(*fn).find("{index} : ") != std::string::npos);
  CHECK(ir::print(*fn).find("{split} : ") != std::string::npos);
}

TEST_CASE("dsl: reductions and dot", "[dsl]") {
  auto fn = trace([] {
    auto x = zeros({32, 64}, DType::f16);
    auto s = sum(x, 1);
    CHECK(s.shape() == std::vector<int64_t>{32});
    CHECK(s.dtype() == DType::f16);
    CHECK(value_of(s)->def->attrs.reduce == ir::ReduceKind::sum);
    CHECK(max(x, 0).shape() == std::vector<int64_t>{64});
    CHECK(value_of(min(x, -1))->def->attrs.axis == 1);
    auto am = argmax(x, 1);
    CHECK(am.dtype() == DType::i32);
    CHECK(value_of(am)->def->kind == OpKind::ArgReduce);
    CHECK(value_of(argmin(x, 0))->def->attrs.reduce == ir::ReduceKind::min);
    // Masks are counted in i32.
    CHECK(sum(x > 0.f, 1).dtype() == DType::i32);

    auto a = zeros({64, 32}, DType::bf16), b = zeros({32, 16}, DType::bf16);
    auto d = dot(a, b);
    CHECK(value_of(d)->type == T({64, 16}, DType::f32));
    CHECK(value_of(d)->def->operand(2)->def->kind == OpKind::Constant);
    auto acc = zeros({64, 16}, DType::f32);
    auto d2 = dot(a, b, acc, true);
    CHECK(value_of(d2)->def->operand(2) == value_of(acc));
    CHECK(value_of(d2)->def->attrs.flag);
  });
  REQUIRE_NOTHROW(ir::verify(*fn));
}

TEST_CASE("dsl: memory ops", "[dsl]") {
  auto fn = trace(
      [] {
        Ptr<bf16> p = param(0);
        auto offs = arange(0, 64);
        auto v = load(p + offs);
        CHECK(value_of(v)->type == T({64}, DType::bf16));
        CHECK(value_of(v)->def->num_operands() == 1);
        auto m = offs < 10;
        CHECK(value_of(load(p + offs, m))->def->num_operands() == 2);
        store(p + offs, v, m);
        store(p + offs, 0);  // literal value takes the pointee dtype
        CHECK(last_op(dsl::TraceContext::current()->fn).operand(1)->type == T({64}, DType::bf16));
        store(p, v(None, _) * 2.f);  // the scalar pointer is broadcast to the value's shape [1, 64]
        CHECK(last_op(dsl::TraceContext::current()->fn).operand(0)->type.shape == std::vector<int64_t>{1, 64});
        auto old = atomic_add(p + offs, v, m);
        CHECK(value_of(old)->type == T({64}, DType::bf16));
        // Pointer arithmetic: ptr - int, scalar pointer + tile.
        auto q = (p + 8) - offs;
        CHECK(q.is_ptr());
        CHECK(value_of(q)->def->operand(1)->def->kind == OpKind::Neg);
      },
      {P(DType::bf16)});
  REQUIRE_NOTHROW(ir::verify(*fn));
}

TEST_CASE("dsl: errors name the op, shapes, dtypes and the user's line", "[dsl][errors]") {
  static int line = 0;  // static: one body below sets it from inside
  line = __LINE__ + 1;
  auto inner_differ = [] { dot(zeros({64, 32}, DType::bf16), zeros({64, 64}, DType::bf16)); };
  REQUIRE_THROWS_WITH(trace(inner_differ),
                      Contains("dot: inner dimensions differ: a is 64x32 (bf16), b is 64x64 (bf16)") &&
                          Contains(at(line)));
  line = __LINE__ + 1;
  auto too_small = [] { dot(zeros({8, 32}, DType::f16), zeros({32, 32}, DType::f16)); };
  REQUIRE_THROWS_WITH(trace(too_small),
                      Contains("dot: M, N and K must be at least 16") && Contains(at(line)));
  REQUIRE_THROWS_WITH(trace([] { dot(zeros({32, 32}, DType::f16), zeros({32, 32}, DType::bf16)); }),
                      Contains("dot: operand dtypes differ") && Contains("(f16)") && Contains("(bf16)"));
  REQUIRE_THROWS_WITH(trace([] { dot(zeros({32, 32}, DType::f16), zeros({32, 32}, DType::f16), zeros({32, 32}, DType::f16)); }),
                      Contains("dot: the accumulator must be 32x32 (f32), got 32x32 (f16)"));
  line = __LINE__ + 1;
  auto not_pow2 = [] { arange(0, 48); };
  REQUIRE_THROWS_WITH(trace(not_pow2), Contains("arange") && Contains("48") && Contains("power of two") && Contains(at(line)));
  REQUIRE_THROWS_WITH(trace([] { zeros({16, 3}, DType::f32); }), Contains("full: shape 16x3") && Contains("power of two"));
  REQUIRE_THROWS_WITH(trace([] { index_to_f32(zeros({16}, DType::f32)); }),
                      Contains("index_to_f32") && Contains("i32 tile of positions") && Contains("16 (f32)"));
  REQUIRE_THROWS_WITH(trace([] { index_to_f32(arange(0, 16).to(DType::i64)); }),
                      Contains("index_to_f32") && Contains("i64"));
  REQUIRE_THROWS_WITH(trace([] { index_to_f32(2.5f); }), Contains("index_to_f32") && Contains("f32 literal"));
  REQUIRE_THROWS_WITH(trace([] { index_to_f32(true); }), Contains("index_to_f32") && Contains("i1 literal"));
  REQUIRE_THROWS_WITH(trace([] { index_to_f32(int64_t(1) << 40); }), Contains("index_to_f32") && Contains("i64 literal"));
  REQUIRE_THROWS_WITH(trace([] { fma_index(zeros({16}, DType::f32), 1.f, 0.f); }),
                      Contains("index_to_f32") && Contains("i32 tile of positions"));
  // An index that index_to_f32 would refuse: the error names fma_index (the op the user called), not only
  // index_to_f32 (which fma_index calls), and the user's line.
  line = __LINE__ + 1;
  auto fi_index_f32 = [] { fma_index(zeros({16}, DType::f32), 1.f, 0.f); };
  REQUIRE_THROWS_WITH(trace(fi_index_f32), Contains("fma_index: the index must be an i32 tile") && Contains(at(line)));
  REQUIRE_THROWS_WITH(trace([] { fma_index(Tile(), 1.f, 0.f); }), Contains("fma_index") && Contains("the index is an empty Tile"));
  REQUIRE_THROWS_WITH(trace([] { fma_index(true, 1.f, 0.f); }), Contains("fma_index") && Contains("literal true"));
  REQUIRE_THROWS_WITH(trace([] { fma_index(int64_t(1) << 40, 1.f, 0.f); }), Contains("fma_index") && Contains("i32"));
  REQUIRE_THROWS_WITH(trace([] { fma_index(arange(0, 16) < 3, 1.f, 0.f); }), Contains("fma_index") && Contains("16 (i1)"));
  REQUIRE_THROWS_WITH(trace([] { fma_index(arange(0, 16), arange(0, 16), 0.f); }),
                      Contains("fma_index") && Contains("floats") && Contains("16 (i32)"));
  REQUIRE_THROWS_WITH(trace([] { fma_index(arange(0, 16), 1.f, true); }), Contains("fma_index") && Contains("floats"));
  REQUIRE_THROWS_WITH(trace([] { fma_index(arange(0, 16), 1.f, zeros({16}, DType::f64)); }),
                      Contains("fma_index: computes in f32"));
  line = __LINE__ + 1;
  auto fi_shapes = [] { fma_index(arange(0, 16), 1.f, zeros({32}, DType::f32)); };
  REQUIRE_THROWS_WITH(trace(fi_shapes), Contains("fma_index") && Contains("do not broadcast") && Contains(at(line)));
  REQUIRE_THROWS_WITH(trace([] { reshape(zeros({16, 4}, DType::f32), {32}); }),
                      Contains("reshape: cannot reshape 16x4 (f32) (64 elements) to 32 (32 elements)"));
  REQUIRE_NOTHROW(trace([] { reshape(zeros({16, 4}, DType::f32), {64, 1, 1}); }));
  auto store_mismatch = [] {
    Ptr<bf16> p = param(0);
    line = __LINE__ + 1;
    store(p + arange(0, 16), zeros({16}, DType::f32));
  };
  REQUIRE_THROWS_WITH(trace(store_mismatch, {P(DType::bf16)}),
                      Contains("store: the value is 16 (f32) but the pointer 16 (ptr<bf16>) holds bf16") && Contains("holds bf16") && Contains(at(line)));
  REQUIRE_THROWS_WITH(trace([] {
                        Ptr<f32> p = param(0);
                        load(p + arange(0, 16), {}, 1.f);
                      }, {P(DType::f32)}),
                      Contains("load: 'other'") && Contains("only meaningful with a mask"));
  REQUIRE_THROWS_WITH(trace([] { load(arange(0, 16)); }), Contains("load: the first operand must be a pointer tile") && Contains("16 (i32)"));
  REQUIRE_THROWS_WITH(trace([] {
                        Ptr<f32> p = param(0);
                        auto offs = arange(0, 16);
                        load(p + offs, offs);
                      }, {P(DType::f32)}),
                      Contains("load: the mask must be i1") && Contains("16 (i32)"));
  REQUIRE_THROWS_WITH(trace([] {
                        Ptr<f32> p = param(0);
                        auto bad = p + zeros({16}, DType::f32);
                      }, {P(DType::f32)}),
                      Contains("add: a pointer") && Contains("can only be offset by integers") && Contains("16 (f32)"));
  REQUIRE_THROWS_WITH(trace([] { auto bad = zeros({16}, DType::f32) & zeros({16}, DType::f32); }),
                      Contains("and: needs integer or i1 operands"));
  REQUIRE_THROWS_WITH(trace([] { auto bad = arange(0, 16) && arange(0, 16); }), Contains("logical_and: needs i1 operands"));
  REQUIRE_THROWS_WITH(trace([] { sum(zeros({16}, DType::f32), 1); }), Contains("sum: axis 1 is out of range for a tile of shape 16 (f32)"));
  REQUIRE_THROWS_WITH(trace([] { program_id(3); }), Contains("program_id: axis must be 0, 1 or 2, got 3"));
  REQUIRE_THROWS_WITH(trace([] { arange(0, 16)(None, None); }), Contains("index: a tile of shape 16 (i32) needs 1 '_' indices"));
  REQUIRE_THROWS_WITH(trace([] { trans(zeros({16}, DType::f32)); }), Contains("trans: without a permutation the tile must be 2-D"));
  REQUIRE_THROWS_WITH(trace([] { broadcast_to(zeros({16}, DType::f32), {16, 8}); }), Contains("broadcast_to: cannot broadcast 16 (f32) to shape 16x8"));
  REQUIRE_THROWS_WITH(trace([] { where(arange(0, 16), 1.f, 2.f); }), Contains("where: the condition must be i1"));
  REQUIRE_THROWS_WITH(trace([] { Tile t; exp(t); }), Contains("exp: the operand is an empty Tile"));
  // Outside a trace.
  REQUIRE_THROWS_AS(arange(0, 16), TraceError);
  REQUIRE_THROWS_WITH(program_id(0), Contains("called outside a kernel trace"));
}

TEST_CASE("mul_rn names itself and its operands for integer tiles", "[dsl]") {
  REQUIRE_THROWS_WITH(trace([] { (void)mul_rn(arange(0, 16), arange(0, 16)); }),
                      Contains("mul_rn: needs float operands") && Contains("i32"));
}
