// optimize: the standard pipeline. Verifies the input (a failure there is a DSL bug), runs fold, canonicalize,
// convert_before_broadcast, reciprocal_division and reassociate_scalar_factors (unless Exact),
// hoist_invariant_loads, cse, contract_fma (unless Exact) and dce until the printed IR stops changing (bounded:
// the bound is a guard against a rewrite cycle), and verifies the result (a failure there is a pass bug).
#include "ir/passes.h"

namespace tilejit::ir {
namespace {

struct Pass {
  const char *name;
  void (*run)(Function &);
  bool float_rewrite;  // run only with FloatRewrites::Fast
};

// The pipeline, in order. contract_fma runs after CSE: a product CSE shares between uses is computed anyway, so
// it is not fused into one of them.
constexpr Pass kPipeline[] = {
    {"fold_constants", fold_constants, false},
    {"canonicalize", canonicalize, false},
    {"convert_before_broadcast", convert_before_broadcast, false},
    {"reciprocal_division", reciprocal_division, true},
    {"reassociate_scalar_factors", reassociate_scalar_factors, true},
    {"hoist_invariant_loads", hoist_invariant_loads, false},
    {"cse", cse, false},
    {"contract_fma", contract_fma, true},
    {"dce", dce, false},
};

}  // namespace

const std::vector<std::string> &pipeline_stages() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n{"traced"};
    for (const Pass &p : kPipeline) n.emplace_back(p.name);
    n.emplace_back("optimized");
    return n;
  }();
  return names;
}

void optimize(Function &fn, FloatRewrites rewrites, const StageObserver &observe) {
  verify(fn);
  if (observe) observe("traced", fn);
  constexpr int kMaxRounds = 16;
  std::string before = print(fn);
  for (int round = 0; round < kMaxRounds; ++round) {
    for (const Pass &p : kPipeline) {
      if (p.float_rewrite && rewrites != FloatRewrites::Fast) continue;
      p.run(fn);
      if (observe && round == 0) observe(p.name, fn);
    }
    std::string after = print(fn);
    if (after == before) break;
    before = std::move(after);
  }
  verify(fn);
  if (observe) observe("optimized", fn);
}

}  // namespace tilejit::ir
