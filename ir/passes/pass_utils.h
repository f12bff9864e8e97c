// Helpers shared by the optimization passes and the range analysis (internal to ir/).
#pragma once
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "ir/builder.h"
#include "ir/ir.h"

namespace tilejit::ir::passes {

/// The value of a Constant op (a splat of one scalar over the result shape).
struct ConstValue {
  bool is_float = false;
  double f = 0.0;   // when is_float
  int64_t i = 0;    // otherwise (i1: 0 or 1)
};

/// v's constant value when v is the result of a Constant op.
inline std::optional<ConstValue> constant_of(const Value *v) {
  if (!v || !v->def || v->def->kind != OpKind::Constant || v->type.is_ptr()) return std::nullopt;
  ConstValue c;
  c.is_float = is_float(v->type.dtype());
  if (c.is_float) c.f = v->def->attrs.fvalue;
  else c.i = v->type.dtype() == DType::i1 ? (v->def->attrs.ivalue != 0) : v->def->attrs.ivalue;
  return c;
}

/// True when v is an integer constant equal to k.
inline bool is_int_const(const Value *v, int64_t k) {
  auto c = constant_of(v);
  return c && !c->is_float && c->i == k;
}
/// True when v is a float constant equal to k, with the same sign bit (so -0.0 and +0.0 differ).
inline bool is_float_const(const Value *v, double k) {
  auto c = constant_of(v);
  return c && c->is_float && c->f == k && std::signbit(c->f) == std::signbit(k);
}

/// Turns `op` (one result, no regions) into a Constant holding `c`, keeping its result Value (so its uses
/// need not change) and its source location.
inline void make_constant(Op &op, const ConstValue &c) {
  op.kind = OpKind::Constant;
  op.operands.clear();
  op.attrs = Attrs{};
  if (c.is_float) op.attrs.fvalue = c.f;
  else op.attrs.ivalue = c.i;
}

/// Replaces every use of op's result i by `to` in the function, for i in all results.
inline void replace_results(Function &fn, Op &op, const std::vector<Value *> &to) {
  for (int i = 0; i < op.num_results(); ++i) replace_all_uses(*fn.body, op.result(i), to[size_t(i)]);
}

/// The ops that only replicate their operand's elements (broadcast, splat, expand_dims), from `v` back to the
/// value they replicate (`source`; v itself when the chain is empty): the chain outermost first.
inline std::vector<const Op *> replication_chain(const Value *v, const Value *&source) {
  std::vector<const Op *> chain;
  source = v;
  while (source->def && (source->def->kind == OpKind::Broadcast || source->def->kind == OpKind::Splat ||
                         source->def->kind == OpKind::ExpandDims)) {
    chain.push_back(source->def);
    source = source->def->operand(0);
  }
  return chain;
}

/// The index of `op` in its block.
inline size_t index_of(const Op *op) {
  const Block *b = op->parent;
  size_t i = 0;
  while (b->ops[i].get() != op) ++i;
  return i;
}

/// Where a value computed from `v` alone can go: right after its definition, or first in the block whose
/// argument it is.
inline std::pair<Block *, size_t> just_after(const Value *v) {
  if (!v->def) return {v->block, 0};
  return {v->def->parent, index_of(v->def) + 1};
}

/// How many ops enclose block `b` (0 for a function body).
inline int depth(const Block *b) {
  int d = 0;
  for (; b->parent; b = b->parent->parent) ++d;
  return d;
}

/// How many elements v's values come from: its replicated source's (v's own when it is not replicated).
inline int64_t source_elements(const Value *v) {
  const Value *source = nullptr;
  replication_chain(v, source);
  return source->type.numel();
}

/// f applied once per distinct element of v, for `user`: when v is replicated from fewer elements, f(source) is
/// built right after the source's definition (in front of a loop when the source is invariant) and replicated as
/// v was, right before `user`; otherwise f(v) right before `user`. f(builder, x) builds an elementwise function of
/// x (same shape; its dtype may differ) at the builder's insertion point and returns it.
template <class F> Value *on_distinct_elements(Value *v, Op *user, F &&f) {
  const Value *source = nullptr;
  std::vector<const Op *> chain = replication_chain(v, source);
  Builder b(user->parent);
  if (source->type.numel() >= v->type.numel()) {
    b.set_insertion_point(user->parent, index_of(user));
    return f(b, v);
  }
  auto [block, at] = just_after(source);
  b.set_insertion_point(block, at);
  Value *r = f(b, const_cast<Value *>(source));
  b.set_insertion_point(user->parent, index_of(user));
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    Type t = (*it)->result()->type;
    t.elem = r->type.elem;
    r = b.create1((*it)->kind, {r}, t, (*it)->attrs, user->loc);
  }
  return r;
}

/// Erases the op at index `i` of `b` (its results must have no uses left).
inline void erase_op(Block &b, size_t i) { b.ops.erase(b.ops.begin() + long(i)); }

}  // namespace tilejit::ir::passes
