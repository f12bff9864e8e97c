// dce: removes ops whose results are never used and that have no effect on memory: pure ops, loads, and
// for/if ops whose regions hold no store or atomic; removes for-loop carried values that nothing observable
// depends on (see prune_for) and unused if results. Stores and
// atomics always stay. Repeats until nothing changes, since each removal can make more values unused.
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/passes.h"
#include "ir/passes/pass_utils.h"

namespace tilejit::ir {
namespace {

class Dce {
 public:
  explicit Dce(Function &fn) : fn_(fn) {}

  void run() {
    do {
      changed_ = false;
      uses_ = use_counts(*fn_.body);
      visit(*fn_.body);
    } while (changed_);
  }

 private:
  int uses(const Value *v) const {
    auto it = uses_.find(v);
    return it == uses_.end() ? 0 : it->second;
  }
  bool results_unused(const Op &op) const {
    for (auto &r : op.results)
      if (uses(r.get())) return false;
    return true;
  }
  static bool has_side_effects(const Op &op) {
    if (writes_memory(op.kind)) return true;
    for (auto &r : op.regions)
      for (auto &o : r->ops)
        if (has_side_effects(*o)) return true;
    return false;
  }
  void drop(Block &b, size_t i) {
    walk_operands(*b.ops[i], -1);
    passes::erase_op(b, i);
    changed_ = true;
  }
  /// Adjusts the use counts of every operand of op and of the ops nested in it.
  void walk_operands(Op &op, int delta) {
    for (Value *v : op.operands) uses_[v] += delta;
    for (auto &r : op.regions) walk(*r, [&](Op &o) {
      for (Value *v : o.operands) uses_[v] += delta;
    });
  }

  // Backwards, so that removing an op can make earlier ops of the same block dead in the same sweep.
  void visit(Block &b) {
    for (size_t i = b.ops.size(); i-- > 0;) {
      Op &op = *b.ops[i];
      if (op.kind == OpKind::Yield || has_side_effects(op)) {
        for (auto &r : op.regions) visit(*r);
        if (op.kind == OpKind::For) prune_for(op);
        if (op.kind == OpKind::If) prune_if(op);
        continue;
      }
      if (results_unused(op)) { drop(b, i); continue; }
      for (auto &r : op.regions) visit(*r);
      if (op.kind == OpKind::For) prune_for(op);
      if (op.kind == OpKind::If) prune_if(op);
    }
  }

  static void renumber(Op &op) {
    for (size_t k = 0; k < op.results.size(); ++k) op.results[k]->index = int(k);
    for (auto &r : op.regions)
      for (size_t k = 0; k < r->args.size(); ++k) r->args[k]->index = int(k);
  }

  /// Marks every operand of `op` and of the ops nested in it.
  template <class Mark> static void mark_operands(Op &op, Mark &&mark) {
    for (Value *v : op.operands) mark(v);
    for (auto &r : op.regions) walk(*r, [&](Op &o) {
      for (Value *v : o.operands) mark(v);
    });
  }

  /// Removes the carried values that nothing observable depends on. Carried value k is live when result k
  /// is used after the loop, or when region argument k+1 is needed by the body: by an op with side
  /// effects, or by the yielded value of another live carried value (transitively). Dead ones lose their
  /// init, region argument, yield operand and result; their region argument's remaining uses (ops that
  /// feed only dead values) read the init instead, and become unused for the next sweep.
  void prune_for(Op &op) {
    Block &body = *op.region(0);
    Op &yield = *body.ops.back();
    const int n = op.num_results();
    std::vector<bool> live(size_t(n), false);
    std::unordered_set<const Value *> needed;
    std::vector<const Value *> work;
    auto mark = [&](const Value *v) {
      if (needed.insert(v).second) work.push_back(v);
    };
    for (int k = 0; k < n; ++k)
      if (uses(op.result(k))) { live[size_t(k)] = true; mark(yield.operand(k)); }
    for (auto &o : body.ops)
      if (o.get() != &yield && has_side_effects(*o)) mark_operands(*o, mark);
    while (!work.empty()) {
      const Value *v = work.back();
      work.pop_back();
      if (v->def && v->def->parent == &body) {
        mark_operands(*v->def, mark);
      } else if (!v->def && v->block == &body && v->index > 0 && !live[size_t(v->index - 1)]) {
        live[size_t(v->index - 1)] = true;
        mark(yield.operand(v->index - 1));
      }
    }
    bool pruned = false;
    for (int k = n - 1; k >= 0; --k) {
      if (live[size_t(k)]) continue;
      yield.operands.erase(yield.operands.begin() + k);
      replace_all_uses(body, body.arg(k + 1), op.operand(3 + k));
      op.operands.erase(op.operands.begin() + 3 + k);
      op.results.erase(op.results.begin() + k);
      body.args.erase(body.args.begin() + 1 + k);
      pruned = true;
    }
    if (!pruned) return;
    renumber(op);
    changed_ = true;
    uses_ = use_counts(*fn_.body);
  }

  /// Removes unused results of an if and the matching yield operands of both regions.
  void prune_if(Op &op) {
    for (int k = op.num_results() - 1; k >= 0; --k) {
      if (uses(op.result(k))) continue;
      for (auto &r : op.regions) {
        Op &yield = *r->ops.back();
        uses_[yield.operand(k)] -= 1;
        yield.operands.erase(yield.operands.begin() + k);
      }
      op.results.erase(op.results.begin() + k);
      changed_ = true;
    }
    renumber(op);
  }

  Function &fn_;
  std::unordered_map<const Value *, int> uses_;
  bool changed_ = false;
};

}  // namespace

void dce(Function &fn) { Dce(fn).run(); }

}  // namespace tilejit::ir
