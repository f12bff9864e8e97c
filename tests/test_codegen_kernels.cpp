// GPU code generation of hand-built tile IR: the LLVM verifier passes, PTX is produced, and ptxas accepts
// it for sm_80 and sm_90a; the PTX shows the expected vector accesses and warp shuffles.
// (Correctness on a GPU is checked by the GPU tests; no GPU is needed here.)
#include <catch2/catch.hpp>

#include <limits>

#include "codegen/codegen.h"
#include "ir/passes.h"
#include "test_codegen_util.h"
#include "test_ir_helpers.h"
#include "tilejit/error.h"

using namespace tilejit;
using namespace tilejit::ir;
using namespace tilejit::ir::testing;
using namespace tilejit::codegen::testing;
using tilejit::codegen::CodegenOptions;

namespace {

constexpr DType F32 = DType::f32, I32 = DType::i32, I1 = DType::i1, BF16 = DType::bf16;

Value *splat(FnBuilder &f, Value *s, std::vector<int64_t> shape) {
  return f.op(OpKind::Splat, {s}, Type{std::move(shape), s->type.elem});
}
Value *bin(FnBuilder &f, OpKind k, Value *a, Value *b) { return f.op(k, {a, b}, a->type); }
Value *ptr_add(FnBuilder &f, Value *p, Value *off) {
  if (p->type.is_scalar() && !off->type.is_scalar()) p = splat(f, p, off->type.shape);
  return f.op(OpKind::PtrAdd, {p, off}, p->type);
}
Value *load(FnBuilder &f, Value *p, Value *mask = nullptr, Value *other = nullptr) {
  std::vector<Value *> ops{p};
  if (mask) ops.push_back(mask);
  if (other) ops.push_back(other);
  return f.op(OpKind::Load, ops, Type{p->type.shape, ElemType{p->type.dtype(), false}});
}
void store(FnBuilder &f, Value *p, Value *v, Value *mask = nullptr) {
  std::vector<Value *> ops{p, v};
  if (mask) ops.push_back(mask);
  f.b.create(OpKind::Store, ops, {});
}
// x[:, None] or x[None, :] broadcast to `shape`.
Value *bcast(FnBuilder &f, Value *x, int axis, std::vector<int64_t> shape) {
  auto s = x->type.shape;
  s.insert(s.begin() + axis, 1);
  Value *e = f.axis_op(OpKind::ExpandDims, x, Type{s, x->type.elem}, axis);
  return f.op(OpKind::Broadcast, {e}, Type{std::move(shape), x->type.elem});
}
Value *reduce(FnBuilder &f, Value *x, int axis, ReduceKind k, OpKind op = OpKind::Reduce) {
  auto s = x->type.shape;
  s.erase(s.begin() + axis);
  Attrs a;
  a.axis = axis;
  a.reduce = k;
  return f.op(op, {x}, Type{s, op == OpKind::ArgReduce ? ElemType{I32, false} : x->type.elem}, a);
}
Value *cast(FnBuilder &f, Value *x, DType to) { return f.op(OpKind::Cast, {x}, Type{x->type.shape, ElemType{to, false}}); }

// out[i] = x[i] + y[i], i < n, BLOCK elements per program.
Function vector_add(int64_t block) {
  FnBuilder f("vector_add");
  Value *x = f.param("x", P({}, F32), true), *y = f.param("y", P({}, F32), true), *out = f.param("out", P({}, F32), true);
  Value *n = f.param("n", S(I32), false, true);
  Value *base = bin(f, OpKind::Mul, f.program_id(), f.ci(S(I32), block));
  Value *offs = bin(f, OpKind::Add, splat(f, base, {block}), f.arange(0, block));
  Value *mask = f.cmp(CmpPred::lt, offs, splat(f, n, {block}));
  Value *sum = bin(f, OpKind::Add, load(f, ptr_add(f, x, offs), mask), load(f, ptr_add(f, y, offs), mask));
  store(f, ptr_add(f, out, offs), sum, mask);
  verify(f.fn);
  return std::move(f.fn);
}

// Row softmax over BM rows of a [rows, cols] matrix per program; the row fits the tile (BN ≥ cols).
Function softmax(int64_t bm, int64_t bn, DType dt) {
  FnBuilder f("softmax");
  Value *in = f.param("in", P({}, dt), true), *out = f.param("out", P({}, dt), true);
  Value *rows = f.param("rows", S(I32)), *cols = f.param("cols", S(I32), false, true);
  Value *stride = f.param("stride", S(I32), false, true);
  std::vector<int64_t> sh{bm, bn};
  Value *r = bin(f, OpKind::Add, splat(f, bin(f, OpKind::Mul, f.program_id(), f.ci(S(I32), bm)), {bm}), f.arange(0, bm));
  Value *c = f.arange(0, bn);
  Value *offs = bin(f, OpKind::Add, bcast(f, bin(f, OpKind::Mul, r, splat(f, stride, {bm})), 1, sh), bcast(f, c, 0, sh));
  Value *mask = bin(f, OpKind::And, bcast(f, f.cmp(CmpPred::lt, r, splat(f, rows, {bm})), 1, sh),
                    bcast(f, f.cmp(CmpPred::lt, c, splat(f, cols, {bn})), 0, sh));
  Value *x = load(f, ptr_add(f, in, offs), mask, f.cf(T(sh, dt), -std::numeric_limits<double>::infinity()));
  Value *xf = cast(f, x, F32);
  Value *m = reduce(f, xf, 1, ReduceKind::max);
  Value *e = f.op(OpKind::Exp, {bin(f, OpKind::Sub, xf, bcast(f, m, 1, sh))}, xf->type);
  Value *s = reduce(f, e, 1, ReduceKind::sum);
  Value *y = bin(f, OpKind::Div, e, bcast(f, s, 1, sh));
  store(f, ptr_add(f, out, offs), cast(f, y, dt), mask);
  verify(f.fn);
  return std::move(f.fn);
}

// out_idx[pid] = argmax(x[pid*B : pid*B+B]); out_min[c] = argmin over rows of a [R, C] tile; sums too.
Function arg_reductions(int64_t block, int64_t R, int64_t C) {
  FnBuilder f("arg_reductions");
  Value *x = f.param("x", P({}, F32), true), *out_idx = f.param("out_idx", P({}, I32), true);
  Value *m = f.param("m", P({}, F32), true), *out_min = f.param("out_min", P({}, I32), true);
  Value *out_sum = f.param("out_sum", P({}, F32), true);
  Value *pid = f.program_id();
  Value *offs = bin(f, OpKind::Add, splat(f, bin(f, OpKind::Mul, pid, f.ci(S(I32), block)), {block}), f.arange(0, block));
  Value *v = load(f, ptr_add(f, x, offs));
  store(f, ptr_add(f, out_idx, pid), reduce(f, v, 0, ReduceKind::max, OpKind::ArgReduce));
  store(f, ptr_add(f, out_sum, pid), reduce(f, v, 0, ReduceKind::sum));
  std::vector<int64_t> sh{R, C};
  Value *moffs = bin(f, OpKind::Add, bcast(f, bin(f, OpKind::Mul, f.arange(0, R), splat(f, f.ci(S(I32), C), {R})), 1, sh),
                     bcast(f, f.arange(0, C), 0, sh));
  Value *mv = load(f, ptr_add(f, m, moffs));
  store(f, ptr_add(f, out_min, f.arange(0, C)), reduce(f, mv, 0, ReduceKind::min, OpKind::ArgReduce));
  verify(f.fn);
  return std::move(f.fn);
}

// c[M,N] = a[M,K] · b[K,N] for one BM×BN tile per program, K-loop of BK with a carried F32 accumulator.
Function matmul(int64_t bm, int64_t bn, int64_t bk, DType dt) {
  FnBuilder f("matmul");
  Value *a = f.param("a", P({}, dt), true), *b = f.param("b", P({}, dt), true), *c = f.param("c", P({}, F32), true);
  Value *N = f.param("N", S(I32), false, true), *K = f.param("K", S(I32), false, true);
  Value *pm = f.program_id(0), *pn = f.program_id(1);
  Value *rm = bin(f, OpKind::Add, splat(f, bin(f, OpKind::Mul, pm, f.ci(S(I32), bm)), {bm}), f.arange(0, bm));
  Value *rn = bin(f, OpKind::Add, splat(f, bin(f, OpKind::Mul, pn, f.ci(S(I32), bn)), {bn}), f.arange(0, bn));
  Value *zero = f.cf(T({bm, bn}, F32), 0.0);
  Op *loop = f.begin_for(f.ci(S(I32), 0), K, f.ci(S(I32), bk), {zero});
  Value *k = loop->region(0)->arg(0), *acc = loop->region(0)->arg(1);
  Value *rk = bin(f, OpKind::Add, splat(f, k, {bk}), f.arange(0, bk));
  Value *a_offs = bin(f, OpKind::Add, bcast(f, bin(f, OpKind::Mul, rm, splat(f, K, {bm})), 1, {bm, bk}), bcast(f, rk, 0, {bm, bk}));
  Value *b_offs = bin(f, OpKind::Add, bcast(f, bin(f, OpKind::Mul, rk, splat(f, N, {bk})), 1, {bk, bn}), bcast(f, rn, 0, {bk, bn}));
  Value *av = load(f, ptr_add(f, a, a_offs)), *bv = load(f, ptr_add(f, b, b_offs));
  Value *next = f.op(OpKind::Dot, {av, bv, acc}, T({bm, bn}, F32));
  f.yield({next});
  f.end();
  Value *c_offs = bin(f, OpKind::Add, bcast(f, bin(f, OpKind::Mul, rm, splat(f, N, {bm})), 1, {bm, bn}), bcast(f, rn, 0, {bm, bn}));
  store(f, ptr_add(f, c, c_offs), loop->result(0));
  verify(f.fn);
  return std::move(f.fn);
}

// out = pid < 2 ? x * 2 : x + 1 (an if with a tile result), and a scalar if.
Function branchy() {
  FnBuilder f("branchy");
  Value *x = f.param("x", P({}, F32), true), *out = f.param("out", P({}, F32), true);
  Value *pid = f.program_id();
  Value *offs = bin(f, OpKind::Add, splat(f, bin(f, OpKind::Mul, pid, f.ci(S(I32), 256)), {256}), f.arange(0, 256));
  Value *v = load(f, ptr_add(f, x, offs));
  Op *i = f.begin_if(f.cmp(CmpPred::lt, pid, f.ci(S(I32), 2)), {T({256}, F32), S(I32)});
  f.yield({bin(f, OpKind::Mul, v, f.cf(T({256}, F32), 2.0)), f.ci(S(I32), 7)});
  f.else_of(i);
  f.yield({bin(f, OpKind::Add, v, f.cf(T({256}, F32), 1.0)), f.ci(S(I32), 9)});
  f.end();
  Value *scaled = bin(f, OpKind::Add, i->result(0), splat(f, cast(f, i->result(1), F32), {256}));
  store(f, ptr_add(f, out, offs), scaled);
  verify(f.fn);
  return std::move(f.fn);
}

// Round trips through every pair of BF16/f16/F32/I32/i64 (and I1), stored to out[k*B + i].
Function casts() {
  FnBuilder f("casts");
  Value *x = f.param("x", P({}, F32), true), *out = f.param("out", P({}, F32), true);
  const int64_t B = 128;
  Value *offs = f.arange(0, B);
  Value *v = load(f, ptr_add(f, x, offs));
  std::vector<DType> types{DType::bf16, DType::f16, F32, I32, DType::i64, I1, DType::i8, DType::f64};
  int slot = 0;
  for (DType a : types)
    for (DType b : types) {
      Value *r = cast(f, cast(f, cast(f, v, a), b), F32);
      Value *o = bin(f, OpKind::Add, offs, splat(f, f.ci(S(I32), slot++ * B), {B}));
      store(f, ptr_add(f, out, o), r);
    }
  verify(f.fn);
  return std::move(f.fn);
}

// Tile atomics (F32 and I32, masked, old values used) and a scalar atomic whose result is stored.
Function atomics() {
  FnBuilder f("atomics");
  Value *acc = f.param("acc", P({}, F32), true), *cnt = f.param("cnt", P({}, I32), true);
  Value *old_out = f.param("old_out", P({}, F32), true), *n = f.param("n", S(I32));
  Value *offs = f.arange(0, 64);
  Value *mask = f.cmp(CmpPred::lt, offs, splat(f, n, {64}));
  Value *ones = f.cf(T({64}, F32), 1.5);
  Value *old = f.op(OpKind::AtomicAdd, {ptr_add(f, acc, offs), ones, mask}, T({64}, F32));
  store(f, ptr_add(f, old_out, offs), old, mask);
  f.op(OpKind::AtomicAdd, {ptr_add(f, cnt, offs), f.ci(T({64}, I32), 1)}, T({64}, I32));
  Value *s_old = f.op(OpKind::AtomicAdd, {cnt, f.ci(S(I32), 3)}, S(I32));
  store(f, ptr_add(f, old_out, f.ci(S(I32), 100)), cast(f, s_old, F32));
  // A [4] tile over 128 threads: heavily replicated; only owners may add.
  Value *small = f.arange(0, 4);
  f.op(OpKind::AtomicAdd, {ptr_add(f, acc, small), f.cf(T({4}, F32), 1.0)}, T({4}, F32));
  verify(f.fn);
  return std::move(f.fn);
}

// Math and the remaining elementwise ops on F32 and BF16, a transpose and a reshape.
Function math_and_shapes() {
  FnBuilder f("math_and_shapes");
  Value *x = f.param("x", P({}, F32), true), *out = f.param("out", P({}, F32), true);
  std::vector<int64_t> sh{16, 32};
  Value *offs = bin(f, OpKind::Add, bcast(f, bin(f, OpKind::Mul, f.arange(0, 16), f.ci(T({16}, I32), 32)), 1, sh),
                    bcast(f, f.arange(0, 32), 0, sh));
  Value *v = load(f, ptr_add(f, x, offs));
  Value *acc = v;
  for (DType dt : {F32, BF16}) {
    Value *w = cast(f, v, dt);
    for (OpKind k : {OpKind::Exp, OpKind::Exp2, OpKind::Log, OpKind::Log2, OpKind::Sqrt, OpKind::Rsqrt, OpKind::Abs,
                     OpKind::Tanh, OpKind::Sigmoid, OpKind::Neg})
      w = f.op(k, {w}, w->type);
    w = f.op(OpKind::Fma, {w, w, w}, w->type);
    w = bin(f, OpKind::Maximum, w, bin(f, OpKind::Minimum, w, bin(f, OpKind::Rem, w, f.cf(w->type, 3.0))));
    acc = bin(f, OpKind::Add, acc, cast(f, w, F32));
  }
  Value *iv = cast(f, v, I32);
  iv = bin(f, OpKind::Xor, bin(f, OpKind::Shl, iv, f.ci(T(sh, I32), 2)), bin(f, OpKind::Shr, iv, f.ci(T(sh, I32), 1)));
  iv = bin(f, OpKind::Div, iv, f.ci(T(sh, I32), 3));
  Value *sel = f.op(OpKind::Select, {f.cmp(CmpPred::gt, acc, v), acc, cast(f, iv, F32)}, acc->type);
  Attrs perm;
  perm.ints = {1, 0};
  Value *t = f.op(OpKind::Trans, {sel}, T({32, 16}, F32), perm);
  Value *r = f.op(OpKind::Reshape, {t}, T({16, 32}, F32));
  store(f, ptr_add(f, out, offs), r);
  verify(f.fn);
  return std::move(f.fn);
}

}  // namespace

TEST_CASE("codegen: vector add is vectorized and assembles", "[codegen]") {
  Function fn = vector_add(1024);
  std::string ll = codegen::emit_llvm_ir(fn, CodegenOptions{});
  REQUIRE(contains(ll, "define ptx_kernel void @vector_add"));
  auto r = compile_and_assemble(fn, "vector_add");
  INFO(r.ptx);
  REQUIRE(contains(r.ptx, "ld.global.v4.f32"));
  REQUIRE(contains(r.ptx, "st.global.v4.f32"));
  REQUIRE(r.shared_bytes == 0);
  REQUIRE(r.entry == "vector_add");
}

TEST_CASE("codegen: without alignment facts the vector add falls back to scalar accesses", "[codegen]") {
  Function fn = vector_add(1024);
  fn.params[0].align16 = false;  // x may be misaligned
  fn.params[3].div16 = false;    // n not divisible by 16: the mask is not uniform over 4 elements
  auto r = compile_and_assemble(fn, "vector_add_unaligned");
  INFO(r.ptx);
  REQUIRE_FALSE(contains(r.ptx, "ld.global.v4"));
}

TEST_CASE("codegen: row softmax uses warp shuffles and assembles", "[codegen]") {
  for (DType dt : {F32, BF16}) {
    auto r = compile_and_assemble(softmax(4, 128, dt), fmt::format("softmax_{}", dtype_name(dt)));
    INFO(r.ptx);
    REQUIRE(contains(r.ptx, "shfl.sync.bfly"));
    REQUIRE(contains(r.ptx, "ex2.approx"));
  }
  // One long row per program: the reduction crosses warps through shared memory.
  auto r = compile_and_assemble(softmax(1, 2048, F32), "softmax_long_row", 8);
  REQUIRE(contains(r.ptx, "shfl.sync.bfly"));
  REQUIRE(contains(r.ptx, "bar.sync"));
  REQUIRE(r.shared_bytes > 0);
}

TEST_CASE("codegen: argmax/argmin and sums across warps assemble", "[codegen]") {
  auto r = compile_and_assemble(arg_reductions(512, 32, 64), "arg_reductions");
  REQUIRE(contains(r.ptx, "shfl.sync.bfly"));
  REQUIRE(r.shared_bytes > 0);
}

TEST_CASE("codegen: 64x64x32 dot in a K loop with a carried accumulator", "[codegen]") {
  for (DType dt : {BF16, DType::f16, F32}) {
    auto r = compile_and_assemble(matmul(64, 64, 32, dt), fmt::format("matmul_{}", dtype_name(dt)));
    INFO(r.ptx);
    REQUIRE(contains(r.ptx, "fma.rn.f32"));
    // Each thread loads 4 consecutive elements of a row: one 16-byte (f32) or 8-byte (16-bit types) access.
    REQUIRE(contains(r.ptx, dt == F32 ? "ld.global.v4.f32" : "ld.global.v2.b32"));
    REQUIRE(r.shared_bytes >= (64 * 32 + 32 * 64) * dtype_bytes(dt));
    REQUIRE(r.shared_bytes <= 48 * 1024);
  }
}

TEST_CASE("codegen: if with tile and scalar results", "[codegen]") {
  compile_and_assemble(branchy(), "branchy");
}

TEST_CASE("codegen: casts among BF16/f16/F32/f64/I1/i8/I32/i64", "[codegen]") {
  compile_and_assemble(casts(), "casts");
}

TEST_CASE("codegen: atomic_add on tiles and scalars", "[codegen]") {
  auto r = compile_and_assemble(atomics(), "atomics");
  INFO(r.ptx);
  REQUIRE(contains(r.ptx, "atom.global.add.f32"));
  REQUIRE(contains(r.ptx, "atom.global.add.u32"));
}

TEST_CASE("codegen: math, transposes and reshapes", "[codegen]") {
  auto r = compile_and_assemble(math_and_shapes(), "math_and_shapes", 2);
  REQUIRE(contains(r.ptx, "tanh.approx.f32"));
  REQUIRE(contains(r.ptx, "lg2.approx"));
}

TEST_CASE("codegen: num_warps 1, 2 and 8 all assemble", "[codegen]") {
  for (int w : {1, 2, 8}) {
    compile_and_assemble(softmax(2, 256, F32), fmt::format("softmax_w{}", w), w);
    compile_and_assemble(matmul(32, 64, 16, BF16), fmt::format("matmul_w{}", w), w);
  }
}

TEST_CASE("codegen: errors name the problem", "[codegen]") {
  Function fn = vector_add(256);
  CodegenOptions bad;
  bad.arch = "sm_100";
  REQUIRE_THROWS_WITH(codegen::compile_to_ptx(fn, bad), Catch::Contains("unknown GPU arch 'sm_100'"));
  CodegenOptions warps;
  warps.num_warps = 3;
  REQUIRE_THROWS_AS(codegen::compile_to_ptx(fn, warps), CompileError);
  REQUIRE(codegen::llvm_version().rfind("19.", 0) == 0);
}
