// Fold transposes (codegen/fold_transposes.h).
#include "codegen/fold_transposes.h"

#include <unordered_map>
#include <utility>
#include <vector>

#include "codegen/mma.h"

namespace tilejit::codegen {

namespace {

using Uses = std::unordered_map<const ir::Value *, std::vector<std::pair<const ir::Op *, int>>>;

Uses uses_of(const ir::Function &fn) {
  Uses uses;
  ir::walk(*fn.body, [&](ir::Op &op) {
    for (int i = 0; i < op.num_operands(); ++i) uses[op.operand(i)].push_back({&op, i});
  });
  return uses;
}

bool foldable(const ir::Op &trans, const Uses &uses, int num_warps) {
  const ir::Value *r = trans.result();
  auto it = uses.find(r);
  if (trans.kind != ir::OpKind::Trans || r->type.rank() != 2 || trans.attrs.ints != std::vector<int64_t>{1, 0} ||
      it == uses.end() || it->second.empty())
    return false;
  bool only_a = true, only_b = true;
  for (auto [user, i] : it->second) {
    const bool mma = user->kind == ir::OpKind::Dot && dot_uses_mma(*user, num_warps);
    only_a = only_a && mma && i == 0;
    only_b = only_b && mma && i == 1;
  }
  return only_a || only_b;
}

}  // namespace

void fold_transposes(const ir::Function &fn, int num_warps, LoweringPlan &plan) {
  const Uses uses = uses_of(fn);
  ir::walk(*fn.body, [&](ir::Op &op) {
    if (op.kind == ir::OpKind::Trans && foldable(op, uses, num_warps)) plan.folded.insert(op.result());
  });
}

}  // namespace tilejit::codegen
