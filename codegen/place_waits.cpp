// Place waits (codegen/place_waits.h): the dot each loop leaves running across its back edge.
#include "codegen/place_waits.h"

#include <fmt/format.h>

#include "codegen/mma.h"
#include "codegen/specialize_warps.h"
#include "tilejit/launch.h"

namespace tilejit::codegen {
namespace {

/// True when `v` is staged in `form` throughout `loop`'s body (before it or an enclosing loop).
bool staged_for_loop(const LoweringPlan &plan, const ir::Op *loop, const ir::Value *v, StagedOperand::Form form) {
  auto in = plan.in_shared.find(loop);
  if (in == plan.in_shared.end()) return false;
  auto it = in->second.find(v);
  return it != in->second.end() && it->second == form;
}

/// The load that `v` is, when `pipe` copies it into a stage buffer its dots read.
const PipelinedLoad *in_stage_buffer(const LoopPipeline *pipe, const ir::Value *v) {
  if (!pipe || !v->def) return nullptr;
  for (const PipelinedLoad &ld : pipe->loads)
    if (ld.load == v->def && !ld.to_registers) return &ld;
  return nullptr;
}

/// Why `dot` cannot be left running (empty when it can), with the function's use counts; `reads_stage_buffers`
/// tells whether it reads an operand from its loop's stage buffers.
std::string refusal(const ir::Function &fn, const LoweringPlan &plan, const ir::Op &dot,
                    const std::unordered_map<const ir::Value *, int> &uses, bool &reads_stage_buffers) {
  if (dot.kind != ir::OpKind::Dot) return "only a dot's wgmmas are left running";
  if (!kernel_uses_wgmma(fn, plan.opts) || !dot_runs_on_wgmma(dot, true, plan.opts.num_warps, plan.folded))
    return "the dot does not run on wgmma";
  const ir::Op *loop = dot.parent ? dot.parent->parent : nullptr;
  if (!loop || loop->kind != ir::OpKind::For) return "the dot is not at the top level of a loop's body";
  const ir::Block &body = *loop->region(0);
  const ir::Op *last = nullptr;
  ir::walk(const_cast<ir::Block &>(body), [&](ir::Op &op) {
    if (op.kind == ir::OpKind::Dot) last = &op;
  });
  if (last != &dot) return "a later dot of the loop's body would have to wait for it";
  if (dot.num_operands() < 3) return "the dot accumulates into nothing the loop carries";
  const ir::Value *acc = dot.operand(2);
  const ir::Op *yield = body.ops.empty() ? nullptr : body.ops.back().get();
  int carried = -1;
  for (int i = 1; i < int(body.args.size()); ++i)
    if (body.arg(i) == acc) carried = i - 1;
  if (carried < 0 || !yield || yield->kind != ir::OpKind::Yield || carried >= yield->num_operands() ||
      yield->operand(carried) != dot.result())
    return "the dot's accumulator is not the loop-carried value it yields";
  auto count = [&](const ir::Value *v) {
    auto it = uses.find(v);
    return it == uses.end() ? 0 : it->second;
  };
  if (count(acc) != 1 || count(dot.result()) != 1)
    return "something else reads the accumulator, which the running wgmmas are still writing";
  if (!(plan.of(acc) == plan.of(dot.result()))) return "the loop carries the accumulator in another layout";
  auto pipe_it = plan.pipelines.find(loop);
  const LoopPipeline *pipe = pipe_it == plan.pipelines.end() ? nullptr : &pipe_it->second;
  const ir::Value *a = dot.operand(0), *b = dot.operand(1);
  if (plan.folded.count(a)) return "its A is a folded transpose, staged in the scratch space at the dot";
  const PipelinedLoad *a_ld = in_stage_buffer(pipe, a);
  const bool a_buffered = a_ld && a_ld->wgmma_a_rows;
  if (!a_buffered && !staged_for_loop(plan, loop, a, StagedOperand::Form::WgmmaA))
    return "its A is not read from shared memory by the wgmmas (the loop's stage buffer or staged before the loop, "
           "in wgmma's row order)";
  const ir::Value *b_source = plan.folded.count(b) ? b->def->operand(0) : b;
  const bool b_buffered = in_stage_buffer(pipe, b_source) != nullptr;
  if (!b_buffered && !staged_for_loop(plan, loop, b, StagedOperand::Form::WgmmaB))
    return "its B is not in the loop's stage buffer or staged before the loop for wgmma";
  reads_stage_buffers = a_buffered || b_buffered;
  // Left running, its stage buffer is still read when the next iteration refills one: the copies run
  // num_stages - 2 iterations ahead. Fewer than two lost on the H200 (bench/results/LEARNED.md, the K loop). A
  // loop a producer warpgroup feeds (specialize_warps) refills a stage as soon as it is released: 3 stages keep
  // one fill ahead of the iteration that runs.
  const bool fed = plan.stated_specialization ? plan.specialized.count(loop) != 0
                                              : why_not_specialized(fn, plan, *loop).empty();
  if (reads_stage_buffers && fed && pipe->stages < kMinStagesLeftRunningFed)
    return fmt::format("its loop is fed by a producer warpgroup with {} stages: a stage it keeps one iteration "
                       "longer leaves the producer none to fill ahead; {} stages or more", pipe->stages,
                       kMinStagesLeftRunningFed);
  if (reads_stage_buffers && !fed && pipe->stages < kMinStagesLeftRunning)
    return fmt::format("its loop's copies would run {} iteration ahead with the {} stages its pipeline has (what "
                       "fits {} bytes; running, the dot keeps its stage buffer one iteration longer); {} stages or "
                       "more keep them two ahead", pipe->stages - 2, pipe->stages, kMaxPipelineBytes,
                       kMinStagesLeftRunning);
  return "";
}

}  // namespace

void place_waits(const ir::Function &fn, LoweringPlan &plan, const std::unordered_set<const ir::Value *> *only) {
  plan.running.clear();
  const auto uses = ir::use_counts(const_cast<ir::Block &>(*fn.body));
  ir::walk(const_cast<ir::Block &>(*fn.body), [&](ir::Op &op) {
    if (op.kind != ir::OpKind::Dot || (only && !only->count(op.result()))) return;
    bool reads_stage_buffers = false;
    if (refusal(fn, plan, op, uses, reads_stage_buffers).empty())
      plan.running[op.parent->parent] = RunningDot{&op, reads_stage_buffers};
  });
}

std::string why_not_running(const ir::Function &fn, const LoweringPlan &plan, const ir::Op &dot) {
  bool reads_stage_buffers = false;
  return refusal(fn, plan, dot, ir::use_counts(const_cast<ir::Block &>(*fn.body)), reads_stage_buffers);
}

std::unordered_set<const ir::Value *> running_dots(const LoweringPlan &plan) {
  std::unordered_set<const ir::Value *> dots;
  for (const auto &[loop, run] : plan.running) dots.insert(run.dot->result());
  return dots;
}

}  // namespace tilejit::codegen
