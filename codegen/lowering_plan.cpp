// The lowering's plan (codegen/lowering_plan.h).
#include "codegen/lowering_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "codegen/assign_layouts.h"
#include "codegen/fold_transposes.h"
#include "codegen/place_waits.h"
#include "codegen/specialize_warps.h"
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

int64_t LoopPipeline::tma_bytes() const {
  int64_t bytes = 0;
  for (const PipelinedLoad &ld : loads)
    if (ld.tma) bytes += ld.rows * ld.cols * 2;
  return bytes;
}

bool LoopPipeline::uses_cp_async() const {
  return std::any_of(loads.begin(), loads.end(), [](const PipelinedLoad &ld) { return !ld.tma; });
}

int LoweringPlan::lookahead(const ir::Op *loop) const {
  auto it = pipelines.find(loop);
  if (it == pipelines.end()) return 0;
  auto run = running.find(loop);
  return it->second.stages - 1 - int(run != running.end() && run->second.reads_stage_buffers);
}

const std::vector<std::string> &plan_passes() {
  static const std::vector<std::string> passes{"assign_layouts", "fold_transposes", "software_pipeline",
                                               "stage_operands", "place_waits", "specialize_warps"};
  return passes;
}

namespace {

LoweringPlan plan_passes_up_to(const ir::Function &fn, const CodegenOptions &opts, const AxisInfoMap *axis,
                               int passes) {
  check_num_warps(fn, opts.num_warps);
  LoweringPlan plan = assign_layouts(fn, opts.num_warps);
  plan.opts = opts;
  plan.passes = passes;
  if (passes >= 2) fold_transposes(fn, opts.num_warps, plan);
  AxisInfoMap computed;
  if (passes >= 3) plan_pipelines(fn, opts, axis ? *axis : (computed = analyze_axis_info(fn)), plan);
  if (passes >= 4) stage_operands(fn, plan);
  if (passes >= 5) place_waits(fn, plan);
  if (passes >= 6) specialize_warps(fn, plan);
  return plan;
}

}  // namespace

LoweringPlan plan_lowering(const ir::Function &fn, const CodegenOptions &opts, const AxisInfoMap *axis) {
  return plan_passes_up_to(fn, opts, axis, int(plan_passes().size()));
}

LoweringPlan plan_lowering_up_to(const ir::Function &fn, const CodegenOptions &opts, int passes) {
  if (passes < 1 || passes > int(plan_passes().size()))
    throw CompileError(fmt::format("codegen: a lowering plan has 1 to {} passes, not {}", plan_passes().size(), passes));
  return plan_passes_up_to(fn, opts, nullptr, passes);
}

}  // namespace tilejit::codegen
