// Scalar bounds of a tile: see tile_bounds.h.
#include "ir/passes/tile_bounds.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "ir/passes/pass_utils.h"
#include "ir/value_range.h"

namespace tilejit::ir::passes {
namespace {

Type scalar_of(DType dt) { return Type{{}, ElemType{dt}}; }

// Integers are bounded in i64; floats in their own dtype.
DType bound_dtype(DType dt) { return is_int(dt) && dt != DType::i1 ? DType::i64 : dt; }

Attrs cmp_attrs(CmpPred p) {
  Attrs a;
  a.pred = p;
  return a;
}

}  // namespace

Value *TileBounds::op2(OpKind k, Value *a, Value *c) { return b_.create1(k, {a, c}, a->type, {}, loc_); }

Value *TileBounds::constant(DType dt, double f, int64_t i) {
  Attrs a;
  if (is_float(dt)) a.fvalue = f;
  else a.ivalue = i;
  return b_.create1(OpKind::Constant, {}, scalar_of(dt), a, loc_);
}

Value *TileBounds::widen(Value *scalar) {
  DType dt = scalar->type.dtype();
  if (bound_dtype(dt) == dt) return scalar;
  return b_.create1(OpKind::Cast, {scalar}, scalar_of(bound_dtype(dt)), {}, loc_);
}

void TileBounds::require_in_i32(const Op *op, const Bounds &r) {
  constexpr int64_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  const Interval range = value_range(op->result());
  if (range.lo > double(lo) || range.hi < double(hi)) return;  // narrower than i32: proven not to wrap
  Value *lo_ok = b_.create1(OpKind::Cmp, {r.lo, constant(DType::i64, 0, lo)}, scalar_of(DType::i1),
                            cmp_attrs(CmpPred::ge), loc_);
  Value *hi_ok = b_.create1(OpKind::Cmp, {r.hi, constant(DType::i64, 0, hi)}, scalar_of(DType::i1),
                            cmp_attrs(CmpPred::le), loc_);
  Value *ok = op2(OpKind::And, lo_ok, hi_ok);
  no_wrap_ = no_wrap_ ? op2(OpKind::And, no_wrap_, ok) : ok;
}

std::optional<TileBounds::Bounds> TileBounds::of(Value *v) {
  if (auto it = memo_.find(v); it != memo_.end()) return it->second;
  std::optional<Bounds> r = compute(v);
  memo_[v] = r;
  return r;
}

std::optional<TileBounds::Bounds> TileBounds::compute(Value *v) {
  if (v->type.is_ptr()) return std::nullopt;
  const DType dt = v->type.dtype();
  if (dt == DType::i1 || dt == DType::i8 || dt == DType::i16) return std::nullopt;
  if (v->type.is_scalar()) {
    Value *s = widen(v);
    return Bounds{s, s};
  }
  const Op *op = v->def;
  if (!op) return std::nullopt;  // a tile carried by a loop: nothing known
  using K = OpKind;
  switch (op->kind) {
    case K::Constant: {
      Value *c = constant(bound_dtype(dt), op->attrs.fvalue, op->attrs.ivalue);
      return Bounds{c, c};
    }
    case K::Arange:
      return Bounds{constant(DType::i64, 0, op->attrs.ints.at(0)), constant(DType::i64, 0, op->attrs.ints.at(1) - 1)};
    case K::Splat:
    case K::Broadcast:
    case K::ExpandDims:
    case K::Reshape:
    case K::Trans: return of(op->operand(0));
    case K::Add:
    case K::Sub:
    case K::Minimum:
    case K::Maximum: {
      auto a = of(op->operand(0)), c = of(op->operand(1));
      if (!a || !c) return std::nullopt;
      Bounds r;
      if (op->kind == K::Sub) r = {op2(K::Sub, a->lo, c->hi), op2(K::Sub, a->hi, c->lo)};
      else r = {op2(op->kind, a->lo, c->lo), op2(op->kind, a->hi, c->hi)};
      if (dt == DType::i32 && (op->kind == K::Add || op->kind == K::Sub)) require_in_i32(op, r);
      return r;
    }
    case K::Neg: {
      auto a = of(op->operand(0));
      if (!a) return std::nullopt;
      Bounds r{b_.create1(K::Neg, {a->hi}, a->hi->type, {}, loc_), b_.create1(K::Neg, {a->lo}, a->lo->type, {}, loc_)};
      if (dt == DType::i32) require_in_i32(op, r);
      return r;
    }
    case K::Mul: {
      // A product by a constant: monotone, increasing or decreasing by the constant's sign.
      for (int i = 0; i < 2; ++i) {
        auto k = passes::constant_of(op->operand(i));
        if (!k) continue;
        auto a = of(op->operand(1 - i));
        if (!a) return std::nullopt;
        const bool negative = k->is_float ? std::signbit(k->f) : k->i < 0;
        Value *kv = constant(bound_dtype(dt), k->f, k->i);
        Bounds r{op2(K::Mul, negative ? a->hi : a->lo, kv), op2(K::Mul, negative ? a->lo : a->hi, kv)};
        if (dt == DType::i32) require_in_i32(op, r);
        return r;
      }
      return std::nullopt;
    }
    case K::Cast: {
      if (op->attrs.flag) return std::nullopt;
      const DType from = op->operand(0)->type.dtype();
      const bool from_int = is_int(from) && from != DType::i1 && !op->operand(0)->type.is_ptr();
      const bool int_to_float = from_int && is_float(dt);
      const bool int_widening = from_int && is_int(dt) && dtype_bits(from) <= dtype_bits(dt);
      if (!int_to_float && !int_widening) return std::nullopt;
      auto a = of(op->operand(0));
      if (!a || !int_to_float) return a;
      return Bounds{b_.create1(K::Cast, {a->lo}, scalar_of(dt), {}, loc_),
                    b_.create1(K::Cast, {a->hi}, scalar_of(dt), {}, loc_)};
    }
    default: return std::nullopt;
  }
}

}  // namespace tilejit::ir::passes
