// The verifier accepts well-formed IR and rejects each kind of broken invariant with a message that says
// what is wrong, prints the op and names its source line.
#include <catch2/catch.hpp>

#include "ir/passes.h"
#include "test_ir_helpers.h"
#include "tilejit/error.h"

using namespace tilejit;
using namespace tilejit::ir;
using namespace tilejit::ir::testing;

namespace {
const SourceLoc kLoc{"user_kernel.cpp", 42, 7};

/// The VerifyError message for fn, or "" when it verifies.
std::string verify_message(const Function &fn) {
  try {
    verify(fn);
  } catch (const VerifyError &e) {
    return e.what();
  }
  return "";
}

#define CHECK_VERIFY_FAILS(fn, ...)                              \
  do {                                                           \
    std::string msg_ = verify_message(fn);                       \
    INFO(msg_);                                                  \
    REQUIRE(!msg_.empty());                                      \
    for (const char *part_ : {__VA_ARGS__}) CHECK_THAT(msg_, Catch::Contains(part_)); \
  } while (0)

const Type f64x{{64}, {DType::f32}};
const Type i64x{{64}, {DType::i32}};
const Type b64x{{64}, {DType::i1}};
}  // namespace

TEST_CASE("verify: accepts well-formed IR", "[ir][verifier]") {
  FnBuilder f;
  Value *x = f.param("x", P({}, DType::f32), true);
  Value *n = f.param("n", S(DType::i32));
  Value *r = f.arange(0, 64);
  Value *p = f.op(OpKind::PtrAdd, {f.op(OpKind::Splat, {x}, P({64}, DType::f32)), r}, P({64}, DType::f32));
  Value *m = f.cmp(CmpPred::lt, r, f.op(OpKind::Splat, {n}, i64x));
  Value *v = f.op(OpKind::Load, {p, m, f.cf(f64x, 0.0)}, f64x);
  Value *a = f.op(OpKind::Reshape, {v}, T({8, 8}, DType::f32));
  Value *d = f.op(OpKind::Dot, {f.op(OpKind::Cast, {a}, T({8, 8}, DType::bf16)), f.op(OpKind::Cast, {a}, T({8, 8}, DType::bf16)),
                                f.cf(T({8, 8}, DType::f32), 0.0)},
                  T({8, 8}, DType::f32));
  Attrs perm; perm.ints = {1, 0};
  Value *t = f.op(OpKind::Trans, {d}, T({8, 8}, DType::f32), perm);
  Attrs red; red.axis = 1; red.reduce = ReduceKind::max;
  f.op(OpKind::Reduce, {t}, T({8}, DType::f32), red);
  f.op(OpKind::ArgReduce, {t}, T({8}, DType::i32), red);
  f.b.create(OpKind::Store, {p, v, m}, {});
  CHECK(verify_message(f.fn) == "");
}

TEST_CASE("verify: operand and region counts", "[ir][verifier]") {
  FnBuilder f;
  Value *x = f.param("x", S(DType::f32));
  f.op(OpKind::Add, {x}, S(DType::f32), {}, kLoc);
  CHECK_VERIFY_FAILS(f.fn, "'add' takes 2 operand(s), not 1", "`%0 = add %x : f32`", "user_kernel.cpp:42");

  FnBuilder g;
  Value *y = g.param("y", S(DType::f32));
  Op *op = g.b.create(OpKind::Exp, {y}, {S(DType::f32)}, {}, kLoc);
  op->regions.push_back(std::make_unique<Block>());
  op->regions.back()->parent = op;
  CHECK_VERIFY_FAILS(g.fn, "'exp' must have 0 region(s), not 1");
}

TEST_CASE("verify: elementwise operand types", "[ir][verifier]") {
  FnBuilder f;
  Value *a = f.param("a", S(DType::f32));
  Value *b = f.param("b", S(DType::f16));
  f.op(OpKind::Mul, {a, b}, S(DType::f32), {}, kLoc);
  CHECK_VERIFY_FAILS(f.fn, "'mul' operand types differ: f32 vs f16", "%0 = mul %a, %b : f32", "user_kernel.cpp:42");

  FnBuilder g;
  Value *c = g.param("c", S(DType::i32));
  g.op(OpKind::Add, {g.op(OpKind::Splat, {c}, i64x), g.op(OpKind::Splat, {c}, T({32}, DType::i32))}, i64x);
  CHECK_VERIFY_FAILS(g.fn, "'add' operand types differ: tensor<64xi32> vs tensor<32xi32>");

  FnBuilder h;
  Value *e = h.param("e", S(DType::i32));
  h.op(OpKind::Exp, {e}, S(DType::i32));
  CHECK_VERIFY_FAILS(h.fn, "'exp' needs a float tile, not i32");

  FnBuilder k;
  Value *fl = k.param("fl", S(DType::f32));
  k.op(OpKind::Xor, {fl, fl}, S(DType::f32));
  CHECK_VERIFY_FAILS(k.fn, "'xor' needs an integer tile, not f32");
}

TEST_CASE("verify: cmp, select, ptr_add", "[ir][verifier]") {
  FnBuilder f;
  Value *a = f.param("a", S(DType::f32));
  f.op(OpKind::Cmp, {a, a}, S(DType::f32));
  CHECK_VERIFY_FAILS(f.fn, "'cmp' must produce i1 of shape scalar, not f32");

  FnBuilder g;
  Value *c = g.param("c", S(DType::i32));
  g.op(OpKind::Select, {c, c, c}, S(DType::i32));
  CHECK_VERIFY_FAILS(g.fn, "'select' condition must be i1 of shape scalar, not i32");

  FnBuilder h;
  Value *p = h.param("p", S(DType::i64));
  h.op(OpKind::PtrAdd, {p, p}, S(DType::i64));
  CHECK_VERIFY_FAILS(h.fn, "'ptr_add' operand 0 must be a pointer tile, not i64");

  FnBuilder k;
  Value *q = k.param("q", P({}, DType::f32));
  Value *fo = k.param("fo", S(DType::f32));
  k.op(OpKind::PtrAdd, {q, fo}, P({}, DType::f32));
  CHECK_VERIFY_FAILS(k.fn, "'ptr_add' needs an integer tile, not f32");

  FnBuilder m;  // the index form of a cast converts i32 to f32 only
  Attrs index;
  index.flag = true;
  m.op(OpKind::Cast, {m.param("i", S(DType::i64))}, S(DType::f32), index);
  CHECK_VERIFY_FAILS(m.fn, "'cast' {index} converts i32 to f32, not i64 to f32");

  // fma {split} (fma_index) splits its first factor, which must be an index cast.
  for (bool cast_first : {true, false}) {
    FnBuilder n;
    Value *i = n.op(OpKind::Cast, {n.param("i", S(DType::i32))}, S(DType::f32), cast_first ? index : Attrs{});
    Value *x = n.param("x", S(DType::f32));
    Attrs split;
    split.flag = true;
    n.op(OpKind::Fma, {i, x, x}, S(DType::f32), split);
    if (cast_first) {
      CHECK_NOTHROW(verify(n.fn));
    } else {
      CHECK_VERIFY_FAILS(n.fn, "'fma' {split} needs an index cast ('cast' {index}) as its first operand");
    }
  }
}

TEST_CASE("verify: load and store", "[ir][verifier]") {
  auto base = [](FnBuilder &f) {
    Value *x = f.param("x", P({}, DType::f32));
    return f.op(OpKind::PtrAdd, {f.op(OpKind::Splat, {x}, P({64}, DType::f32)), f.arange(0, 64)}, P({64}, DType::f32));
  };
  {
    FnBuilder f;
    Value *p = base(f);
    f.op(OpKind::Load, {p}, T({64}, DType::f16));
    CHECK_VERIFY_FAILS(f.fn, "'load' of tensor<64xptr<f32>> must produce tensor<64xf32>, not tensor<64xf16>");
  }
  {
    FnBuilder f;
    Value *p = base(f);
    Value *mask = f.cmp(CmpPred::lt, f.arange(0, 32), f.arange(0, 32));
    f.op(OpKind::Load, {p, mask}, f64x);
    CHECK_VERIFY_FAILS(f.fn, "'load' mask must be i1 of shape 64, not tensor<32xi1>");
  }
  {
    FnBuilder f;
    Value *p = base(f);
    Value *r = f.arange(0, 64);
    f.op(OpKind::Load, {r}, i64x);
    CHECK_VERIFY_FAILS(f.fn, "'load' operand 0 must be a pointer tile, not tensor<64xi32>");
    (void)p;
  }
  {
    FnBuilder f;
    Value *p = base(f);
    f.b.create(OpKind::Store, {p, f.cf(T({64}, DType::bf16), 1.0)}, {}, {}, kLoc);
    CHECK_VERIFY_FAILS(f.fn, "'store' through tensor<64xptr<f32>> needs a value of type tensor<64xf32>, not tensor<64xbf16>",
                       "user_kernel.cpp:42");
  }
  {
    FnBuilder f;
    Value *p = base(f);
    f.b.create(OpKind::Store, {p, f.cf(f64x, 1.0), f.cf(f64x, 1.0)}, {});
    CHECK_VERIFY_FAILS(f.fn, "'store' mask must be i1 of shape 64, not tensor<64xf32>");
  }
}

TEST_CASE("verify: reductions, dot and shape ops", "[ir][verifier]") {
  auto tile = [](FnBuilder &f, std::vector<int64_t> shape, DType d = DType::f32) {
    Value *s = f.param("s", S(d));
    return f.op(OpKind::Splat, {s}, T(std::move(shape), d));
  };
  {
    FnBuilder f;
    Value *t = tile(f, {4, 8});
    Attrs a; a.axis = 2;
    f.op(OpKind::Reduce, {t}, T({4}, DType::f32), a);
    CHECK_VERIFY_FAILS(f.fn, "'reduce' axis 2 is out of range for a tensor<4x8xf32> tile");
  }
  {
    FnBuilder f;
    Value *t = tile(f, {4, 8});
    Attrs a; a.axis = 0;
    f.op(OpKind::Reduce, {t}, T({4}, DType::f32), a);
    CHECK_VERIFY_FAILS(f.fn, "'reduce' result shape must be 8, not 4");
  }
  {
    FnBuilder f;
    Value *t = tile(f, {4, 8});
    Attrs a; a.axis = 1; a.reduce = ReduceKind::max;
    f.op(OpKind::ArgReduce, {t}, T({4}, DType::i64), a);
    CHECK_VERIFY_FAILS(f.fn, "'arg_reduce' must produce i32 indices, not tensor<4xi64>");
  }
  {
    FnBuilder f;
    Value *a = tile(f, {16, 32}, DType::bf16);
    f.op(OpKind::Dot, {a, a, f.cf(T({16, 16}, DType::f32), 0.0)}, T({16, 16}, DType::f32));
    CHECK_VERIFY_FAILS(f.fn, "'dot' shapes do not match [M,K] x [K,N] + [M,N]: tensor<16x32xbf16> x tensor<16x32xbf16>");
  }
  {
    FnBuilder f;
    Value *a = tile(f, {16, 16}, DType::bf16);
    f.op(OpKind::Dot, {a, a, f.cf(T({16, 16}, DType::f16), 0.0)}, T({16, 16}, DType::f16));
    CHECK_VERIFY_FAILS(f.fn, "'dot' accumulator must be f32, not tensor<16x16xf16>");
  }
  {
    FnBuilder f;
    Value *t = tile(f, {4, 8});
    f.axis_op(OpKind::ExpandDims, t, T({4, 8, 1}, DType::f32), 1);
    CHECK_VERIFY_FAILS(f.fn, "'expand_dims' result shape must be 4x1x8, not 4x8x1");
  }
  {
    FnBuilder f;
    Value *t = tile(f, {4, 8});
    f.op(OpKind::Broadcast, {t}, T({8, 8}, DType::f32));
    CHECK_VERIFY_FAILS(f.fn, "'broadcast' cannot stretch 4x8 to 8x8");
  }
  {
    FnBuilder f;
    Value *t = tile(f, {4, 8});
    f.op(OpKind::Reshape, {t}, T({4, 4}, DType::f32));
    CHECK_VERIFY_FAILS(f.fn, "'reshape' changes the number of elements (4x8 to 4x4)");
  }
  {
    FnBuilder f;
    Value *t = tile(f, {4, 8});
    Attrs a; a.ints = {1, 0};
    f.op(OpKind::Trans, {t}, T({4, 8}, DType::f32), a);
    CHECK_VERIFY_FAILS(f.fn, "'trans' result shape must be 8x4, not 4x8");
    FnBuilder g;
    Value *u = tile(g, {4, 8});
    a.ints = {0, 0};
    g.op(OpKind::Trans, {u}, T({4, 4}, DType::f32), a);
    CHECK_VERIFY_FAILS(g.fn, "'trans' permutation [0, 0] is not a permutation of 2 dims");
  }
}

TEST_CASE("verify: for loops", "[ir][verifier]") {
  {
    FnBuilder f;
    Value *n = f.param("n", S(DType::i32));
    Value *lb = f.ci(S(DType::i64), 0);
    Op *loop = f.begin_for(lb, n, n, {});
    f.yield({});
    f.end();
    (void)loop;
    CHECK_VERIFY_FAILS(f.fn, "'for' bounds and step have different types: i64, i32, i32");
  }
  {
    FnBuilder f;
    Value *n = f.param("n", S(DType::i32));
    Value *acc = f.cf(S(DType::f32), 0.0);
    Op *loop = f.begin_for(n, n, n, {acc});
    loop->region(0)->arg(1)->type = S(DType::f16);
    f.yield({loop->region(0)->arg(1)});
    f.end();
    CHECK_VERIFY_FAILS(f.fn, "'for' carried value 0 has init f32, region argument f16 and result f32");
  }
  {
    FnBuilder f;
    Value *n = f.param("n", S(DType::i32));
    Value *acc = f.cf(S(DType::f32), 0.0);
    Op *loop = f.begin_for(n, n, n, {acc});
    f.yield({f.op(OpKind::Cast, {loop->region(0)->arg(1)}, S(DType::f64))});
    f.end();
    CHECK_VERIFY_FAILS(f.fn, "the loop body region yields f64 at position 0 but result 0 is f32", "`%1 = for %2 = %n to %n step %n iter_args(%3 = %0) -> (f32) {`");
  }
  {
    FnBuilder f;
    Value *n = f.param("n", S(DType::i32));
    f.begin_for(n, n, n, {});
    f.op(OpKind::Add, {n, n}, S(DType::i32));
    f.end();
    CHECK_VERIFY_FAILS(f.fn, "the loop body region does not end with yield");
  }
  {  // a value defined in the loop body used after the loop
    FnBuilder f;
    Value *n = f.param("n", S(DType::i32));
    f.begin_for(n, n, n, {});
    Value *inner = f.op(OpKind::Add, {n, n}, S(DType::i32));
    f.yield({});
    f.end();
    f.op(OpKind::Mul, {inner, n}, S(DType::i32), {}, kLoc);
    CHECK_VERIFY_FAILS(f.fn, "operand 0 (%1) of 'mul' is not defined before this use in an enclosing scope",
                       "%2 = mul %1, %n : i32", "user_kernel.cpp:42");
  }
}

TEST_CASE("verify: if, yield placement and dominance", "[ir][verifier]") {
  {
    FnBuilder f;
    Value *n = f.param("n", S(DType::i32));
    Op *br = f.begin_if(n, {});
    f.yield({});
    f.else_of(br);
    f.yield({});
    f.end();
    CHECK_VERIFY_FAILS(f.fn, "'if' condition must be an i1 scalar, not i32");
  }
  {
    FnBuilder f;
    Value *n = f.param("n", S(DType::i32));
    Value *c = f.cmp(CmpPred::gt, n, n);
    Op *br = f.begin_if(c, {S(DType::i32)});
    f.yield({n});
    f.else_of(br);
    f.yield({c});
    f.end();
    CHECK_VERIFY_FAILS(f.fn, "the else region yields i1 at position 0 but result 0 is i32");
  }
  {
    FnBuilder f;
    Value *n = f.param("n", S(DType::i32));
    Value *c = f.cmp(CmpPred::gt, n, n);
    Op *br = f.begin_if(c, {});
    f.yield({});
    f.op(OpKind::Add, {n, n}, S(DType::i32));
    f.else_of(br);
    f.yield({});
    f.end();
    CHECK_VERIFY_FAILS(f.fn, "yield is not the last op of its region");
  }
  {
    FnBuilder f;
    Value *n = f.param("n", S(DType::i32));
    f.yield({n});
    CHECK_VERIFY_FAILS(f.fn, "yield appears in the function body");
  }
  {  // use before definition in the same block
    FnBuilder f;
    Value *n = f.param("n", S(DType::i32));
    Value *a = f.op(OpKind::Add, {n, n}, S(DType::i32));
    Value *b = f.op(OpKind::Mul, {n, n}, S(DType::i32));
    a->def->operands[1] = b;
    CHECK_VERIFY_FAILS(f.fn, "operand 1 (%1) of 'add' is not defined before this use");
  }
  {  // a value from one branch used in the other
    FnBuilder f;
    Value *n = f.param("n", S(DType::i32));
    Value *c = f.cmp(CmpPred::gt, n, n);
    Op *br = f.begin_if(c, {S(DType::i32)});
    Value *then_val = f.op(OpKind::Add, {n, n}, S(DType::i32));
    f.yield({then_val});
    f.else_of(br);
    f.yield({then_val});
    f.end();
    CHECK_VERIFY_FAILS(f.fn, "operand 0 (%2) of 'yield' is not defined before this use");
  }
}
