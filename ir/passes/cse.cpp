// cse: a pure op identical to an earlier one that dominates it (same kind, operands, attributes and
// result types; earlier in the same block or in an enclosing block) is replaced by that earlier op.
// Loads are never merged (a store may sit between them), nor stores, atomics, for, if or yield.
#include <fmt/format.h>

#include <bit>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/passes.h"
#include "ir/passes/pass_utils.h"

namespace tilejit::ir {
namespace {

/// Everything that makes two pure ops compute the same value. Attribute fields an op does not read are
/// included too: that only ever misses a merge, never makes a wrong one.
std::string op_key(const Op &op) {
  std::string k = fmt::format("{}|", int(op.kind));
  for (const Value *v : op.operands) k += fmt::format("{}", static_cast<const void *>(v)) + ",";
  const Attrs &a = op.attrs;
  // fvalue by bit pattern: -0.0 and +0.0 are different constants, and NaN equals itself.
  k += fmt::format("|{}|{}|{:x}|{}|{}|{}|{}|", a.axis, a.ivalue, std::bit_cast<uint64_t>(a.fvalue),
                   fmt::join(a.ints, ","), int(a.pred), int(a.reduce), a.flag);
  for (auto &r : op.results) k += r->type.str() + ";";
  return k;
}

class Cse {
 public:
  explicit Cse(Function &fn) : fn_(fn) {}
  void run() { visit(*fn_.body); }

 private:
  Op *lookup(const std::string &key) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(key);
      if (f != it->end()) return f->second;
    }
    return nullptr;
  }

  void visit(Block &b) {
    scopes_.emplace_back();
    for (size_t i = 0; i < b.ops.size();) {
      Op &op = *b.ops[i];
      // Uses come after their definition in this walk (SSA dominance; regions are visited inside their op),
      // so rewriting each op's operands as it is reached replaces every use of a merged op's results in one
      // pass over the function, instead of a walk of the whole function per merge.
      for (Value *&o : op.operands)
        if (auto it = replaced_.find(o); it != replaced_.end()) o = it->second;
      if (is_pure(op.kind) && op.regions.empty() && op.num_results() > 0) {
        std::string key = op_key(op);
        if (Op *prev = lookup(key)) {
          for (int r = 0; r < op.num_results(); ++r) replaced_[op.result(r)] = prev->result(r);
          passes::erase_op(b, i);
          continue;
        }
        scopes_.back().emplace(std::move(key), &op);
      }
      for (auto &r : op.regions) visit(*r);
      ++i;
    }
    scopes_.pop_back();
  }

  Function &fn_;
  std::vector<std::unordered_map<std::string, Op *>> scopes_;
  std::unordered_map<const Value *, Value *> replaced_;  // results of merged (erased) ops → the kept op's
};

}  // namespace

void cse(Function &fn) { Cse(fn).run(); }

}  // namespace tilejit::ir
