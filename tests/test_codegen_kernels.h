// Hand-built tile IR kernels shared by the codegen tests (tests/test_codegen_kernels.cpp: PTX + ptxas) and
// the GPU tests (tests/gpu/test_codegen_gpu.cpp: GPU vs the CPU interpreter). Built with ir::Builder, not the
// DSL, so each kernel exercises exactly the ops named.
#pragma once
#include <cmath>
#include <limits>

#include "codegen/mma.h"
#include "ir/passes.h"
#include "test_ir_helpers.h"

namespace tilejit::codegen::testing {

using namespace tilejit::ir;
using namespace tilejit::ir::testing;

constexpr DType F32 = DType::f32, I32 = DType::i32, I1 = DType::i1, BF16 = DType::bf16, F16 = DType::f16;

inline Value *splat(FnBuilder &f, Value *s, std::vector<int64_t> shape) {
  return f.op(OpKind::Splat, {s}, Type{std::move(shape), s->type.elem});
}
inline Value *bin(FnBuilder &f, OpKind k, Value *a, Value *b) { return f.op(k, {a, b}, a->type); }
inline Value *ptr_add(FnBuilder &f, Value *p, Value *off) {
  if (p->type.is_scalar() && !off->type.is_scalar()) p = splat(f, p, off->type.shape);
  return f.op(OpKind::PtrAdd, {p, off}, p->type);
}
inline Value *load(FnBuilder &f, Value *p, Value *mask = nullptr, Value *other = nullptr) {
  std::vector<Value *> ops{p};
  if (mask) ops.push_back(mask);
  if (other) ops.push_back(other);
  return f.op(OpKind::Load, ops, Type{p->type.shape, ElemType{p->type.dtype(), false}});
}
inline void store(FnBuilder &f, Value *p, Value *v, Value *mask = nullptr) {
  std::vector<Value *> ops{p, v};
  if (mask) ops.push_back(mask);
  f.b.create(OpKind::Store, ops, {});
}
// x[:, None] or x[None, :] broadcast to `shape`.
inline Value *bcast(FnBuilder &f, Value *x, int axis, std::vector<int64_t> shape) {
  auto s = x->type.shape;
  s.insert(s.begin() + axis, 1);
  Value *e = f.axis_op(OpKind::ExpandDims, x, Type{s, x->type.elem}, axis);
  return f.op(OpKind::Broadcast, {e}, Type{std::move(shape), x->type.elem});
}
inline Value *reduce(FnBuilder &f, Value *x, int axis, ReduceKind k, OpKind op = OpKind::Reduce) {
  auto s = x->type.shape;
  s.erase(s.begin() + axis);
  Attrs a;
  a.axis = axis;
  a.reduce = k;
  return f.op(op, {x}, Type{s, op == OpKind::ArgReduce ? ElemType{I32, false} : x->type.elem}, a);
}
inline Value *cast(FnBuilder &f, Value *x, DType to) { return f.op(OpKind::Cast, {x}, Type{x->type.shape, ElemType{to, false}}); }

// out[i] = x[i] + y[i], i < n, BLOCK elements per program.
inline Function vector_add(int64_t block) {
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
inline Function softmax(int64_t bm, int64_t bn, DType dt) {
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
inline Function arg_reductions(int64_t block, int64_t R, int64_t C) {
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
inline Function matmul(int64_t bm, int64_t bn, int64_t bk, DType dt) {
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

/// What matmul_acc adds to the accumulator besides a·b in each K step.
enum class RowBias {
  None,
  /// A per-row f32 vector (parameter `bias`, after c) loaded each step, masked (rows below K − k) with `other`
  /// = −0.75: c += Σ_k (a_k·b_k + bias_k broadcast along rows), bias_k[r] = bias[(k / bk) + rm[r]] where
  /// rm[r] < K − k, else −0.75. A pipelined loop stages such a load.
  Add,
  /// Add, and each step also stores bias_k + 1 where it read it, so the next step reads what this one wrote
  /// (one row further on): a load that must not be copied ahead of the loop's stores.
  AddAndStoreBack,
};

// c[M,N] += a[M,K] · b for one BM×BN tile per program (tensor cores for f16/bf16): the accumulator starts
// from c (loaded), a K loop of BK; b is [K,N] row-major, or with trans_b stored [N,K] row-major, loaded
// [BN,BK] and transposed in the IR (the dot folds the Trans into its operand staging). row_bias: see RowBias.
inline Function matmul_acc(int64_t bm, int64_t bn, int64_t bk, DType dt, bool trans_b,
                           RowBias row_bias = RowBias::None) {
  FnBuilder f(row_bias != RowBias::None ? "matmul_acc_row_bias" : trans_b ? "matmul_acc_bt" : "matmul_acc");
  Value *a = f.param("a", P({}, dt), true), *b = f.param("b", P({}, dt), true), *c = f.param("c", P({}, F32), true);
  Value *bias = row_bias != RowBias::None ? f.param("bias", P({}, F32), true) : nullptr;
  Value *N = f.param("N", S(I32), false, true), *K = f.param("K", S(I32), false, true);
  Value *pm = f.program_id(0), *pn = f.program_id(1);
  Value *rm = bin(f, OpKind::Add, splat(f, bin(f, OpKind::Mul, pm, f.ci(S(I32), bm)), {bm}), f.arange(0, bm));
  Value *rn = bin(f, OpKind::Add, splat(f, bin(f, OpKind::Mul, pn, f.ci(S(I32), bn)), {bn}), f.arange(0, bn));
  Value *c_offs = bin(f, OpKind::Add, bcast(f, bin(f, OpKind::Mul, rm, splat(f, N, {bm})), 1, {bm, bn}), bcast(f, rn, 0, {bm, bn}));
  Value *c_ptrs = ptr_add(f, c, c_offs);
  Value *c0 = load(f, c_ptrs);
  Op *loop = f.begin_for(f.ci(S(I32), 0), K, f.ci(S(I32), bk), {c0});
  Value *k = loop->region(0)->arg(0), *acc = loop->region(0)->arg(1);
  Value *rk = bin(f, OpKind::Add, splat(f, k, {bk}), f.arange(0, bk));
  Value *a_offs = bin(f, OpKind::Add, bcast(f, bin(f, OpKind::Mul, rm, splat(f, K, {bm})), 1, {bm, bk}), bcast(f, rk, 0, {bm, bk}));
  Value *av = load(f, ptr_add(f, a, a_offs)), *bv;
  if (trans_b) {
    Value *bt_offs = bin(f, OpKind::Add, bcast(f, bin(f, OpKind::Mul, rn, splat(f, K, {bn})), 1, {bn, bk}), bcast(f, rk, 0, {bn, bk}));
    Attrs perm;
    perm.ints = {1, 0};
    bv = f.op(OpKind::Trans, {load(f, ptr_add(f, b, bt_offs))}, T({bk, bn}, dt), perm);
  } else {
    Value *b_offs = bin(f, OpKind::Add, bcast(f, bin(f, OpKind::Mul, rk, splat(f, N, {bk})), 1, {bk, bn}), bcast(f, rn, 0, {bk, bn}));
    bv = load(f, ptr_add(f, b, b_offs));
  }
  Value *next = f.op(OpKind::Dot, {av, bv, acc}, T({bm, bn}, F32));
  if (bias) {
    Value *bias_ptrs = ptr_add(f, bias, bin(f, OpKind::Add, splat(f, bin(f, OpKind::Div, k, f.ci(S(I32), bk)), {bm}), rm));
    Value *bias_mask = f.cmp(CmpPred::lt, rm, splat(f, bin(f, OpKind::Sub, K, k), {bm}));
    Value *bias_k = load(f, bias_ptrs, bias_mask, f.cf(T({bm}, F32), -0.75));
    if (row_bias == RowBias::AddAndStoreBack)
      store(f, bias_ptrs, bin(f, OpKind::Add, bias_k, f.cf(T({bm}, F32), 1.0)), bias_mask);
    next = bin(f, OpKind::Add, next, bcast(f, bias_k, 1, {bm, bn}));
  }
  f.yield({next});
  f.end();
  store(f, c_ptrs, loop->result(0));
  verify(f.fn);
  return std::move(f.fn);
}

/// The first Dot op of fn.
inline const Op *find_dot(Function &fn) {
  const Op *dot = nullptr;
  walk(*fn.body, [&](Op &op) {
    if (!dot && op.kind == OpKind::Dot) dot = &op;
  });
  return dot;
}

// out = pid < 2 ? x * 2 : x + 1 (an if with a tile result), and a scalar if.
inline Function branchy() {
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
inline Function casts() {
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

// index_to_f32 (a Cast with the index flag; codegen/lower_index_to_f32.cpp) of position tiles [M, N]:
//   0: S + row − column (aranges along both dims and a runtime scalar)
//   1: arange(7, 7 + N) along columns − S + 3 (a constant tile)
//   2: a length-1 arange stretched over the columns + rows (the stretched one is a constant, not a coordinate)
//   3: x − column, x loaded (one per row): the plain part converted once per row (ALiBi's distance's form)
//   4: row · column: not of the form, converted plainly per element
// Output k of five at out + k·M·N, row-major [M, N].
inline Value *index_cast(FnBuilder &f, Value *x) {
  Attrs a;
  a.flag = true;
  return f.op(OpKind::Cast, {x}, Type{x->type.shape, ElemType{F32, false}}, a);
}
inline Function index_floats(int64_t M, int64_t N) {
  FnBuilder f("index_floats");
  Value *x = f.param("x", P({}, I32), true), *out = f.param("out", P({}, F32), true), *shift = f.param("S", S(I32));
  Value *rows = bcast(f, f.arange(0, M), 1, {M, N}), *cols = bcast(f, f.arange(0, N), 0, {M, N});
  Value *Sb = splat(f, shift, {M, N});
  Value *cols7 = bcast(f, f.arange(7, 7 + N), 0, {M, N});
  Value *one = f.op(OpKind::Broadcast, {f.axis_op(OpKind::ExpandDims, f.arange(3, 4), T({1, 1}, I32), 0)}, T({M, N}, I32));
  Value *xr = bcast(f, load(f, ptr_add(f, x, f.arange(0, M))), 1, {M, N});
  std::vector<Value *> outs{
      index_cast(f, bin(f, OpKind::Sub, bin(f, OpKind::Add, Sb, rows), cols)),
      index_cast(f, bin(f, OpKind::Add, bin(f, OpKind::Sub, cols7, Sb), f.ci(T({M, N}, I32), 3))),
      index_cast(f, bin(f, OpKind::Add, one, rows)),
      index_cast(f, bin(f, OpKind::Sub, xr, cols)), index_cast(f, bin(f, OpKind::Mul, rows, cols))};
  Value *rc = bin(f, OpKind::Add, bin(f, OpKind::Mul, rows, f.ci(T({M, N}, I32), N)), cols);
  for (size_t k = 0; k < outs.size(); ++k)
    store(f, ptr_add(f, out, bin(f, OpKind::Add, rc, f.ci(T({M, N}, I32), int64_t(k) * M * N))), outs[k]);
  verify(f.fn);
  return std::move(f.fn);
}

// fma_index (an Fma with the split flag: codegen splits it, lower_index_to_f32.cpp) of z = f32(x_row − column)·a
// + s over [M, N], then the consumers that keep the split: s is loaded (a blocked layout) or, with
// `from_dot`, s = A·B of f16 A [M, 16] and B [16, N] (a tensor-core accumulator layout). Outputs, in order
// at out: z [M, N]; m = max(z, 1) [M]; fma(z, c, −m) [M, N] (c a runtime scalar); w = where(column < K, z, −inf) and
// max(w, 1) [M]; fma(w, c, −max(w, 1)) [M, N]; max(z, 0) [N] (across rows: no shared part, plain). With
// `softmax_only`, only fma(z, c, −m): z itself is never needed whole.
inline Function index_fma(int64_t M, int64_t N, bool from_dot, bool softmax_only = false) {
  FnBuilder f(from_dot ? "index_fma_dot" : "index_fma");
  Value *x = f.param("x", P({}, I32), true), *sp = f.param("s", P({}, from_dot ? F16 : F32), true);
  Value *bp = f.param("b", P({}, F16), true), *out = f.param("out", P({}, F32), true);
  Value *a = f.param("a", S(F32)), *K = f.param("K", S(I32)), *cp = f.param("c", S(F32));
  Value *rows = bcast(f, f.arange(0, M), 1, {M, N}), *cols = bcast(f, f.arange(0, N), 0, {M, N});
  Value *s;
  if (from_dot) {
    const int64_t KD = 16;
    Value *ra = bcast(f, bin(f, OpKind::Mul, f.arange(0, M), f.ci(T({M}, I32), KD)), 1, {M, KD});
    Value *av = load(f, ptr_add(f, sp, bin(f, OpKind::Add, ra, bcast(f, f.arange(0, KD), 0, {M, KD}))));
    Value *rb = bcast(f, bin(f, OpKind::Mul, f.arange(0, KD), f.ci(T({KD}, I32), N)), 1, {KD, N});
    Value *bv = load(f, ptr_add(f, bp, bin(f, OpKind::Add, rb, bcast(f, f.arange(0, N), 0, {KD, N}))));
    s = f.op(OpKind::Dot, {av, bv, f.cf(T({M, N}, F32), 0.0)}, T({M, N}, F32));
  } else {
    s = load(f, ptr_add(f, sp, bin(f, OpKind::Add, bin(f, OpKind::Mul, rows, f.ci(T({M, N}, I32), N)), cols)));
  }
  Value *xr = bcast(f, load(f, ptr_add(f, x, f.arange(0, M))), 1, {M, N});
  Attrs split;
  split.flag = true;
  Value *z = f.op(OpKind::Fma, {index_cast(f, bin(f, OpKind::Sub, xr, cols)), splat(f, a, {M, N}), s}, T({M, N}, F32),
                  split);
  Value *c = splat(f, cp, {M, N});
  auto row_fma = [&](Value *v, Value *m) {
    return f.op(OpKind::Fma, {v, c, bcast(f, f.op(OpKind::Neg, {m}, m->type), 1, {M, N})}, T({M, N}, F32));
  };
  Value *m = reduce(f, z, 1, ReduceKind::max);
  Value *ninf = f.cf(T({M, N}, F32), -INFINITY);
  Value *w = f.op(OpKind::Select, {f.cmp(CmpPred::lt, cols, splat(f, K, {M, N})), z, ninf}, T({M, N}, F32));
  Value *mw = reduce(f, w, 1, ReduceKind::max);
  Value *rc = bin(f, OpKind::Add, bin(f, OpKind::Mul, rows, f.ci(T({M, N}, I32), N)), cols);
  int64_t at = 0;
  auto put = [&](Value *v) {
    Value *offs = v->type.shape.size() == 2 ? rc : f.arange(0, v->type.shape[0]);
    store(f, ptr_add(f, out, bin(f, OpKind::Add, offs, f.ci(offs->type, at))), v);
    at += v->type.shape.size() == 2 ? M * N : v->type.shape[0];
  };
  if (softmax_only) {
    put(row_fma(z, m));
    verify(f.fn);
    return std::move(f.fn);
  }
  put(z);
  put(m);
  put(row_fma(z, m));
  put(mw);
  put(row_fma(w, mw));
  put(reduce(f, z, 0, ReduceKind::max));
  verify(f.fn);
  return std::move(f.fn);
}
inline int64_t index_fma_outputs(int64_t M, int64_t N) { return 3 * M * N + 2 * M + N; }

// out = fma_index(zero, a, s) over n elements, zero = arange(0, 1) stretched: the constant 0 per register,
// with no per-thread part, and not a Constant op (so not folded away).
inline Function fma_index_zero(int64_t n) {
  FnBuilder f("fma_index_zero");
  Value *sp = f.param("s", P({}, F32), true), *out = f.param("out", P({}, F32), true), *a = f.param("a", S(F32));
  Value *zero = f.op(OpKind::Broadcast, {f.arange(0, 1)}, T({n}, I32));
  Attrs split;
  split.flag = true;
  Value *z = f.op(OpKind::Fma, {index_cast(f, zero), splat(f, a, {n}), load(f, ptr_add(f, sp, f.arange(0, n)))},
                  T({n}, F32), split);
  store(f, ptr_add(f, out, f.arange(0, n)), z);
  verify(f.fn);
  return std::move(f.fn);
}

// Tile atomics (F32 and I32, masked, old values used) and a scalar atomic whose result is stored.
inline Function atomics() {
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
  f.op(OpKind::AtomicAdd, {ptr_add(f, cnt, f.ci(S(I32), 1)), f.ci(S(I32), 5)}, S(I32));  // old value unused
  // A [4] tile over 128 threads: heavily replicated; only owners may add.
  Value *small = f.arange(0, 4);
  f.op(OpKind::AtomicAdd, {ptr_add(f, acc, small), f.cf(T({4}, F32), 1.0)}, T({4}, F32));
  verify(f.fn);
  return std::move(f.fn);
}

// Math and the remaining elementwise ops on F32 and BF16, a transpose and a reshape.
inline Function math_and_shapes() {
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


/// The unary math ops checked one by one: out[k*B + i] = op_k(x[i]) computed in dtype dt (B = 256).
inline const std::vector<OpKind> &unary_math_ops() {
  static const std::vector<OpKind> ops{OpKind::Exp, OpKind::Exp2, OpKind::Log, OpKind::Log2, OpKind::Sqrt,
                                       OpKind::Rsqrt, OpKind::Abs, OpKind::Tanh, OpKind::Sigmoid, OpKind::Neg};
  return ops;
}
inline Function unary_math(DType dt) {
  FnBuilder f("unary_math");
  Value *x = f.param("x", P({}, F32), true), *out = f.param("out", P({}, F32), true);
  const int64_t B = 256;
  Value *offs = f.arange(0, B);
  Value *v = cast(f, load(f, ptr_add(f, x, offs)), dt);
  int k = 0;
  for (OpKind op : unary_math_ops()) {
    Value *r = cast(f, f.op(op, {v}, v->type), F32);
    store(f, ptr_add(f, out, bin(f, OpKind::Add, offs, splat(f, f.ci(S(I32), k++ * B), {B}))), r);
  }
  verify(f.fn);
  return std::move(f.fn);
}

/// out (as [R, C]) = reshape(trans(x as [R, C]), [R, C]): element (i, j) of the result is element
/// (p % R, p / R) of x where p = i*C + j.
inline Function transpose_reshape(int64_t R, int64_t C) {
  FnBuilder f("transpose_reshape");
  Value *x = f.param("x", P({}, F32), true), *out = f.param("out", P({}, F32), true);
  std::vector<int64_t> sh{R, C};
  Value *offs = bin(f, OpKind::Add, bcast(f, bin(f, OpKind::Mul, f.arange(0, R), f.ci(T({R}, I32), C)), 1, sh),
                    bcast(f, f.arange(0, C), 0, sh));
  Value *v = load(f, ptr_add(f, x, offs));
  Attrs perm;
  perm.ints = {1, 0};
  Value *t = f.op(OpKind::Trans, {v}, T({C, R}, F32), perm);
  store(f, ptr_add(f, out, offs), f.op(OpKind::Reshape, {t}, T(sh, F32)));
  verify(f.fn);
  return std::move(f.fn);
}

}  // namespace tilejit::codegen::testing
