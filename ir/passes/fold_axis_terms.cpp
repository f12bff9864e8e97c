// fold_axis_terms: a term of a sum that is constant along an axis — one value per row, broadcast over the row's
// columns — is added after a reduction along that axis, or into an fma's addend that is itself one value per row,
// instead of to every element:
//
//   max/min over axis a of (y ± r)    → (max/min over axis a of y) ± r
//   fma(y ± r, c, m)                  → fma(y, c, fma(±r, c, m))       where c and m are constant along a too
//
// when every use of the sum is one of these (otherwise the sum would still be computed) and y is per-element work
// (not replicated: a difference of a row's and a column's positions is distribute_uniform_factor's, which keeps
// its precision). A sum (y ± r) ± u, r the term, is taken as (y ± u) ± r. The online softmax reads its scores this way (a row max, then one fma per score
// before exp2), so a score_mod's per-query part — ALiBi's slope·q_idx once its distance is split by
// distribute_uniform_factor — costs one operation per row instead of one per score. The max and min are exact
// (rounding is monotone); the fma rounds ±r·c + m, then y·c plus that, instead of y ± r, then (y ± r)·c + m: an
// absolute change of a few ulp of the largest of |y·c|, |r·c| and |m| (in the softmax, of the score's own
// magnitude, at which y ± r and the row max were rounded already).
#include <optional>
#include <unordered_map>
#include <vector>

#include "ir/builder.h"
#include "ir/passes.h"
#include "ir/passes/pass_utils.h"

namespace tilejit::ir {
namespace {

Type with_shape(Type t, std::vector<int64_t> shape) {
  t.shape = std::move(shape);
  return t;
}

/// v (of x's shape) as the value of x's shape with dim `axis` = 1 that it broadcasts, when v is constant along
/// `axis`: a broadcast of such a value, a splat of a scalar, or a constant (those two built at b's point).
Value *along_axis(Builder &b, Value *v, int axis, SourceLoc loc) {
  std::vector<int64_t> shape = v->type.shape;
  shape[size_t(axis)] = 1;
  if (v->def && v->def->kind == OpKind::Broadcast && v->def->operand(0)->type.shape == shape) return v->def->operand(0);
  if (v->def && v->def->kind == OpKind::Splat)
    return b.create1(OpKind::Splat, {v->def->operand(0)}, with_shape(v->type, shape), {}, loc);
  if (v->def && v->def->kind == OpKind::Constant)
    return b.create1(OpKind::Constant, {}, with_shape(v->type, shape), v->def->attrs, loc);
  return nullptr;
}

/// Whether along_axis(v) would succeed (without building anything).
bool is_along_axis(const Value *v, int axis) {
  if (!v->def) return false;
  std::vector<int64_t> shape = v->type.shape;
  shape[size_t(axis)] = 1;
  if (v->def->kind == OpKind::Broadcast) return v->def->operand(0)->type.shape == shape;
  return v->def->kind == OpKind::Splat || v->def->kind == OpKind::Constant;
}

/// x = y ± r with r constant along `axis`.
struct Split {
  Value *y = nullptr;     // built on demand for (y ± r) ± u
  Value *r = nullptr;     // the term, of x's shape
  bool negative = false;  // x = y − r
  // (y' ± r) ± u: y = y' ± u is built by materialize()
  Op *inner = nullptr, *outer = nullptr;
};

bool is_sum(const Op *op) { return op && (op->kind == OpKind::Add || op->kind == OpKind::Sub); }

std::optional<Split> split_of(Value *x, int axis, const std::unordered_map<const Value *, int> &uses) {
  Op *op = x->def;
  if (!is_sum(op)) return std::nullopt;
  const bool sub = op->kind == OpKind::Sub;
  if (is_along_axis(op->operand(1), axis)) return Split{op->operand(0), op->operand(1), sub};
  if (!sub && is_along_axis(op->operand(0), axis)) return Split{op->operand(1), op->operand(0), false};
  // (y' ± r) ± u
  Op *inner = op->operand(0)->def;
  auto it = uses.find(op->operand(0));
  if (!is_sum(inner) || it == uses.end() || it->second != 1) return std::nullopt;
  const bool inner_sub = inner->kind == OpKind::Sub;
  if (is_along_axis(inner->operand(1), axis)) {
    Split s{nullptr, inner->operand(1), inner_sub};
    s.inner = inner;
    s.outer = op;
    return s;
  }
  return std::nullopt;
}

/// Whether `user` reads x in a form this pass rewrites.
bool foldable_use(const Op &user, const Value *x, int axis) {
  if (user.kind == OpKind::Reduce)
    return user.attrs.axis == axis && (user.attrs.reduce == ReduceKind::max || user.attrs.reduce == ReduceKind::min);
  if (user.kind == OpKind::Fma) {
    if (user.operand(2) == x || user.operand(0) == user.operand(1)) return false;
    const Value *c = user.operand(0) == x ? user.operand(1) : user.operand(0);
    return is_along_axis(c, axis) && is_along_axis(user.operand(2), axis);
  }
  return false;
}

bool fold(Value *x, int axis, const std::vector<Op *> &users,
          const std::unordered_map<const Value *, int> &uses) {
  auto split = split_of(x, axis, uses);
  if (!split) return false;
  // y must be per-element work: the operand that stays (for (y' ± r) ± u, y' and u must not both be replicated).
  const Value *kept = split->y ? split->y : split->outer->operand(1);
  const Value *kept2 = split->y ? nullptr : split->inner->operand(0);
  auto replicated = [](const Value *v) { return passes::source_elements(v) < v->type.numel(); };
  if (replicated(kept) && (!kept2 || replicated(kept2))) return false;
  const SourceLoc loc = x->def->loc;
  Builder b(x->def->parent);
  b.set_insertion_point(x->def->parent, passes::index_of(x->def) + 1);
  if (!split->y) {
    // (y' ± r) ± u: y = y' ± u, right after the sum.
    split->y = b.create1(split->outer->kind, {split->inner->operand(0), split->outer->operand(1)}, x->type, {}, loc);
  }
  Value *r1 = along_axis(b, split->r, axis, loc);  // a value of shape [.., 1, ..]: already there, or built here
  for (Op *user : users) {
    b.set_insertion_point(user->parent, passes::index_of(user));
    if (user->kind == OpKind::Reduce) {
      Value *ry = b.create1(OpKind::Reduce, {split->y}, user->result()->type, user->attrs, user->loc);
      // r without its unit dimension: the value r1 expanded, or a reshape of r1.
      Value *r0 = r1->def && r1->def->kind == OpKind::ExpandDims && r1->def->attrs.axis == axis
                      ? r1->def->operand(0)
                      : b.create1(OpKind::Reshape, {r1}, user->result()->type, {}, user->loc);
      user->kind = split->negative ? OpKind::Sub : OpKind::Add;
      user->operands = {ry, r0};
      user->attrs = Attrs{};
      continue;
    }
    Value *c = user->operand(0) == x ? user->operand(1) : user->operand(0);
    Value *c1 = along_axis(b, c, axis, user->loc);
    Value *signed_r = split->negative ? b.create1(OpKind::Neg, {r1}, r1->type, {}, user->loc) : r1;
    Value *m1 = along_axis(b, user->operand(2), axis, user->loc);
    Value *z1 = b.create1(OpKind::Fma, {signed_r, c1, m1}, r1->type, {}, user->loc);
    Value *z = b.create1(OpKind::Broadcast, {z1}, x->type, {}, user->loc);
    user->kind = OpKind::Fma;
    user->operands = {split->y, c, z};
    user->attrs = Attrs{};
  }
  return true;
}

}  // namespace

void fold_axis_terms(Function &fn) {
  // The users of each value, in program order.
  std::unordered_map<const Value *, std::vector<Op *>> users;
  std::vector<Value *> sums;
  walk(*fn.body, [&](Op &op) {
    for (Value *v : op.operands) {
      auto &u = users[v];
      if (u.empty() || u.back() != &op) u.push_back(&op);
    }
    if (is_sum(&op) && !op.result()->type.is_ptr() && op.result()->type.dtype() == DType::f32 &&
        op.result()->type.rank() >= 2)
      sums.push_back(op.result());
  });
  auto uses = passes::live_use_counts(*fn.body);
  auto dead = [&](const Op *op) {
    if (!is_pure(op->kind) || !op->regions.empty() || op->num_results() == 0) return false;
    for (auto &r : op->results)
      if (uses.count(r.get()) && uses[r.get()] > 0) return false;
    return true;
  };
  for (Value *x : sums) {
    std::vector<Op *> us;
    for (Op *u : users[x])
      if (!dead(u)) us.push_back(u);
    if (us.empty()) continue;
    for (int axis = 0; axis < x->type.rank(); ++axis) {
      bool all = true;
      for (const Op *u : us) all = all && foldable_use(*u, x, axis);
      if (!all) continue;
      if (fold(x, axis, us, uses)) break;  // x's uses changed; other sums' did not
    }
  }
}

}  // namespace tilejit::ir
