// reassociate_scalar_factors: an f32 tile multiplied by one uniform factor and then by another — each a constant
// or a scalar broadcast over the tile — is multiplied once by their product, computed per scalar instead of per
// element: (x·a)·b → x·(a·b), and the same into an fma's multiplicands, fma(x·a, b, c) → fma(x, a·b, c). A
// score_mod's scalar factors meet the kernel's this way: the softmax scale and a soft-cap's 1/cap before tanh
// become one multiplication, and cap·tanh(…) goes into the softmax's one fma per score, whoever wrote the mod.
// Only where the inner product has no other use (it would otherwise still be computed) and only f32 (two
// roundings of a narrow type would double its error). Numerics: each form rounds twice, so the results differ by
// at most about 2 ulp where a·b is a normal f32. Where a·b overflows from finite nonzero factors it is taken as
// ±FLT_MAX, and where it underflows to 0 as ±FLT_MIN (a few scalar operations, once per product), so that x = 0
// still gives 0 and x = ±inf still ±inf rather than NaN; the results for other x there lose accuracy the written
// order kept — edges this pass accepts as the reciprocal division does (LLVM's reassociating fast-math has them
// too). mul_rn's products (tilejit/ops.h) are left as written. The interpreter runs the rewritten IR too, so
// both backends agree.
#include <cfloat>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "ir/builder.h"
#include "ir/passes.h"
#include "ir/passes/pass_utils.h"

namespace tilejit::ir {
namespace {

/// A factor that is the same for every element: a constant, or a value replicated from one element.
struct UniformFactor {
  std::optional<double> constant;  // set: a constant; otherwise source and chain
  const Value *source = nullptr;
  std::vector<const Op *> chain;
};

std::optional<UniformFactor> uniform_factor(const Value *v) {
  UniformFactor f;
  if (auto c = passes::constant_of(v)) {
    f.constant = c->f;
    return f;
  }
  f.chain = passes::replication_chain(v, f.source);
  if (f.chain.empty() || f.source->type.numel() != 1) return std::nullopt;
  if (auto c = passes::constant_of(f.source)) {
    f.constant = c->f;
    f.chain.clear();
  }
  return f;
}

bool is_f32_tile_product(const Op *op) {
  return op && op->kind == OpKind::Mul && !op->attrs.flag && !op->result()->type.is_ptr() &&
         op->result()->type.dtype() == DType::f32 && op->result()->type.numel() > 1;
}

/// The uniform factor b of `v` = y·b (either operand order), when v is an f32 tile product; y is returned in `y`.
std::optional<UniformFactor> factor_of_product(const Value *v, Value *&y) {
  const Op *mul = v->def;
  if (!is_f32_tile_product(mul)) return std::nullopt;
  for (int i = 0; i < 2; ++i)
    if (auto f = uniform_factor(mul->operand(i))) {
      y = mul->operand(1 - i);
      return f;
    }
  return std::nullopt;
}

/// a·b, except where it leaves the f32 range although a and b are finite and nonzero: ±FLT_MAX where it overflows
/// (then x = 0 gives 0, as (x·a)·b does, not 0·inf = NaN: a soft-cap's scale·(1/cap) overflows for caps below
/// scale/FLT_MAX, and a score of 0 must stay 0) and ±FLT_MIN where it underflows to 0 (then x = ±inf gives ±inf,
/// as written, not inf·0 = NaN: a masked score of −inf must stay −inf).
double clamped_product(double a, double b) {
  const double p = double(float(a * b));
  if (!std::isfinite(a) || !std::isfinite(b) || a == 0 || b == 0) return p;
  if (std::isinf(p)) return std::copysign(double(FLT_MAX), p);
  if (p == 0) return std::copysign(double(FLT_MIN), a * b);
  return p;
}

/// The same at run time, for scalars a and b and their product p.
Value *clamp_product(Builder &b, Value *p, Value *x, Value *y, SourceLoc loc) {
  const Type f32 = p->type, i1{p->type.shape, ElemType{DType::i1, false}};
  auto constant = [&](double v) {
    Attrs a;
    a.fvalue = v;
    return b.create1(OpKind::Constant, {}, f32, a, loc);
  };
  auto cmp = [&](Value *l, Value *r, CmpPred pred) {
    Attrs a;
    a.pred = pred;
    return b.create1(OpKind::Cmp, {l, r}, i1, a, loc);
  };
  auto both = [&](Value *l, Value *r) { return b.create1(OpKind::And, {l, r}, i1, {}, loc); };
  auto select = [&](Value *c, Value *t, Value *f) { return b.create1(OpKind::Select, {c, t, f}, f32, {}, loc); };
  auto abs = [&](Value *v) { return b.create1(OpKind::Abs, {v}, f32, {}, loc); };
  Value *inf = constant(INFINITY), *zero = constant(0);
  // Finite and nonzero (a NaN is neither: |NaN| < inf is false).
  auto ordinary = [&](Value *v) { return both(cmp(abs(v), inf, CmpPred::lt), cmp(v, zero, CmpPred::ne)); };
  Value *factors_ok = both(ordinary(x), ordinary(y));
  Value *negative = b.create1(OpKind::Xor, {cmp(x, zero, CmpPred::lt), cmp(y, zero, CmpPred::lt)}, i1, {}, loc);
  Value *over = both(factors_ok, cmp(abs(p), inf, CmpPred::eq));
  Value *under = both(factors_ok, cmp(p, zero, CmpPred::eq));
  p = select(over, select(negative, constant(-FLT_MAX), constant(FLT_MAX)), p);
  return select(under, select(negative, constant(-FLT_MIN), constant(FLT_MIN)), p);
}

/// Builds a·b (clamped) where both scalars are defined (in front of a loop when both are invariant), then its
/// replication to the shape of the operand it replaces right before `outer`.
Value *product(const UniformFactor &fa, const UniformFactor &fb, Op *outer, const Value *like) {
  const SourceLoc loc = outer->loc;
  Builder b(outer->parent);
  auto constant = [&](double v, const Type &t) {
    Attrs a;
    a.fvalue = double(float(v));  // an f32 constant, as the trace makes them
    return b.create1(OpKind::Constant, {}, t, a, loc);
  };
  if (fa.constant && fb.constant) {
    b.set_insertion_point(outer->parent, passes::index_of(outer));
    return constant(clamped_product(*fa.constant, *fb.constant), like->type);
  }
  // One replicated scalar at least: the product of the two scalars, replicated as that operand was.
  const UniformFactor &rep = fa.constant ? fb : fa, &other = fa.constant ? fa : fb;
  Value *s = const_cast<Value *>(rep.source);
  Value *o = other.constant ? nullptr : const_cast<Value *>(other.source);
  if (o && o->type != s->type) return nullptr;  // two scalars of different shapes: leave them
  // Both scalars dominate `outer`, so their blocks enclose it: the deeper one, after the later definition.
  auto at = passes::just_after(s);
  if (o) {
    auto at_o = passes::just_after(o);
    if (passes::depth(at_o.first) > passes::depth(at.first) || (at_o.first == at.first && at_o.second > at.second))
      at = at_o;
  }
  b.set_insertion_point(at.first, at.second);
  if (!o) o = constant(*other.constant, s->type);
  Value *p = clamp_product(b, b.create1(OpKind::Mul, {s, o}, s->type, {}, loc), s, o, loc);
  b.set_insertion_point(outer->parent, passes::index_of(outer));
  for (auto it = rep.chain.rbegin(); it != rep.chain.rend(); ++it)
    p = b.create1((*it)->kind, {p}, (*it)->result()->type, (*it)->attrs, loc);
  return p;
}

}  // namespace

void reassociate_scalar_factors(Function &fn) {
  std::vector<Op *> candidates;
  walk(*fn.body, [&](Op &op) {
    if (is_f32_tile_product(&op) || (op.kind == OpKind::Fma && op.result()->type.dtype() == DType::f32))
      candidates.push_back(&op);
  });
  auto uses = use_counts(*fn.body);
  for (Op *outer : candidates) {
    // The two factors of the outer product (an fma's multiplicands): one uniform, the other y·a with a uniform.
    for (int i = 0; i < 2; ++i) {
      auto fb = uniform_factor(outer->operand(1 - i));
      Value *inner = outer->operand(i), *y = nullptr;
      if (!fb || uses[inner] != 1) continue;
      auto fa = factor_of_product(inner, y);
      if (!fa) continue;
      Value *ab = product(*fa, *fb, outer, outer->operand(1 - i));
      if (!ab) continue;
      uses[inner] = 0;
      ++uses[y];
      outer->operands[size_t(i)] = y;
      outer->operands[size_t(1 - i)] = ab;
      break;
    }
  }
}

}  // namespace tilejit::ir
