// The printer: golden text for a kernel with a two-value loop and an if; locations only on request.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "ir/passes.h"
#include "test_ir_helpers.h"

using namespace tilejit;
using namespace tilejit::ir;
using namespace tilejit::ir::testing;

namespace {
// Sums x[i*64 + arange(64)] over i < n, then stores exp(acc) or acc depending on the program id.
void build_kernel(FnBuilder &f, uint32_t line_base) {
  Value *x = f.param("x", S(DType::f32) /*replaced below*/, true, false);
  x->type = P({}, DType::f32);
  f.fn.params[0].type = x->type;
  Value *n = f.param("n", S(DType::i32), false, true);
  SourceLoc loc{"kernel.cpp", line_base, 3};
  Value *pid = f.program_id();
  pid->def->loc = loc;
  Value *r = f.arange(0, 64);
  Value *zero = f.ci(S(DType::i32), 0);
  Value *one = f.ci(S(DType::i32), 1);
  Value *acc0 = f.cf(T({64}, DType::f32), 0.25);
  Value *cnt0 = f.cf(S(DType::f32), -0.0);
  Op *loop = f.begin_for(zero, n, one, {acc0, cnt0});
  {
    Block *body = loop->region(0);
    Value *iv = body->arg(0);
    Value *off = f.op(OpKind::Add, {f.op(OpKind::Splat, {iv}, T({64}, DType::i32)), r}, T({64}, DType::i32));
    Value *p = f.op(OpKind::PtrAdd, {f.op(OpKind::Splat, {x}, P({64}, DType::f32)), off}, P({64}, DType::f32));
    Value *mask = f.cmp(CmpPred::lt, off, f.op(OpKind::Splat, {n}, T({64}, DType::i32)));
    Value *v = f.op(OpKind::Load, {p, mask}, T({64}, DType::f32));
    Value *acc = f.op(OpKind::Add, {body->arg(1), v}, T({64}, DType::f32));
    Value *cnt = f.op(OpKind::Add, {body->arg(2), f.cf(S(DType::f32), 1.0)}, S(DType::f32));
    f.yield({acc, cnt});
    f.end();
  }
  Value *cond = f.cmp(CmpPred::eq, pid, zero);
  Op *branch = f.begin_if(cond, {T({64}, DType::f32)});
  f.yield({f.op(OpKind::Exp, {loop->result(0)}, T({64}, DType::f32))});
  f.else_of(branch);
  f.yield({loop->result(0)});
  f.end();
  Value *p = f.op(OpKind::PtrAdd, {f.op(OpKind::Splat, {x}, P({64}, DType::f32)), r}, P({64}, DType::f32));
  Value *bf = f.op(OpKind::Cast, {branch->result(0)}, T({64}, DType::bf16));
  Value *back = f.op(OpKind::Cast, {bf}, T({64}, DType::f32));
  Value *s = f.axis_op(OpKind::Reduce, f.axis_op(OpKind::ExpandDims, back, T({1, 64}, DType::f32), 0), T({64}, DType::f32), 0);
  f.b.create(OpKind::Store, {p, s}, {}, {}, SourceLoc{"kernel.cpp", line_base + 7, 5});
}

const char *kGolden = R"(tt.func @golden(%x: ptr<f32> {align16}, %n: i32 {div16}) {
  %0 = program_id {axis = 0} : i32
  %1 = arange {start = 0, end = 64} : tensor<64xi32>
  %2 = constant {value = 0} : i32
  %3 = constant {value = 1} : i32
  %4 = constant {value = 0.25} : tensor<64xf32>
  %5 = constant {value = -0} : f32
  %6:2 = for %7 = %2 to %n step %3 iter_args(%8 = %4, %9 = %5) -> (tensor<64xf32>, f32) {
    %10 = splat %7 : tensor<64xi32>
    %11 = add %10, %1 : tensor<64xi32>
    %12 = splat %x : tensor<64xptr<f32>>
    %13 = ptr_add %12, %11 : tensor<64xptr<f32>>
    %14 = splat %n : tensor<64xi32>
    %15 = cmp %11, %14 {pred = lt} : tensor<64xi1>
    %16 = load %13, %15 : tensor<64xf32>
    %17 = add %8, %16 : tensor<64xf32>
    %18 = constant {value = 1} : f32
    %19 = add %9, %18 : f32
    yield %17, %19
  }
  %20 = cmp %0, %2 {pred = eq} : i1
  %21 = if %20 -> (tensor<64xf32>) {
    %22 = exp %6#0 : tensor<64xf32>
    yield %22
  } else {
    yield %6#0
  }
  %23 = splat %x : tensor<64xptr<f32>>
  %24 = ptr_add %23, %1 : tensor<64xptr<f32>>
  %25 = cast %21 : tensor<64xf32> -> tensor<64xbf16>
  %26 = cast %25 : tensor<64xbf16> -> tensor<64xf32>
  %27 = expand_dims %26 {axis = 0} : tensor<1x64xf32>
  %28 = reduce %27 {axis = 0, kind = sum} : tensor<64xf32>
  store %24, %28 : tensor<64xf32>
}
)";
}  // namespace

TEST_CASE("print: golden text for a kernel with a loop and an if", "[ir][printer]") {
  FnBuilder f("golden");
  build_kernel(f, 10);
  verify(f.fn);
  CHECK(print(f.fn) == kGolden);
}

TEST_CASE("print: source locations do not change the text, print_with_locations shows them", "[ir][printer]") {
  FnBuilder a("golden"), b("golden");
  build_kernel(a, 10);
  build_kernel(b, 200);
  CHECK(print(a.fn) == print(b.fn));
  std::string with = print_with_locations(a.fn);
  CHECK(with.find("program_id {axis = 0} : i32 loc(kernel.cpp:10:3)") != std::string::npos);
  CHECK(with.find("store %24, %28 : tensor<64xf32> loc(kernel.cpp:17:5)") != std::string::npos);
  CHECK(with.find("loc(unknown)") != std::string::npos);
  CHECK(print_with_locations(b.fn) != with);
}

TEST_CASE("print: attributes that change the code change the text", "[ir][printer]") {
  auto one = [](auto tweak) {
    FnBuilder f;
    Value *x = f.param("x", S(DType::f32));
    Attrs a;
    a.fvalue = 0.1f;  // f32-rounded value: must print with enough digits to round-trip as a double
    tweak(a);
    Value *c = f.op(OpKind::Constant, {}, S(DType::f32), a);
    f.op(OpKind::Add, {x, c}, S(DType::f32));
    return print(f.fn);
  };
  std::string base = one([](Attrs &) {});
  CHECK(base.find(fmt::format("{{value = {}}}", double(0.1f))) != std::string::npos);
  CHECK(base.find("0.10000000149011612") != std::string::npos);
  CHECK(one([](Attrs &a) { a.fvalue = 0.2; }) != base);
  // Fields a constant float does not read must not reach the cache key.
  CHECK(one([](Attrs &a) { a.ivalue = 7; a.axis = 3; }) == base);
}

TEST_CASE("print: params with unusable names fall back to %argN", "[ir][printer]") {
  FnBuilder f("p");
  Value *a = f.param("a", S(DType::i32));
  Value *b = f.param("a", S(DType::i32));  // duplicate
  Value *c = f.param("", S(DType::i32));
  f.op(OpKind::Add, {f.op(OpKind::Add, {a, b}, S(DType::i32)), c}, S(DType::i32));
  std::string text = print(f.fn);
  CHECK(text.find("tt.func @p(%a: i32, %arg1: i32, %arg2: i32) {") == 0);
  CHECK(text.find("%0 = add %a, %arg1 : i32") != std::string::npos);
  CHECK(text.find("%1 = add %0, %arg2 : i32") != std::string::npos);
}
