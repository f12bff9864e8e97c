// The lowering's plan (codegen/lowering_plan.h).
#include "codegen/lowering_plan.h"

#include <fmt/format.h>

#include "codegen/assign_layouts.h"
#include "codegen/fold_transposes.h"
#include "codegen/software_pipeline.h"
#include "codegen/stage_operands.h"
#include "tilejit/error.h"

namespace tilejit::codegen {

const Layout &LoweringPlan::of(const ir::Value *v) const {
  auto it = layouts.find(v);
  if (it == layouts.end())
    throw CompileError(fmt::format("codegen: no layout was assigned to a value of type {}", v->type.str()));
  return it->second;
}

const PipelinedLoad *LoweringPlan::pipelined(const ir::Op *load) const {
  for (const auto &[loop, p] : pipelines)
    for (const PipelinedLoad &ld : p.loads)
      if (ld.load == load) return &ld;
  return nullptr;
}

LoweringPlan plan_lowering(const ir::Function &fn, const CodegenOptions &opts, const AxisInfoMap *axis) {
  check_num_warps(fn, opts.num_warps);
  LoweringPlan plan = assign_layouts(fn, opts.num_warps);
  plan.opts = opts;
  fold_transposes(fn, opts.num_warps, plan);
  AxisInfoMap computed;
  plan_pipelines(fn, opts, axis ? *axis : (computed = analyze_axis_info(fn)), plan);
  stage_operands(fn, plan);
  return plan;
}

}  // namespace tilejit::codegen
