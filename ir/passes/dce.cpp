// dce: removes ops whose results are never used and that have no effect on memory: pure ops, loads, and
// for/if ops whose regions hold no store or atomic; removes unused for-loop carried values (result unused
// and region argument used by nothing but its own slot of the yield) and unused if results. Stores and
// atomics always stay. Repeats until nothing changes, since each removal can make more values unused.
#include <unordered_map>

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
      count_uses_in(*fn_.body);
      visit(*fn_.body);
      uses_.clear();
    } while (changed_);
  }

 private:
  void count_uses_in(Block &b) {
    walk(b, [&](Op &op) {
      for (Value *v : op.operands) ++uses_[v];
    });
  }
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
    if (op.kind == OpKind::Store || op.kind == OpKind::AtomicAdd) return true;
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

  /// Removes carried value k when result k is unused and region arg k+1 feeds nothing but yield slot k.
  void prune_for(Op &op) {
    Block &body = *op.region(0);
    Op &yield = *body.ops.back();
    for (int k = op.num_results() - 1; k >= 0; --k) {
      Value *arg = body.arg(k + 1);
      int self_uses = yield.operand(k) == arg ? 1 : 0;
      if (uses(op.result(k)) || uses(arg) != self_uses) continue;
      uses_[yield.operand(k)] -= 1;
      uses_[op.operand(3 + k)] -= 1;
      yield.operands.erase(yield.operands.begin() + k);
      op.operands.erase(op.operands.begin() + 3 + k);
      op.results.erase(op.results.begin() + k);
      body.args.erase(body.args.begin() + 1 + k);
      changed_ = true;
    }
    renumber(op);
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
