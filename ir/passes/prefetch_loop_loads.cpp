// prefetch_loop_loads: a small load at the top level of a for loop's body, whose address and mask depend only
// on the induction variable and values from outside the loop, is issued one iteration early: the first
// iteration's copy in front of the loop, each later one at the start of the iteration before, carried into
// its iteration as a loop value. Its latency then overlaps a whole iteration instead of stalling the ops
// that read it (the backward's per-query-block lse and delta beside the tensor-core work; the operands of
// dots already go through codegen's cp.async pipeline and are left to it).
//
// Conditions: a positive constant step; nothing in the body writes memory (a prefetched value could
// otherwise miss a store of the iteration before); the load's tile holds at most kMaxElements elements (it
// costs registers for the whole iteration); it is not read by a dot (codegen pipelines those) and does not
// feed an address (codegen's pipeline needs addresses computed from the induction variable alone); its
// address computation is pure and cannot trap. A copy for an iteration past the last reads nothing: its
// mask gains `iv + step < ub` (and `lb < ub` in front of the loop). A prefetched load is flagged, so a
// second run of the pass leaves it alone.
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "ir/builder.h"
#include "ir/passes.h"
#include "ir/passes/pass_utils.h"

namespace tilejit::ir {
namespace {

constexpr int64_t kMaxElements = 256;

bool writes_memory(Block &b) {
  bool w = false;
  walk(b, [&](Op &op) { w |= writes_memory(op.kind); });
  return w;
}

bool may_trap(const Op &op) {
  if (op.kind != OpKind::Div && op.kind != OpKind::Rem) return false;
  const Value *d = op.operand(1);
  if (d->type.is_ptr() || is_float(d->type.dtype())) return false;
  auto c = passes::constant_of(d);
  return !c || c->i == 0;
}

int64_t elements(const Type &t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

class Prefetcher {
 public:
  explicit Prefetcher(Function &fn) : fn_(fn) {
    walk(*fn.body, [&](Op &op) {
      for (Value *v : op.operands) users_[v].push_back(&op);
    });
  }
  void run() { visit(*fn_.body); }

 private:
  void visit(Block &b) {
    for (size_t i = 0; i < b.ops.size(); ++i) {
      for (auto &r : b.ops[i]->regions) visit(*r);
      if (b.ops[i]->kind == OpKind::For) i += prefetch_in(b, i);
    }
  }

  // Whether v (transitively through the ops that use it) reaches a dot or an address.
  bool feeds_dot_or_address(const Value *v, std::unordered_set<const Value *> &seen) {
    if (!seen.insert(v).second) return false;
    if (v->type.is_ptr()) return true;
    for (const Op *u : users_[v]) {
      if (u->kind == OpKind::Dot) return true;
      if (u->kind == OpKind::Load && u->operand(0) == v) return true;
      for (auto &r : u->results)
        if (feeds_dot_or_address(r.get(), seen)) return true;
    }
    return false;
  }

  /// Prefetches what it can in the loop at b.ops[i]; returns the number of ops inserted in front of it.
  size_t prefetch_in(Block &b, size_t i) {
    Op *loop = b.ops[i].get();
    Block &body = *loop->region(0);
    auto step = passes::constant_of(loop->operand(2));
    if (!step || step->is_float || step->i <= 0 || writes_memory(body)) return 0;
    const Value *iv = body.arg(0);

    // Body ops computed only from the induction variable and values defined outside the loop.
    std::unordered_set<const Op *> indexed;
    auto from_iv_or_outside = [&](const Value *v) {
      if (v == iv) return true;
      if (!v->def) return v->block != &body;
      if (indexed.count(v->def)) return true;
      for (const Block *p = v->def->parent; p; p = p->parent ? p->parent->parent : nullptr)
        if (p == &body) return false;
      return true;
    };
    std::vector<Op *> loads;
    for (auto &op : body.ops) {
      bool ok = op->regions.empty() && (is_pure(op->kind) || op->kind == OpKind::Load) && !may_trap(*op);
      for (const Value *v : op->operands) ok = ok && from_iv_or_outside(v);
      if (!ok) continue;
      if (op->kind == OpKind::Load) {
        std::unordered_set<const Value *> seen;
        if (!op->attrs.flag && !op->result()->type.is_scalar() && elements(op->result()->type) <= kMaxElements &&
            !feeds_dot_or_address(op->result(), seen))
          loads.push_back(op.get());
        continue;  // a load's value is not part of another load's address computation here
      }
      indexed.insert(op.get());
    }
    size_t inserted = 0;
    for (Op *load : loads) inserted += prefetch(b, i + inserted, *load, indexed);
    return inserted;
  }

  /// Clones the ops `v` depends on inside the body (all in `indexed`) at the builder's position, with the
  /// induction variable replaced by `iv_now`; returns v's copy.
  Value *clone_slice(Builder &bld, Value *v, Value *iv, Value *iv_now, std::unordered_map<Value *, Value *> &map,
                     const std::unordered_set<const Op *> &indexed) {
    if (v == iv) return iv_now;
    if (!v->def || !indexed.count(v->def)) return v;
    if (auto it = map.find(v); it != map.end()) return it->second;
    const Op &op = *v->def;
    std::vector<Value *> ops;
    for (Value *o : op.operands) ops.push_back(clone_slice(bld, o, iv, iv_now, map, indexed));
    Value *copy = bld.create1(op.kind, ops, v->type, op.attrs, op.loc);
    map[v] = copy;
    return copy;
  }

  /// The load `load` (with ptr, mask, other) for the iteration `iv_now`, reading nothing unless `runs`.
  Value *copy_load(Builder &bld, const Op &load, Value *iv, Value *iv_now, Value *runs,
                   const std::unordered_set<const Op *> &indexed) {
    std::unordered_map<Value *, Value *> map;
    std::vector<Value *> ops;
    for (Value *o : load.operands) ops.push_back(clone_slice(bld, o, iv, iv_now, map, indexed));
    const Type &t = load.result()->type;
    Value *m = bld.create1(OpKind::Splat, {runs}, Type{t.shape, ElemType{DType::i1, false}}, {}, load.loc);
    if (ops.size() >= 2) ops[1] = bld.create1(OpKind::And, {ops[1], m}, ops[1]->type, {}, load.loc);
    else ops.push_back(m);
    Attrs a = load.attrs;
    a.flag = true;
    return bld.create1(OpKind::Load, ops, t, a, load.loc);
  }

  size_t prefetch(Block &b, size_t at, Op &load, const std::unordered_set<const Op *> &indexed) {
    Op *loop = b.ops[at].get();
    Block &body = *loop->region(0);
    Value *iv = body.arg(0), *lb = loop->operand(0), *ub = loop->operand(1), *step = loop->operand(2);
    const Type i1{{}, ElemType{DType::i1, false}};
    Attrs lt;
    lt.pred = CmpPred::lt;

    // The first iteration's copy, in front of the loop.
    Builder front(&b);
    front.set_insertion_point(&b, at);
    Value *runs = front.create1(OpKind::Cmp, {lb, ub}, i1, lt, load.loc);
    Value *first = copy_load(front, load, iv, lb, runs, indexed);
    const size_t inserted = front.position() - at;
    loop = b.ops[at + inserted].get();

    // The next iteration's copy, at the start of the body, carried into it.
    Builder top(&body);
    top.set_insertion_point(&body, 0);
    Value *next_iv = top.create1(OpKind::Add, {iv, step}, iv->type, {}, load.loc);
    Value *has_next = top.create1(OpKind::Cmp, {next_iv, ub}, i1, lt, load.loc);
    Value *next = copy_load(top, load, iv, next_iv, has_next, indexed);
    Value *carried = body.add_arg(load.result()->type);
    loop->operands.push_back(first);
    loop->add_result(load.result()->type);
    Op &yield = *body.ops.back();
    yield.operands.push_back(next);
    for (Value *v : {first, next}) users_[v].clear();
    replace_all_uses(body, load.result(), carried);
    return inserted;
  }

  Function &fn_;
  std::unordered_map<const Value *, std::vector<const Op *>> users_;
};

}  // namespace

void prefetch_loop_loads(Function &fn) { Prefetcher(fn).run(); }

}  // namespace tilejit::ir
