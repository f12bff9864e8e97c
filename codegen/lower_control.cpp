// Structured control flow. For → an LLVM loop with one phi per register of every carried value (the induction
// variable has the type of the lower bound); If → branches and phis. Conditions and bounds are scalars, which
// every thread of the program holds with the same value, so barriers inside the regions are safe.
#include <algorithm>
#include <fmt/format.h>
#include <llvm/IR/Constants.h>

#include "codegen/lowering.h"
#include "codegen/pipeline.h"
#include "codegen/warp_specialize.h"
#include "codegen/wgmma.h"

namespace tilejit::codegen {
namespace {

const ir::Op *yield_of(const ir::Block &blk) {
  if (blk.ops.empty() || blk.ops.back()->kind != ir::OpKind::Yield) return nullptr;
  return blk.ops.back().get();
}

/// The yielded value i in the layout `like` has (or as a scalar).
Tile yielded(Lowering &L, const ir::Op *y, int i, const ir::Value *like) {
  if (!y || i >= y->num_operands()) L.fail(fmt::format("region does not yield value {}", i));
  const ir::Value *v = y->operand(i);
  if (like->type.is_scalar()) {
    const Tile &t = L.get(v);
    if (!t.is_scalar()) L.fail("a region yields a tile where a scalar is expected");
    return t;
  }
  return L.get_in(v, L.layout_of(like));
}

bool blk_has_dot(const ir::Block &blk) {
  bool dot = false;
  ir::walk(const_cast<ir::Block &>(blk), [&](ir::Op &op) { dot = dot || op.kind == ir::OpKind::Dot; });
  return dot;
}

}  // namespace

LoopRange loop_range(Lowering &L, const ir::Op &for_op) {
  LoopRange r;
  r.lb = L.get(for_op.operand(0)).regs[0];
  llvm::Type *ivt = r.lb->getType();
  if (!ivt->isIntegerTy()) L.fail("loop bounds must be integers");
  r.ub = L.b.CreateSExtOrTrunc(L.get(for_op.operand(1)).regs[0], ivt);
  r.step = L.b.CreateSExtOrTrunc(L.get(for_op.operand(2)).regs[0], ivt);
  auto *cstep = llvm::dyn_cast<llvm::ConstantInt>(r.step);
  r.down = cstep && cstep->isNegative();
  return r;
}

void lower_for(Lowering &L, const ir::Op &op) {
  auto &b = L.b;
  const ir::Block &body = *op.region(0);
  int n = op.num_operands() - 3;
  const LoopRange range = loop_range(L, op);
  llvm::Value *lb = range.lb, *ub = range.ub, *step = range.step;
  llvm::Type *ivt = lb->getType();
  std::vector<Tile> inits;
  for (int i = 0; i < n; ++i) {
    const ir::Value *arg = body.arg(1 + i), *init = op.operand(3 + i);
    inits.push_back(arg->type.is_scalar() ? L.get(init) : L.get_in(init, L.layout_of(arg)));
  }
  const ir::Op *saved = L.cur_op;
  const bool down = range.down;
  auto in_range = [&](llvm::Value *i) { return range.in_range(b, i); };
  // Whether iteration `from` + k·step exists, computed without wrapping around (in i64 for an i32 induction
  // variable): a TMA copy issued for an iteration that does not exist would still be in flight at the loop's exit.
  auto exists_ahead = [&](llvm::Value *from, llvm::Value *at, int64_t k, bool no_wrap) {
    if (!no_wrap || !ivt->isIntegerTy(32)) return in_range(at);
    llvm::Type *w = b.getInt64Ty();
    llvm::Value *far = b.CreateAdd(b.CreateSExt(from, w), b.CreateMul(b.CreateSExt(step, w), b.getInt64(uint64_t(k))));
    return down ? b.CreateICmpSGT(far, b.CreateSExt(ub, w)) : b.CreateICmpSLT(far, b.CreateSExt(ub, w));
  };

  // Software pipeline (codegen/pipeline.h, as plan_pipelines planned it): the prologue issues the first `ahead`
  // iterations. Its stage buffers start where stage_operands placed them: past the scratch in use.
  const LoopPipeline *pipe = nullptr;
  if (auto planned = L.plan.pipelines.find(&op); planned != L.plan.pipelines.end()) pipe = &planned->second;
  // The wgmma dot left running across the back edge (place_waits), and which carried value it accumulates into.
  const ir::Op *running = nullptr;
  int running_index = -1;
  if (auto it = L.plan.running.find(&op); it != L.plan.running.end()) {
    running = it->second.dot;
    for (int i = 0; i < n; ++i)
      if (body.arg(1 + i) == running->operand(2)) running_index = i;
    if (running_index < 0) L.fail("internal: the dot the plan leaves running does not accumulate into a carried value");
  }
  const int ahead = L.plan.lookahead(&op);  // iterations the copies run ahead
  llvm::Value *barriers = nullptr;          // the stages' mbarriers, when TMA copies some load
  // A producer warpgroup fills the stages (codegen/warp_specialize.h): the loop only waits and releases.
  const Lowering::StageBarriers *fed =
      L.plan.specialized.count(&op) ? &L.stage_barriers.at(&op) : nullptr;
  int64_t saved_scratch = L.scratch_offset;
  if (pipe) {
    const int64_t align = stage_buffer_align(L.use_wgmma);  // as stage_operands placed them
    if (pipe->base != align_up(L.scratch_offset, align))
      L.fail(fmt::format("internal: the plan puts a loop's stage buffers at byte {} of the dynamic buffer, where the "
                         "scratch in use ends at byte {}", pipe->base, L.scratch_offset));
    if (L.notes) {
      L.note(fmt::format("{} software pipeline: {} stages of {} bytes, in the dynamic buffer from byte {}{}",
                         !pipe->tma_bytes() ? "cp.async" : pipe->uses_cp_async() ? "TMA and cp.async" : "TMA",
                         pipe->stages, pipe->stage_bytes, pipe->base,
                         fed ? ", filled by the producer warpgroup as the consumers free each stage"
                         : running ? fmt::format(", copied {} ahead (a dot runs on into the next iteration)",
                                                 ahead == 1 ? std::string("one iteration")
                                                            : fmt::format("{} iterations", ahead))
                                   : ""));
      for (const PipelinedLoad &ld : pipe->loads)
        L.note_on(ld.load, ld.to_registers ? "copied ahead with cp.async (4 bytes an element), read from its stage"
                           : ld.tma ? fmt::format("copied ahead by TMA into the stage buffer its dots read (tensor map "
                                                  "{}: {})", ld.tensor_map, tensor_map_text(ld.tma->map))
                                    : "copied ahead with cp.async into the stage buffer its dots read");
    }
    L.barrier();  // earlier readers of the scratch space the stage buffers overlap are done
    L.reserve_smem_total(pipe->end());
    if (pipe->tma_bytes() && !fed) barriers = init_stage_barriers(L, *pipe);
    if (fed) free_all_stages(L, *fed, pipe->stages);  // the producer's first fills may begin
    // Scratch past the stage buffers from here on, the prologue included: a layout conversion while issuing a
    // stage (a gathered index tile, e.g. a paged cache's page numbers) must not overwrite the copies in flight.
    L.scratch_offset = pipe->end();
    for (int s = 0; s < (fed ? 0 : ahead); ++s) {
      llvm::Value *iv_s = b.CreateAdd(lb, b.CreateMul(step, llvm::ConstantInt::get(ivt, uint64_t(s))));
      issue_stage(L, op, *pipe, iv_s, exists_ahead(lb, iv_s, s, barriers != nullptr), L.i32(s), barriers);
    }
    L.cur_op = saved;
  }
  // Loop-invariant dot operands (attention's q) are staged after the prologue's copies are issued: their
  // global loads were issued earlier, so both latencies overlap instead of adding up (3-4% at seqlen 1024).
  // Inside an enclosing loop the staging rewrites what other warps may still be reading from its previous
  // iteration: a barrier first (the pipeline's prologue already has one).
  if (!pipe && L.loop_depth > 0 && blk_has_dot(body)) L.barrier();
  stage_invariant_dot_operands(L, op);
  L.cur_op = saved;
  llvm::BasicBlock *pre = b.GetInsertBlock();
  llvm::BasicBlock *header = L.new_block("for.header"), *loop = L.new_block("for.body"), *exit = L.new_block("for.exit");
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode *iv = b.CreatePHI(ivt, 2, "iv");
  iv->addIncoming(lb, pre);
  std::vector<std::vector<llvm::PHINode *>> phis(static_cast<size_t>(n));
  std::vector<Tile> carried(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    carried[size_t(i)].layout = inits[size_t(i)].layout;
    for (llvm::Value *v : inits[size_t(i)].regs) {
      auto *phi = b.CreatePHI(v->getType(), 2);
      phi->addIncoming(v, pre);
      phis[size_t(i)].push_back(phi);
      carried[size_t(i)].regs.push_back(phi);
    }
  }
  llvm::PHINode *stage = nullptr;  // pipeline: the buffer this iteration reads
  llvm::PHINode *phase = nullptr;  // TMA: the parity of the phase its mbarrier completes for this iteration
  if (pipe) {
    stage = b.CreatePHI(b.getInt32Ty(), 2, "stage");
    stage->addIncoming(L.i32(0), pre);
  }
  if (barriers || fed) {
    phase = b.CreatePHI(b.getInt32Ty(), 2, "phase");
    phase->addIncoming(L.i32(0), pre);
  }
  b.CreateCondBr(in_range(iv), loop, exit);

  b.SetInsertPoint(loop);
  if (fed) {
    wait_stage_barrier(L, fed->full, stage, phase);  // the producer's copies of this iteration have landed
    bind_stage(L, *pipe, stage);
  } else if (pipe) {
    int S = pipe->stages;
    if (pipe->uses_cp_async()) wait_copies(L, ahead - 1);  // this iteration's copies have landed (for this thread)...
    if (barriers) wait_stage_barrier(L, barriers, stage, phase);
    // ...for every thread; and all are done reading the buffer refilled now: the previous iteration's, or with a
    // dot left running the one before (every thread's wgmma.wait_group 1 ended the previous iteration).
    L.barrier();
    // (stage + ahead) mod S, stage < S; one step back written as a compare with 0 (which ptxas allocates best for).
    llvm::Value *refill =
        ahead == S - 1
            ? StageRing{S}.previous(L, stage)
            : b.CreateSelect(b.CreateICmpULT(stage, L.i32(S - ahead)), b.CreateAdd(stage, L.i32(ahead)),
                             b.CreateSub(stage, L.i32(S - ahead)));
    llvm::Value *iv_f = b.CreateAdd(iv, b.CreateMul(step, llvm::ConstantInt::get(ivt, uint64_t(ahead))));
    issue_stage(L, op, *pipe, iv_f, exists_ahead(iv, iv_f, ahead, barriers != nullptr), refill, barriers);
    bind_stage(L, *pipe, stage);
  }
  L.bind(body.arg(0), Tile{std::nullopt, {iv}});
  for (int i = 0; i < n; ++i) L.bind(body.arg(1 + i), carried[size_t(i)]);
  if (running) L.carry_running(body.arg(1 + running_index));
  Lowering::StagedSnapshot staged = L.staged_snapshot();
  ++L.loop_depth;
  L.lower_block(body);
  --L.loop_depth;
  const ir::Op *y = yield_of(body);
  std::vector<Tile> next;
  L.cur_op = y ? y : saved;  // a running dot's result waited for here is the yield's
  for (int i = 0; i < n; ++i) next.push_back(i == running_index ? Tile{} : yielded(L, y, i, body.arg(1 + i)));
  if (running) next[size_t(running_index)] = L.leave_running(running->result());
  L.cur_op = saved;
  // No wgmma group of this iteration may still read the stage buffer the next iteration's refill overwrites (the
  // dot left running reads one the next refill leaves alone). A body without dots leaves the enclosing body's
  // running groups alone: the pending set is then the same whether it ran or not.
  if (blk_has_dot(body)) L.wait_all_wgmma("each iteration ends waiting for the wgmma dots it left running");
  if (fed) {
    // Every wgmma that read this iteration's stage has completed — with a dot left running, the previous
    // iteration's (wgmma.wait_group 1 above), released from the second iteration on.
    const int S = pipe->stages;
    if (running && L.plan.running.at(&op).reads_stage_buffers) {
      llvm::Value *previous = StageRing{S}.previous(L, stage);
      L.emit_if(b.CreateICmpNE(iv, lb), [&] { release_stage(L, *fed, previous); });
    } else {
      release_stage(L, *fed, stage);
    }
  }
  L.forget_staged_since(staged);  // staged in the body (a nested loop's operands): not run when it runs 0 times
  llvm::Value *iv_next = b.CreateAdd(iv, step);
  llvm::BasicBlock *latch = b.GetInsertBlock();
  iv->addIncoming(iv_next, latch);
  if (pipe) {
    stage->addIncoming(StageRing{pipe->stages}.next(L, stage), latch);
  }
  if (phase) phase->addIncoming(StageRing{pipe->stages}.next_phase(L, stage, phase), latch);
  for (int i = 0; i < n; ++i)
    for (size_t r = 0; r < phis[size_t(i)].size(); ++r) phis[size_t(i)][r]->addIncoming(next[size_t(i)].regs[r], latch);
  b.CreateBr(header);

  b.SetInsertPoint(exit);
  if (running) {  // the last iteration's wgmmas (none when the loop ran no iteration)
    L.cur_op = &op;
    if (L.notes) L.note("waits at its exit for the dot it left running (wgmma.wait_group 0)");
    wgmma_wait(L, 0);
    pin_registers(L, carried[size_t(running_index)].regs);
    L.cur_op = saved;
  }
  if (pipe) {
    if (pipe->uses_cp_async()) wait_copies(L, 0);  // copies of iterations past the end must not land in reused shared memory
    if (barriers) retire_stage_barriers(L, *pipe, barriers);  // no TMA copy is in flight: each was waited for
    L.scratch_offset = std::max(saved_scratch, L.persistent_end());
    for (const PipelinedLoad &ld : pipe->loads) {
      L.smem_operands.erase(ld.load->result());
      L.wgmma_stage_a.erase(ld.load->result());
    }
  }
  for (int i = 0; i < n; ++i) L.set(op.result(i), carried[size_t(i)]);
}

void lower_if(Lowering &L, const ir::Op &op) {
  auto &b = L.b;
  const Tile &c = L.get(op.operand(0));
  if (!c.is_scalar()) L.fail("if needs a scalar condition");
  const ir::Op *saved = L.cur_op;
  llvm::BasicBlock *then_bb = L.new_block("if.then"), *else_bb = L.new_block("if.else"), *merge = L.new_block("if.end");
  b.CreateCondBr(c.regs[0], then_bb, else_bb);
  std::vector<std::vector<llvm::Value *>> incoming[2];
  llvm::BasicBlock *ends[2];
  llvm::BasicBlock *starts[2] = {then_bb, else_bb};
  std::vector<Tile> results(size_t(op.num_results()));
  for (int side = 0; side < 2; ++side) {
    b.SetInsertPoint(starts[side]);
    const ir::Block &blk = *op.region(side);
    Lowering::StagedSnapshot staged = L.staged_snapshot();
    L.lower_block(blk);
    L.forget_staged_since(staged);  // staged on one side only: a later loop stages its operands again
    const ir::Op *y = yield_of(blk);
    L.cur_op = y ? y : saved;  // a running dot's result waited for here is the yield's
    for (int i = 0; i < op.num_results(); ++i) {
      Tile t = yielded(L, y, i, op.result(i));
      results[size_t(i)].layout = t.layout;
      incoming[side].push_back(t.regs);
    }
    // Both sides end with what was pending before the if (a region with a dot had everything waited first).
    if (blk_has_dot(blk)) L.wait_all_wgmma("the branch ends waiting for the wgmma dots it left running");
    ends[side] = b.GetInsertBlock();
    b.CreateBr(merge);
  }
  b.SetInsertPoint(merge);
  for (int i = 0; i < op.num_results(); ++i) {
    for (size_t r = 0; r < incoming[0][size_t(i)].size(); ++r) {
      auto *phi = b.CreatePHI(incoming[0][size_t(i)][r]->getType(), 2);
      phi->addIncoming(incoming[0][size_t(i)][r], ends[0]);
      phi->addIncoming(incoming[1][size_t(i)][r], ends[1]);
      results[size_t(i)].regs.push_back(phi);
    }
    L.set(op.result(i), results[size_t(i)]);
  }
}

}  // namespace tilejit::codegen
