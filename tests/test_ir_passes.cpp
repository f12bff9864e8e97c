// Each pass on small functions, checked against the expected printed IR before and after.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>

#include "ir/passes.h"
#include "test_ir_helpers.h"

using namespace tilejit;
using namespace tilejit::ir;
using namespace tilejit::ir::testing;

namespace {
const Type f32s = S(DType::f32), i32s = S(DType::i32), i1s = S(DType::i1);
const Type f64x{{64}, {DType::f32}}, i64x{{64}, {DType::i32}};

/// Stores `v` (a 64-element tile) through out + arange(64) so that it stays live.
void store64(FnBuilder &f, Value *out, Value *v) {
  Value *p = f.op(OpKind::PtrAdd, {f.op(OpKind::Splat, {out}, P({64}, out->type.dtype())), f.arange(0, 64)},
                  P({64}, out->type.dtype()));
  f.b.create(OpKind::Store, {p, v}, {});
}

/// Checks the function's text, then that it still verifies.
#define CHECK_IR(fn, text)      \
  do {                          \
    CHECK(print(fn) == (text)); \
    CHECK_NOTHROW(verify(fn));  \
  } while (0)

}  // namespace

TEST_CASE("fold_constants: integer and float expressions become constants", "[ir][passes]") {
  FnBuilder f("fold");
  Value *out = f.param("out", P({}, DType::f32));
  Value *a = f.ci(i32s, 7), *b = f.ci(i32s, -3);
  Value *s = f.op(OpKind::Mul, {f.op(OpKind::Add, {a, b}, i32s), b}, i32s);           // (7 + -3) * -3 = -12
  Value *sh = f.op(OpKind::Shr, {s, f.ci(i32s, 1)}, i32s);                            // -6
  Value *x = f.op(OpKind::Cast, {sh}, f32s);                                          // -6.0
  Value *y = f.op(OpKind::Div, {x, f.cf(f32s, 4.0)}, f32s);                           // -1.5
  Value *big = f.op(OpKind::Add, {f.ci(S(DType::i8), 100), f.ci(S(DType::i8), 100)}, S(DType::i8));  // wraps: -56
  Value *t = f.op(OpKind::Splat, {f.op(OpKind::Add, {y, f.op(OpKind::Cast, {big}, f32s)}, f32s)}, f64x);  // -57.5
  Value *z = f.op(OpKind::Div, {f.ci(i32s, 1), f.ci(i32s, 0)}, i32s);                 // not folded: a runtime fault
  store64(f, out, f.op(OpKind::Add, {t, f.op(OpKind::Cast, {f.op(OpKind::Splat, {z}, i64x)}, f64x)}, f64x));
  verify(f.fn);
  fold_constants(f.fn);
  CHECK_IR(f.fn, R"(tt.func @fold(%out: ptr<f32>) {
  %0 = constant {value = 7} : i32
  %1 = constant {value = -3} : i32
  %2 = constant {value = 4} : i32
  %3 = constant {value = -12} : i32
  %4 = constant {value = 1} : i32
  %5 = constant {value = -6} : i32
  %6 = constant {value = -6} : f32
  %7 = constant {value = 4} : f32
  %8 = constant {value = -1.5} : f32
  %9 = constant {value = 100} : i8
  %10 = constant {value = 100} : i8
  %11 = constant {value = -56} : i8
  %12 = constant {value = -56} : f32
  %13 = constant {value = -57.5} : f32
  %14 = constant {value = -57.5} : tensor<64xf32>
  %15 = constant {value = 1} : i32
  %16 = constant {value = 0} : i32
  %17 = div %15, %16 : i32
  %18 = splat %17 : tensor<64xi32>
  %19 = cast %18 : tensor<64xi32> -> tensor<64xf32>
  %20 = add %14, %19 : tensor<64xf32>
  %21 = splat %out : tensor<64xptr<f32>>
  %22 = arange {start = 0, end = 64} : tensor<64xi32>
  %23 = ptr_add %21, %22 : tensor<64xptr<f32>>
  store %23, %20 : tensor<64xf32>
}
)");
  dce(f.fn);
  CHECK_IR(f.fn, R"(tt.func @fold(%out: ptr<f32>) {
  %0 = constant {value = -57.5} : tensor<64xf32>
  %1 = constant {value = 1} : i32
  %2 = constant {value = 0} : i32
  %3 = div %1, %2 : i32
  %4 = splat %3 : tensor<64xi32>
  %5 = cast %4 : tensor<64xi32> -> tensor<64xf32>
  %6 = add %0, %5 : tensor<64xf32>
  %7 = splat %out : tensor<64xptr<f32>>
  %8 = arange {start = 0, end = 64} : tensor<64xi32>
  %9 = ptr_add %7, %8 : tensor<64xptr<f32>>
  store %9, %6 : tensor<64xf32>
}
)");
}

TEST_CASE("fold_constants: results are rounded to the dtype, unsafe cases are left alone", "[ir][passes]") {
  auto folded = [](OpKind k, std::vector<std::pair<double, DType>> in, DType rt) -> std::string {
    FnBuilder f;
    std::vector<Value *> ops;
    for (auto [v, d] : in) ops.push_back(is_float(d) ? f.cf(S(d), v) : f.ci(S(d), int64_t(v)));
    Value *r = f.op(k, ops, S(rt));
    fold_constants(f.fn);
    if (r->def->kind != OpKind::Constant) return "not folded";
    return is_float(rt) ? fmt::format("{}", r->def->attrs.fvalue) : fmt::format("{}", r->def->attrs.ivalue);
  };
  // 1 + 2^-8 is not a bf16 (8 significant bits): ties to even → 1; 1 + 3·2^-8 → 1 + 2^-6 (even).
  CHECK(folded(OpKind::Add, {{1.0, DType::bf16}, {0.00390625, DType::bf16}}, DType::bf16) == "1");
  CHECK(folded(OpKind::Add, {{1.0, DType::bf16}, {0.01171875, DType::bf16}}, DType::bf16) == "1.015625");
  CHECK(folded(OpKind::Mul, {{60000.0, DType::f16}, {2.0, DType::f16}}, DType::f16) == "inf");
  CHECK(folded(OpKind::Div, {{1.0, DType::f32}, {3.0, DType::f32}}, DType::f32) == fmt::format("{}", double(1.0f / 3.0f)));
  CHECK(folded(OpKind::Cast, {{3.99, DType::f32}}, DType::i32) == "3");
  CHECK(folded(OpKind::Cast, {{-3.99, DType::f32}}, DType::i8) == "-3");
  CHECK(folded(OpKind::Cast, {{300.0, DType::f32}}, DType::i8) == "not folded");  // out of range
  CHECK(folded(OpKind::Cast, {{300, DType::i32}}, DType::i8) == "44");
  CHECK(folded(OpKind::Cast, {{257, DType::i32}}, DType::bf16) == "256");
  CHECK(folded(OpKind::Shl, {{1, DType::i32}, {32, DType::i32}}, DType::i32) == "not folded");
  CHECK(folded(OpKind::Shl, {{1, DType::i32}, {31, DType::i32}}, DType::i32) == "-2147483648");
  CHECK(folded(OpKind::Rem, {{-7, DType::i32}, {3, DType::i32}}, DType::i32) == "-1");
  CHECK(folded(OpKind::Minimum, {{-0.0, DType::f32}, {0.0, DType::f32}}, DType::f32) == "-0");
  CHECK(folded(OpKind::Maximum, {{-0.0, DType::f32}, {0.0, DType::f32}}, DType::f32) == "0");
  CHECK(folded(OpKind::Minimum, {{std::nan(""), DType::f32}, {0.0, DType::f32}}, DType::f32) == "not folded");
  CHECK(folded(OpKind::Not, {{1, DType::i1}}, DType::i1) == "0");
  CHECK(folded(OpKind::Sqrt, {{2.0, DType::f16}}, DType::f16) == "1.4140625");
}

TEST_CASE("canonicalize: algebraic identities that are exact", "[ir][passes]") {
  FnBuilder f("canon");
  Value *out = f.param("out", P({}, DType::f32));
  Value *n = f.param("n", i32s);
  Value *x = f.op(OpKind::Splat, {f.op(OpKind::Cast, {n}, f32s)}, f64x);
  Value *k = f.op(OpKind::Splat, {n}, i64x);
  Value *pz = f.cf(f64x, 0.0), *nz = f.cf(f64x, -0.0), *one = f.cf(f64x, 1.0);
  Value *a = f.op(OpKind::Add, {x, nz}, f64x);        // → x
  Value *b = f.op(OpKind::Add, {a, pz}, f64x);        // kept: x + (+0) turns -0 into +0
  Value *c = f.op(OpKind::Mul, {one, b}, f64x);       // → b
  Value *d = f.op(OpKind::Sub, {c, pz}, f64x);        // → b
  Value *e = f.op(OpKind::Mul, {d, f.cf(f64x, 0.0)}, f64x);  // kept: float x*0 is not 0 for inf/NaN/-x
  Value *ki = f.op(OpKind::Mul, {k, f.ci(i64x, 0)}, i64x);   // → 0
  Value *kj = f.op(OpKind::Sub, {k, k}, i64x);               // → 0
  Value *kk = f.op(OpKind::Add, {f.op(OpKind::Add, {ki, kj}, i64x), k}, i64x);
  Value *sum = f.op(OpKind::Add, {e, f.op(OpKind::Cast, {kk}, f64x)}, f64x);
  Value *same = f.op(OpKind::Cast, {sum}, f64x);             // → sum
  Value *nn = f.op(OpKind::Neg, {f.op(OpKind::Neg, {same}, f64x)}, f64x);  // → same
  Attrs t; t.ints = {1, 0};
  Value *m = f.op(OpKind::Reshape, {nn}, T({8, 8}, DType::f32));
  Value *tt = f.op(OpKind::Trans, {f.op(OpKind::Trans, {m}, T({8, 8}, DType::f32), t)}, T({8, 8}, DType::f32), t);  // → m
  Value *back = f.op(OpKind::Reshape, {tt}, f64x);
  Value *sel = f.op(OpKind::Select, {f.ci(S(DType::i1), 1), back, x}, f64x);  // only i1 scalar conds here
  (void)sel;
  Value *selv = f.op(OpKind::Select, {f.ci(T({64}, DType::i1), 0), x, back}, f64x);  // → back
  store64(f, out, selv);
  canonicalize(f.fn);
  CHECK_IR(f.fn, R"(tt.func @canon(%out: ptr<f32>, %n: i32) {
  %0 = cast %n : i32 -> f32
  %1 = splat %0 : tensor<64xf32>
  %2 = splat %n : tensor<64xi32>
  %3 = constant {value = 0} : tensor<64xf32>
  %4 = constant {value = -0} : tensor<64xf32>
  %5 = constant {value = 1} : tensor<64xf32>
  %6 = add %1, %3 : tensor<64xf32>
  %7 = constant {value = 0} : tensor<64xf32>
  %8 = mul %6, %7 : tensor<64xf32>
  %9 = constant {value = 0} : tensor<64xi32>
  %10 = constant {value = 0} : tensor<64xi32>
  %11 = constant {value = 0} : tensor<64xi32>
  %12 = cast %2 : tensor<64xi32> -> tensor<64xf32>
  %13 = add %8, %12 : tensor<64xf32>
  %14 = neg %13 : tensor<64xf32>
  %15 = reshape %13 : tensor<8x8xf32>
  %16 = trans %15 {perm = [1, 0]} : tensor<8x8xf32>
  %17 = constant {value = 1} : i1
  %18 = constant {value = 0} : tensor<64xi1>
  %19 = splat %out : tensor<64xptr<f32>>
  %20 = arange {start = 0, end = 64} : tensor<64xi32>
  %21 = ptr_add %19, %20 : tensor<64xptr<f32>>
  store %21, %13 : tensor<64xf32>
}
)");
  // What is left unused (the inner neg, the reshape and trans feeding the removed ops, the constants) is
  // dce's job.
  dce(f.fn);
  CHECK_IR(f.fn, R"(tt.func @canon(%out: ptr<f32>, %n: i32) {
  %0 = cast %n : i32 -> f32
  %1 = splat %0 : tensor<64xf32>
  %2 = splat %n : tensor<64xi32>
  %3 = constant {value = 0} : tensor<64xf32>
  %4 = add %1, %3 : tensor<64xf32>
  %5 = constant {value = 0} : tensor<64xf32>
  %6 = mul %4, %5 : tensor<64xf32>
  %7 = cast %2 : tensor<64xi32> -> tensor<64xf32>
  %8 = add %6, %7 : tensor<64xf32>
  %9 = splat %out : tensor<64xptr<f32>>
  %10 = arange {start = 0, end = 64} : tensor<64xi32>
  %11 = ptr_add %9, %10 : tensor<64xptr<f32>>
  store %11, %8 : tensor<64xf32>
}
)");
}

TEST_CASE("canonicalize: splats, masks, constant branches and empty loops", "[ir][passes]") {
  FnBuilder f("canon2");
  Value *out = f.param("out", P({}, DType::f32));
  Value *x = f.param("x", f32s);
  Value *row = f.op(OpKind::Splat, {x}, T({1, 64}, DType::f32));
  Value *wide = f.op(OpKind::Broadcast, {row}, T({8, 64}, DType::f32));        // → splat %x
  Value *red = f.axis_op(OpKind::Reduce, wide, f64x, 0);
  Value *p = f.op(OpKind::PtrAdd, {f.op(OpKind::Splat, {out}, P({64}, DType::f32)), f.ci(i64x, 0)}, P({64}, DType::f32));  // → the splat
  Value *v = f.op(OpKind::Load, {p, f.ci(T({64}, DType::i1), 1), f.cf(f64x, 2.0)}, f64x);  // mask dropped
  Value *off = f.op(OpKind::Load, {p, f.ci(T({64}, DType::i1), 0), f.cf(f64x, 2.5)}, f64x);  // → 2.5
  Value *t = f.ci(i1s, 1);
  Op *br = f.begin_if(t, {f64x});
  f.yield({f.op(OpKind::Add, {red, v}, f64x)});
  f.else_of(br);
  f.yield({off});
  f.end();
  Value *zero = f.ci(i32s, 0);
  Op *loop = f.begin_for(zero, zero, f.ci(i32s, 1), {br->result(0)});            // runs zero times
  f.yield({f.op(OpKind::Mul, {loop->region(0)->arg(1), off}, f64x)});
  f.end();
  f.b.create(OpKind::Store, {p, loop->result(0), f.ci(T({64}, DType::i1), 0)}, {});  // erased
  f.b.create(OpKind::Store, {p, off, f.ci(T({64}, DType::i1), 1)}, {});              // mask dropped
  canonicalize(f.fn);
  CHECK_IR(f.fn, R"(tt.func @canon2(%out: ptr<f32>, %x: f32) {
  %0 = splat %x : tensor<1x64xf32>
  %1 = splat %x : tensor<8x64xf32>
  %2 = reduce %1 {axis = 0, kind = sum} : tensor<64xf32>
  %3 = splat %out : tensor<64xptr<f32>>
  %4 = constant {value = 0} : tensor<64xi32>
  %5 = constant {value = 1} : tensor<64xi1>
  %6 = constant {value = 2} : tensor<64xf32>
  %7 = load %3 : tensor<64xf32>
  %8 = constant {value = 0} : tensor<64xi1>
  %9 = constant {value = 2.5} : tensor<64xf32>
  %10 = constant {value = 2.5} : tensor<64xf32>
  %11 = constant {value = 1} : i1
  %12 = add %2, %7 : tensor<64xf32>
  %13 = constant {value = 0} : i32
  %14 = constant {value = 1} : i32
  %15 = constant {value = 0} : tensor<64xi1>
  %16 = constant {value = 1} : tensor<64xi1>
  store %3, %10 : tensor<64xf32>
}
)");
  dce(f.fn);
  CHECK_IR(f.fn, R"(tt.func @canon2(%out: ptr<f32>, %x: f32) {
  %0 = splat %out : tensor<64xptr<f32>>
  %1 = constant {value = 2.5} : tensor<64xf32>
  store %0, %1 : tensor<64xf32>
}
)");
}

TEST_CASE("canonicalize: trans of trans composes permutations", "[ir][passes]") {
  FnBuilder f("tt");
  Value *x = f.param("x", f32s);
  Value *a = f.op(OpKind::Exp, {f.op(OpKind::Splat, {x}, T({2, 8, 4}, DType::f32))}, T({2, 8, 4}, DType::f32));
  Attrs p1; p1.ints = {1, 2, 0};
  Attrs p2; p2.ints = {0, 2, 1};
  Value *t1 = f.op(OpKind::Trans, {a}, T({8, 4, 2}, DType::f32), p1);
  Value *t2 = f.op(OpKind::Trans, {t1}, T({8, 2, 4}, DType::f32), p2);
  f.axis_op(OpKind::Reduce, t2, T({2, 4}, DType::f32), 0);
  canonicalize(f.fn);
  dce(f.fn);  // dce removes everything: nothing is stored; check before it instead
  FnBuilder g("tt");
  Value *y = g.param("x", f32s);
  Value *b = g.op(OpKind::Exp, {g.op(OpKind::Splat, {y}, T({2, 8, 4}, DType::f32))}, T({2, 8, 4}, DType::f32));
  Value *u1 = g.op(OpKind::Trans, {b}, T({8, 4, 2}, DType::f32), p1);
  Value *u2 = g.op(OpKind::Trans, {u1}, T({8, 2, 4}, DType::f32), p2);
  g.axis_op(OpKind::Reduce, u2, T({2, 4}, DType::f32), 0);
  canonicalize(g.fn);
  // result dim i = source dim p1[p2[i]]: [1, 0, 2]
  CHECK_IR(g.fn, R"(tt.func @tt(%x: f32) {
  %0 = splat %x : tensor<2x8x4xf32>
  %1 = exp %0 : tensor<2x8x4xf32>
  %2 = trans %1 {perm = [1, 2, 0]} : tensor<8x4x2xf32>
  %3 = trans %1 {perm = [1, 0, 2]} : tensor<8x2x4xf32>
  %4 = reduce %3 {axis = 0, kind = sum} : tensor<2x4xf32>
}
)");
  CHECK(f.fn.body->ops.empty());
}

TEST_CASE("cse: merges identical pure ops in dominating scopes only", "[ir][passes]") {
  FnBuilder f("cse");
  Value *out = f.param("out", P({}, DType::f32));
  Value *n = f.param("n", i32s);
  Value *r1 = f.arange(0, 64), *r2 = f.arange(0, 64);
  Value *s1 = f.op(OpKind::Splat, {out}, P({64}, DType::f32)), *s2 = f.op(OpKind::Splat, {out}, P({64}, DType::f32));
  Value *p1 = f.op(OpKind::PtrAdd, {s1, r1}, P({64}, DType::f32)), *p2 = f.op(OpKind::PtrAdd, {s2, r2}, P({64}, DType::f32));
  Value *l1 = f.op(OpKind::Load, {p1}, f64x), *l2 = f.op(OpKind::Load, {p2}, f64x);  // loads never merge
  Value *c1 = f.cf(f64x, 0.0), *c2 = f.cf(f64x, -0.0);                                // different constants
  Value *c = f.cmp(CmpPred::lt, n, f.ci(i32s, 5));
  Op *br = f.begin_if(c, {f64x});
  Value *inner = f.op(OpKind::Add, {l1, c1}, f64x);
  Value *inner_arange = f.arange(0, 64);  // same as r1, which dominates: merged
  f.yield({f.op(OpKind::Add, {inner, f.op(OpKind::Cast, {inner_arange}, f64x)}, f64x)});
  f.else_of(br);
  f.yield({f.op(OpKind::Add, {l2, c2}, f64x)});
  f.end();
  Value *again = f.op(OpKind::Add, {l1, c1}, f64x);  // same as `inner`, which does not dominate: kept
  f.b.create(OpKind::Store, {p1, f.op(OpKind::Add, {br->result(0), again}, f64x)}, {});
  cse(f.fn);
  CHECK_IR(f.fn, R"(tt.func @cse(%out: ptr<f32>, %n: i32) {
  %0 = arange {start = 0, end = 64} : tensor<64xi32>
  %1 = splat %out : tensor<64xptr<f32>>
  %2 = ptr_add %1, %0 : tensor<64xptr<f32>>
  %3 = load %2 : tensor<64xf32>
  %4 = load %2 : tensor<64xf32>
  %5 = constant {value = 0} : tensor<64xf32>
  %6 = constant {value = -0} : tensor<64xf32>
  %7 = constant {value = 5} : i32
  %8 = cmp %n, %7 {pred = lt} : i1
  %9 = if %8 -> (tensor<64xf32>) {
    %10 = add %3, %5 : tensor<64xf32>
    %11 = cast %0 : tensor<64xi32> -> tensor<64xf32>
    %12 = add %10, %11 : tensor<64xf32>
    yield %12
  } else {
    %13 = add %4, %6 : tensor<64xf32>
    yield %13
  }
  %14 = add %3, %5 : tensor<64xf32>
  %15 = add %9, %14 : tensor<64xf32>
  store %2, %15 : tensor<64xf32>
}
)");
}

TEST_CASE("dce: removes unused ops and loop-carried values, keeps stores", "[ir][passes]") {
  FnBuilder f("dce");
  Value *out = f.param("out", P({}, DType::f32));
  Value *n = f.param("n", i32s);
  Value *zero = f.ci(i32s, 0), *one = f.ci(i32s, 1);
  Value *p = f.op(OpKind::PtrAdd, {f.op(OpKind::Splat, {out}, P({64}, DType::f32)), f.arange(0, 64)}, P({64}, DType::f32));
  Value *acc0 = f.cf(f64x, 0.0), *dead0 = f.cf(f64x, 1.0), *swap0 = f.ci(i32s, 3);
  f.op(OpKind::Exp, {acc0}, f64x);  // unused
  // carried: acc (used after the loop), dead (only feeds itself), a/b (swap each other; b unused after)
  Op *loop = f.begin_for(zero, n, one, {acc0, dead0, swap0, swap0});
  Block *body = loop->region(0);
  Value *v = f.op(OpKind::Load, {p}, f64x);
  Value *acc = f.op(OpKind::Add, {body->arg(1), v}, f64x);
  Value *dead = f.op(OpKind::Mul, {body->arg(2), v}, f64x);
  f.b.create(OpKind::Store, {p, acc}, {});  // a store inside the loop keeps it
  f.yield({acc, dead, body->arg(4), body->arg(3)});
  f.end();
  f.b.create(OpKind::Store, {p, f.op(OpKind::Add, {loop->result(0), f.op(OpKind::Cast, {f.op(OpKind::Splat, {loop->result(2)}, i64x)}, f64x)}, f64x)}, {});
  // a loop without stores whose results are unused disappears entirely
  Op *idle = f.begin_for(zero, n, one, {acc0});
  f.yield({f.op(OpKind::Exp, {idle->region(0)->arg(1)}, f64x)});
  f.end();
  // an if with an unused result loses it
  Op *br = f.begin_if(f.cmp(CmpPred::eq, n, zero), {f64x, i32s});
  f.b.create(OpKind::Store, {p, acc0}, {});
  f.yield({acc0, n});
  f.else_of(br);
  f.yield({dead0, zero});
  f.end();
  f.op(OpKind::Add, {br->result(1), one}, i32s);  // unused: removed, then if result 1 is unused too
  dce(f.fn);
  CHECK_IR(f.fn, R"(tt.func @dce(%out: ptr<f32>, %n: i32) {
  %0 = constant {value = 0} : i32
  %1 = constant {value = 1} : i32
  %2 = splat %out : tensor<64xptr<f32>>
  %3 = arange {start = 0, end = 64} : tensor<64xi32>
  %4 = ptr_add %2, %3 : tensor<64xptr<f32>>
  %5 = constant {value = 0} : tensor<64xf32>
  %6 = constant {value = 3} : i32
  %7:3 = for %8 = %0 to %n step %1 iter_args(%9 = %5, %10 = %6, %11 = %6) -> (tensor<64xf32>, i32, i32) {
    %12 = load %4 : tensor<64xf32>
    %13 = add %9, %12 : tensor<64xf32>
    store %4, %13 : tensor<64xf32>
    yield %13, %11, %10
  }
  %14 = splat %7#1 : tensor<64xi32>
  %15 = cast %14 : tensor<64xi32> -> tensor<64xf32>
  %16 = add %7#0, %15 : tensor<64xf32>
  store %4, %16 : tensor<64xf32>
  %17 = cmp %n, %0 {pred = eq} : i1
  if %17 {
    store %4, %5 : tensor<64xf32>
    yield
  } else {
    yield
  }
}
)");
}

TEST_CASE("op properties come from ops.def: memory writers are never pure", "[ir][passes]") {
  // Every op states its properties; an op that writes memory must never be treated as pure (CSE would merge
  // two of them, DCE would erase an unused one).
  for (int k = 0; k <= int(OpKind::Yield); ++k) {
    OpKind kind = OpKind(k);
    INFO(op_name(kind));
    if (writes_memory(kind) || reads_memory(kind) || op_num_regions(kind) > 0 || kind == OpKind::Yield)
      CHECK_FALSE(is_pure(kind));
    if (is_elementwise(kind)) CHECK(is_pure(kind));
  }
  CHECK(writes_memory(OpKind::Store));
  CHECK(writes_memory(OpKind::AtomicAdd));
  CHECK(reads_memory(OpKind::Load));
  CHECK(is_elementwise(OpKind::Fma));
  CHECK_FALSE(is_elementwise(OpKind::Dot));
  CHECK(is_pure(OpKind::Dot));

  // Two identical atomic adds whose results are unused: CSE merges neither, DCE erases neither.
  FnBuilder f("atomics");
  Value *out = f.param("out", P({}, DType::f32));
  Value *p = f.op(OpKind::PtrAdd, {f.op(OpKind::Splat, {out}, P({64}, DType::f32)), f.arange(0, 64)}, P({64}, DType::f32));
  Value *one = f.cf(f64x, 1.0);
  f.op(OpKind::AtomicAdd, {p, one}, f64x);
  f.op(OpKind::AtomicAdd, {p, one}, f64x);
  optimize(f.fn);
  int atomics = 0;
  walk(*f.fn.body, [&](Op &op) { atomics += op.kind == OpKind::AtomicAdd; });
  CHECK(atomics == 2);
}
