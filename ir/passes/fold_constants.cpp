// fold_constants: an op whose operands are all constants becomes a Constant holding its value. Constants
// are splats (one scalar over the result shape), so elementwise ops, casts, shape ops (splat, broadcast,
// expand_dims, reshape, trans) and max/min/sum-of-ints reductions of constants are constants again.
// The folded op keeps its result Value, so uses need no rewrite; its now-unused operands are left to dce.
// Arithmetic follows the interpreter exactly (ir/numerics.h: floats in double rounded once to the dtype,
// transcendentals on f16/bf16 through f32; integers wrapped). Anything the GPU and the interpreter might
// not agree on is left unfolded: integer division by zero, shifts outside [0, bits), float→int of NaN or
// out-of-range values, comparisons and min/max involving NaN. An fma {split} (fma_index) whose index folds
// to a constant becomes the plain fma.
#include <cmath>
#include <optional>

#include "ir/passes.h"
#include "ir/numerics.h"
#include "ir/passes/pass_utils.h"

namespace tilejit::ir {
namespace {

using passes::ConstValue;
using Folded = std::optional<ConstValue>;

ConstValue fval(double f) { return ConstValue{true, f, 0}; }
ConstValue ival(int64_t i) { return ConstValue{false, 0.0, i}; }

int64_t wadd(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }
int64_t wsub(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
int64_t wmul(int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); }

template <class T> bool compare(CmpPred p, T a, T b) {
  switch (p) {
    case CmpPred::eq: return a == b;
    case CmpPred::ne: return a != b;
    case CmpPred::lt: return a < b;
    case CmpPred::le: return a <= b;
    case CmpPred::gt: return a > b;
    case CmpPred::ge: return a >= b;
  }
  return false;
}

Folded fold_float_binary(OpKind k, double a, double b, DType t) {
  double r;
  switch (k) {
    case OpKind::Add: r = a + b; break;
    case OpKind::Sub: r = a - b; break;
    case OpKind::Mul: r = a * b; break;
    case OpKind::Div: r = a / b; break;
    case OpKind::Rem: r = std::fmod(a, b); break;
    case OpKind::Minimum:
    case OpKind::Maximum:
      if (std::isnan(a) || std::isnan(b)) return std::nullopt;
      if (a == b) r = (std::signbit(a) == (k == OpKind::Minimum)) ? a : b;  // min(-0,+0) = -0, max = +0
      else r = (k == OpKind::Minimum) == (a < b) ? a : b;
      break;
    default: return std::nullopt;
  }
  return fval(numerics::round_float(r, t));
}

Folded fold_int_binary(OpKind k, int64_t a, int64_t b, DType t) {
  const int bits = dtype_bits(t);
  int64_t r;
  switch (k) {
    case OpKind::Add: r = wadd(a, b); break;
    case OpKind::Sub: r = wsub(a, b); break;
    case OpKind::Mul: r = wmul(a, b); break;
    case OpKind::Div:
    case OpKind::Rem:
      if (b == 0) return std::nullopt;  // a runtime fault (the interpreter reports it): keep it there
      if (b == -1) r = k == OpKind::Div ? wsub(0, a) : 0;  // INT_MIN / -1 wraps, as in the interpreter
      else r = k == OpKind::Div ? a / b : a % b;
      break;
    case OpKind::Minimum: r = a < b ? a : b; break;
    case OpKind::Maximum: r = a > b ? a : b; break;
    case OpKind::And: r = a & b; break;
    case OpKind::Or: r = a | b; break;
    case OpKind::Xor: r = a ^ b; break;
    case OpKind::Shl:
      if (b < 0 || b >= bits) return std::nullopt;
      r = int64_t(uint64_t(a) << b);
      break;
    case OpKind::Shr:
      if (b < 0 || b >= bits) return std::nullopt;
      r = a >> b;
      break;
    default: return std::nullopt;
  }
  return ival(numerics::wrap_int(r, t));
}

Folded fold_float_unary(OpKind k, double x, DType t) {
  auto math = [t](double r) {  // transcendentals: through f32 for the 16-bit formats
    if (t == DType::f16 || t == DType::bf16) r = double(float(r));
    return fval(numerics::round_float(r, t));
  };
  switch (k) {
    case OpKind::Neg: return fval(-x);
    case OpKind::Abs: return fval(std::fabs(x));
    case OpKind::Sqrt: return fval(numerics::round_float(std::sqrt(x), t));
    case OpKind::Exp: return math(std::exp(x));
    case OpKind::Exp2: return math(std::exp2(x));
    case OpKind::Log: return math(std::log(x));
    case OpKind::Log2: return math(std::log2(x));
    case OpKind::Rsqrt: return math(1.0 / std::sqrt(x));
    case OpKind::Tanh: return math(std::tanh(x));
    case OpKind::Sigmoid: return math(1.0 / (1.0 + std::exp(-x)));
    default: return std::nullopt;
  }
}

Folded fold_int_unary(OpKind k, int64_t x, DType t) {
  switch (k) {
    case OpKind::Neg: return ival(numerics::wrap_int(wsub(0, x), t));
    case OpKind::Abs: return ival(numerics::wrap_int(x < 0 ? wsub(0, x) : x, t));
    case OpKind::Not: return ival(numerics::wrap_int(~x, t));  // i1: the low bit of ~x is the logical not
    default: return std::nullopt;
  }
}

Folded fold_cast(const ConstValue &c, DType from, DType to) {
  if (c.is_float && is_float(to)) return fval(numerics::round_float(c.f, to));
  if (c.is_float) {  // float → int truncates toward zero
    if (std::isnan(c.f)) return std::nullopt;
    if (to == DType::i1) return ival(c.f != 0.0);
    double t = std::trunc(c.f);
    double lo = -std::ldexp(1.0, dtype_bits(to) - 1);
    if (t < lo || t >= -lo) return std::nullopt;  // out of range: saturation choices differ; leave it
    return ival(int64_t(t));
  }
  if (is_float(to)) {
    if (to == DType::f32) return fval(double(float(c.i)));  // one rounding even for large i64
    return fval(numerics::round_float(double(c.i), to));
  }
  (void)from;  // i1 sources hold 0/1, so widening them is zero extension
  return ival(to == DType::i1 ? int64_t(c.i != 0) : numerics::wrap_int(c.i, to));
}

/// The folded value of `op`, or nullopt when it is not foldable.
Folded fold(const Op &op) {
  if (op.num_results() != 1 || !op.regions.empty() || op.num_operands() == 0) return std::nullopt;
  std::vector<ConstValue> in;
  for (const Value *v : op.operands) {
    auto c = passes::constant_of(v);
    if (!c) return std::nullopt;
    in.push_back(*c);
  }
  const Type &rt = op.result()->type;
  if (rt.is_ptr()) return std::nullopt;
  const DType t = rt.dtype();
  switch (op.kind) {
    case OpKind::Splat: case OpKind::Broadcast: case OpKind::ExpandDims: case OpKind::Reshape:
    case OpKind::Trans:
      return in[0];  // a splat rearranged is the same splat
    case OpKind::Reduce:
      if (op.attrs.reduce != ReduceKind::sum) return in[0];
      if (in[0].is_float) return std::nullopt;  // a float sum's value depends on the summation order
      return ival(numerics::wrap_int(wmul(in[0].i, op.operand(0)->type.shape[size_t(op.attrs.axis)]), t));
    case OpKind::ArgReduce:
      return ival(0);  // all elements equal: the first one is the extreme
    case OpKind::Cast:
      return fold_cast(in[0], op.operand(0)->type.dtype(), t);
    case OpKind::Cmp:
      if (in[0].is_float) {
        if (std::isnan(in[0].f) || std::isnan(in[1].f)) return std::nullopt;
        return ival(compare(op.attrs.pred, in[0].f, in[1].f));
      }
      return ival(compare(op.attrs.pred, in[0].i, in[1].i));
    case OpKind::Select:
      return in[0].i ? in[1] : in[2];
    case OpKind::Fma:
      if (t == DType::f32) return fval(std::fma(float(in[0].f), float(in[1].f), float(in[2].f)));
      return fval(numerics::round_float(std::fma(in[0].f, in[1].f, in[2].f), t));
    default: break;
  }
  if (op.num_operands() == 2 && op.operand(0)->type == rt) {
    return in[0].is_float ? fold_float_binary(op.kind, in[0].f, in[1].f, t) : fold_int_binary(op.kind, in[0].i, in[1].i, t);
  }
  if (op.num_operands() == 1 && op.operand(0)->type == rt)
    return in[0].is_float ? fold_float_unary(op.kind, in[0].f, t) : fold_int_unary(op.kind, in[0].i, t);
  return std::nullopt;
}

void fold_block(Block &b) {
  for (auto &op : b.ops) {
    for (auto &r : op->regions) fold_block(*r);
    if (op->kind == OpKind::Constant) continue;
    if (auto c = fold(*op)) {
      passes::make_constant(*op, *c);
    } else if (op->kind == OpKind::Fma && op->attrs.flag && op->operand(0)->def &&
               op->operand(0)->def->kind == OpKind::Constant) {
      // fma_index of a constant index (its index cast just folded): nothing to split, and the verifier
      // requires {split}'s first operand to be the cast. The plain fma computes the same value.
      op->attrs.flag = false;
    }
  }
}

}  // namespace

void fold_constants(Function &fn) { fold_block(*fn.body); }

}  // namespace tilejit::ir
