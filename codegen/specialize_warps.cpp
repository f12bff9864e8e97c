// Specialize warps (codegen/specialize_warps.h).
#include "codegen/specialize_warps.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "codegen/mma.h"
#include "codegen/software_pipeline.h"

namespace tilejit::codegen {
namespace {

// Consumers in whole warpgroups (wgmma's unit), and the producer warpgroup within a block's 32 warps.
bool whole_warpgroups_with_producer(int num_warps) {
  return num_warps > 0 && num_warps % 4 == 0 && num_warps + kProducerWarps <= 32;
}

bool producer_may_compute(const ir::Op &op) {
  if (op.kind == ir::OpKind::ProgramId || op.kind == ir::OpKind::NumPrograms) return true;
  if (op.kind == ir::OpKind::Load) return op.result()->type.is_scalar();  // a scalar load (cu_seqlens, a count)
  return relowerable(op.kind);
}

}  // namespace

std::vector<const ir::Op *> producer_ops(const ir::Function &fn, const LoweringPlan &plan, const ir::Op &loop,
                                         std::string *why) {
  auto refuse = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return std::vector<const ir::Op *>{};
  };
  auto pipe = plan.pipelines.find(&loop);
  if (pipe == plan.pipelines.end()) return refuse("the loop has no software pipeline");
  const ir::Block &body = *loop.region(0);
  // What the producer reads: the bounds and step, and what the pipeline's scalar slice (the TMA copies'
  // coordinates; issue_stage lowers only scalars for a loop without cp.async) reads from outside the loop.
  std::vector<const ir::Value *> needed{loop.operand(0), loop.operand(1), loop.operand(2)};
  for (const ir::Op *op : pipe->second.slice)
    if (op->num_results() == 1 && op->result()->type.is_scalar())
      for (const ir::Value *v : op->operands)
        if (!(v->def && v->def->parent == &body) && v != body.arg(0)) needed.push_back(v);
  // And the coordinates' terms themselves where they come from outside the loop (a program id times a block).
  for (const PipelinedLoad &ld : pipe->second.loads)
    if (ld.tma)
      for (const ScalarSum &start : ld.tma->start)
        for (auto [v, m] : start.terms)
          if (!(v->def && v->def->parent == &body) && v != body.arg(0)) needed.push_back(v);
  std::unordered_set<const ir::Op *> chosen;
  std::string refused;
  std::function<bool(const ir::Value *)> take = [&](const ir::Value *v) -> bool {
    if (!v->def) {
      if (v->block == fn.body.get()) return true;  // a parameter
      refused = "it reads an argument of an enclosing region";
      return false;
    }
    const ir::Op *d = v->def;
    if (chosen.count(d)) return true;
    if (d->parent != fn.body.get()) {
      refused = fmt::format("{} at {} is inside another region", ir::op_name(d->kind), d->loc.str());
      return false;
    }
    if (!producer_may_compute(*d)) {
      refused = fmt::format("it reads the {} at {}, which the producer cannot compute (only parameters, program ids, "
                            "scalar loads and pure ops)", ir::op_name(d->kind), d->loc.str());
      return false;
    }
    chosen.insert(d);
    for (const ir::Value *o : d->operands)
      if (!take(o)) return false;
    return true;
  };
  for (const ir::Value *v : needed)
    if (!take(v)) return refuse(refused);
  std::vector<const ir::Op *> ops;
  bool wrote = false;  // a store or atomic before the loop, which the producer's loads would not wait for
  for (const auto &op : fn.body->ops) {
    if (op.get() == &loop) break;
    if (chosen.count(op.get())) {
      if (op->kind == ir::OpKind::Load && wrote)
        return refuse(fmt::format("it reads the load at {}, after the kernel writes memory (the producer does not wait "
                                  "for the consumers' stores)", op->loc.str()));
      ops.push_back(op.get());
    }
    auto writes = [](const ir::Op &o) { return o.kind == ir::OpKind::Store || o.kind == ir::OpKind::AtomicAdd; };
    wrote = wrote || writes(*op);
    for (const auto &region : op->regions)
      ir::walk(*region, [&](ir::Op &o) { wrote = wrote || writes(o); });
  }
  return ops;
}

std::string why_not_specialized(const ir::Function &fn, const LoweringPlan &plan, const ir::Op &loop) {
  const CodegenOptions &o = plan.opts;
  if (!o.warp_specialize) return "warp specialization is off (LaunchConfig::warp_specialize, --warp-specialize)";
  if (!kernel_uses_wgmma(fn, o)) return "only a kernel whose dots run on wgmma (sm_90a) is warp-specialized";
  if (!producer_warpgroup_fits(o.num_warps, o.min_ctas_per_sm)) {
    if (!whole_warpgroups_with_producer(o.num_warps))
      return fmt::format("{} warps do not make whole warpgroups with room for a producer warpgroup", o.num_warps);
    return fmt::format("{} consumer warps and a producer warpgroup at {} programs per SM start with {} registers per "
                       "thread, fewer than the {} a wgmma kernel needs", o.num_warps, std::max(1, o.min_ctas_per_sm),
                       register_split(o.num_warps, o.min_ctas_per_sm).entry, kMinEntryRegisters);
  }
  if (loop.kind != ir::OpKind::For || loop.parent != fn.body.get())
    return "only a loop at the top level of the kernel's body (it runs once) is fed by the producer";
  bool carries_tile = false;
  for (int i = 0; i < loop.num_results(); ++i) carries_tile = carries_tile || !loop.result(i)->type.is_scalar();
  if (!carries_tile) return "the loop carries no tile, where the plan's text would state the decision";
  auto pipe = plan.pipelines.find(&loop);
  if (pipe == plan.pipelines.end()) return "the loop has no software pipeline";
  if (!pipe->second.tma_bytes() || pipe->second.uses_cp_async())
    return "the producer issues TMA copies only: every load of the loop's pipeline must be copied by TMA";
  std::string why;
  if (producer_ops(fn, plan, loop, &why).empty() && !why.empty()) return why;
  return "";
}

void specialize_warps(const ir::Function &fn, LoweringPlan &plan, const std::unordered_set<const ir::Op *> *only) {
  plan.specialized.clear();
  if (!plan.opts.warp_specialize) return;
  for (const auto &op : fn.body->ops) {
    if (op->kind != ir::OpKind::For || (only && !only->count(op.get()))) continue;
    if (why_not_specialized(fn, plan, *op).empty()) plan.specialized.insert(op.get());
  }
}

bool producer_warpgroup_fits(int num_warps, int min_ctas_per_sm) {
  return whole_warpgroups_with_producer(num_warps) &&
         register_split(num_warps, min_ctas_per_sm).entry >= kMinEntryRegisters;
}

RegisterSplit register_split(int num_warps, int min_ctas_per_sm) {
  const int ctas = std::max(1, min_ctas_per_sm), threads = 32 * (num_warps + kProducerWarps);
  RegisterSplit r;
  r.entry = std::min(255, 65536 / (ctas * threads) / 8 * 8);
  const int allocated = (r.entry + 7) / 8 * 8;  // 255 is allocated as 256
  if (allocated <= kProducerRegisters) return r;
  const int freed = 128 * (allocated - kProducerRegisters);  // the producer warpgroup's, per program
  const int raised = std::min(256, allocated + freed / (32 * num_warps) / 8 * 8);
  if (raised > allocated) r.consumer = raised;
  return r;
}

}  // namespace tilejit::codegen
