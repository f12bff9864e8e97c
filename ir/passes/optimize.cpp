// optimize: the standard pipeline. Verifies the input (a failure there is a DSL bug), runs fold, canonicalize,
// convert_before_broadcast, reciprocal_division and reassociate_scalar_factors (unless Exact),
// hoist_invariant_loads, cse, contract_fma (unless Exact) and dce until the printed IR stops changing (bounded:
// each round only shrinks, simplifies or hoists, the bound is a guard against a rewrite cycle), and verifies the
// result (a failure there is a pass bug).
#include "ir/passes.h"

namespace tilejit::ir {

void optimize(Function &fn, FloatRewrites rewrites) {
  verify(fn);
  constexpr int kMaxRounds = 16;
  std::string before = print(fn);
  for (int round = 0; round < kMaxRounds; ++round) {
    fold_constants(fn);
    canonicalize(fn);
    convert_before_broadcast(fn);
    if (rewrites == FloatRewrites::Fast) {
      reciprocal_division(fn);
      reassociate_scalar_factors(fn);
    }
    hoist_invariant_loads(fn);
    cse(fn);
    // After CSE: a product it shares between uses is computed anyway, so it is not fused into one of them.
    if (rewrites == FloatRewrites::Fast) contract_fma(fn);
    dce(fn);
    std::string after = print(fn);
    if (after == before) break;
    before = std::move(after);
  }
  verify(fn);
}

}  // namespace tilejit::ir
