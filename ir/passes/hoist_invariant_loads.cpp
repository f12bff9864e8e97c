// hoist_invariant_loads: a load inside a for loop whose address, mask and `other` do not change across
// iterations is moved in front of the loop, together with the pure ops that compute them, when nothing in
// the loop writes memory (no store or atomic anywhere in its body). A flex score_mod's `slope[h]` or a
// mask_mod's `doc[q_idx]` is traced inside the key-block loop; LLVM cannot hoist it there because the
// loop's cp.async copies and barriers are opaque to it, so it would be re-read every iteration.
//
// The hoisted load runs even when the loop runs zero times, where the original never ran (and its pointer
// may be invalid, e.g. a program with no key block): its mask gains `lb < ub`, so then it reads nothing.
// Only loops with a positive constant step are handled (the DSL's for_range steps are positive). Integer
// division and remainder by a non-constant stay in the loop (they fault on zero).
#include <unordered_set>

#include "ir/builder.h"
#include "ir/passes.h"
#include "ir/passes/pass_utils.h"

namespace tilejit::ir {
namespace {

bool writes_memory(Block &b) {
  bool w = false;
  walk(b, [&](Op &op) { w |= writes_memory(op.kind); });
  return w;
}

/// Integer division and remainder fault on a zero divisor (the interpreter throws; LLVM calls it undefined):
/// moved out of a loop that runs zero times, `m / n` with n = 0 would run where it never did. Only a
/// nonzero constant divisor is safe to hoist.
bool may_trap(const Op &op) {
  if (op.kind != OpKind::Div && op.kind != OpKind::Rem) return false;
  const Value *d = op.operand(1);
  if (d->type.is_ptr() || is_float(d->type.dtype())) return false;
  auto c = passes::constant_of(d);
  return !c || c->i == 0;
}

class Hoister {
 public:
  explicit Hoister(Function &fn) : fn_(fn) {}
  void run() { visit(*fn_.body); }

 private:
  void visit(Block &b) {
    for (size_t i = 0; i < b.ops.size(); ++i) {
      for (auto &r : b.ops[i]->regions) visit(*r);  // inner loops first: their hoisted loads may move on out
      if (b.ops[i]->kind == OpKind::For) i += hoist_from(b, i);
    }
  }

  static bool positive_constant_step(const Op &loop) {
    auto c = passes::constant_of(loop.operand(2));
    return c && !c->is_float && c->i > 0;
  }

  /// Hoists what it can from the loop at b.ops[i] to just before it; returns the number of ops inserted.
  size_t hoist_from(Block &b, size_t i) {
    Op &loop = *b.ops[i];
    Block &body = *loop.region(0);
    if (!positive_constant_step(loop) || writes_memory(body)) return 0;

    // Ops of the body's top level computed only from values defined outside the loop (or by such ops).
    std::unordered_set<const Op *> invariant;
    auto outside_or_invariant = [&](const Value *v) {
      if (!v->def) return v->block != &body;  // the loop's own iv and carried values vary
      if (invariant.count(v->def)) return true;
      for (const Block *p = v->def->parent; p; p = p->parent ? p->parent->parent : nullptr)
        if (p == &body) return false;  // defined in the body (or nested in it) and not invariant
      return true;
    };
    for (auto &op : body.ops) {
      bool candidate = op->regions.empty() && op->kind != OpKind::Yield && op->kind != OpKind::Dot &&
                       !may_trap(*op) && (is_pure(op->kind) || (reads_memory(op->kind) && !writes_memory(op->kind)));
      if (!candidate) continue;
      bool ok = true;
      for (const Value *v : op->operands) ok &= outside_or_invariant(v);
      if (ok) invariant.insert(op.get());
    }

    // The invariant loads and, transitively, the invariant ops they read.
    std::unordered_set<const Op *> needed;
    std::vector<const Op *> work;
    for (auto &op : body.ops)
      if (op->kind == OpKind::Load && invariant.count(op.get())) work.push_back(op.get());
    while (!work.empty()) {
      const Op *op = work.back();
      work.pop_back();
      if (!needed.insert(op).second) continue;
      for (const Value *v : op->operands)
        if (v->def && invariant.count(v->def)) work.push_back(v->def);
    }
    if (needed.empty()) return 0;

    // Move them, in program order, in front of the loop.
    std::vector<std::unique_ptr<Op>> moved;
    for (size_t k = 0; k < body.ops.size();) {
      if (needed.count(body.ops[k].get())) {
        moved.push_back(std::move(body.ops[k]));
        body.ops.erase(body.ops.begin() + long(k));
      } else {
        ++k;
      }
    }
    size_t at = i;
    Builder ib(&b);
    ib.set_insertion_point(&b, at);
    Type i1{{}, ElemType{DType::i1, false}};
    Attrs lt;
    lt.pred = CmpPred::lt;
    Value *runs = ib.create1(OpKind::Cmp, {loop.operand(0), loop.operand(1)}, i1, lt, loop.loc);
    at = ib.position();
    size_t inserted = at - i;
    for (auto &op : moved) {
      op->parent = &b;
      Op *raw = op.get();
      b.ops.insert(b.ops.begin() + long(at), std::move(op));
      ++at;
      ++inserted;
      if (raw->kind == OpKind::Load) {
        ib.set_insertion_point(&b, at - 1);
        const Type &t = raw->result()->type;
        Value *m = runs;
        if (!t.is_scalar()) m = ib.create1(OpKind::Splat, {runs}, Type{t.shape, ElemType{DType::i1, false}}, {}, raw->loc);
        if (raw->num_operands() >= 2)
          m = ib.create1(OpKind::And, {raw->operand(1), m}, raw->operand(1)->type, {}, raw->loc);
        size_t added = ib.position() - (at - 1);
        at += added;
        inserted += added;
        if (raw->num_operands() >= 2) raw->operands[1] = m;
        else raw->operands.push_back(m);
      }
    }
    return inserted;
  }

  Function &fn_;
};

}  // namespace

void hoist_invariant_loads(Function &fn) { Hoister(fn).run(); }

}  // namespace tilejit::ir
