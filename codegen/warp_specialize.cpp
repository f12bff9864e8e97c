// Warp specialization (codegen/specialize_warps.h decides; this emits): the producer warpgroup's loops and the
// consumers' waits and releases. PTX ISA 8.5: 9.7.13.15 (mbarrier), 9.7.17.1 (setmaxnreg), 9.7.13.4 (bar.sync
// with a thread count: the consumers synchronize among themselves while the producer runs on).
//
// Per specialized loop and stage s, two mbarriers: full[s] (arrival count 1: the producer's arrive.expect_tx, then
// the TMA copies' bytes) and empty[s] (one arrival per consumer warp). The consumers arrive on every empty[s] once
// when they reach the loop (the buffers are free: whatever they used that memory for before is done), and on the
// stage's empty[s] again once an iteration's wgmmas have read it: iteration i's, or with a dot left running the
// previous iteration's. The producer's iteration j waits for phase ⌊j/S⌋ of empty[j mod S] (the arrival at the
// loop for j < S, the release of iteration j − S after), then fills the stage; the consumers' iteration i waits for
// phase ⌊i/S⌋ of full[i mod S].
#include <fmt/format.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include "codegen/pipeline.h"
#include "codegen/specialize_warps.h"
#include "codegen/warp_specialize.h"

namespace tilejit::codegen {
namespace {

/// One producer loop: for each iteration, wait until the consumers freed its stage, then fill it by TMA.
void producer_loop(Lowering &L, const ir::Op &loop, const Lowering::StageBarriers &bars) {
  auto &b = L.b;
  const LoopPipeline &pipe = L.plan.pipelines.at(&loop);
  const LoopRange range = loop_range(L, loop);  // the consumers' trip count, exactly
  llvm::Value *lb = range.lb, *step = range.step;
  llvm::Type *ivt = lb->getType();
  llvm::BasicBlock *pre = b.GetInsertBlock(), *header = L.new_block("producer.header"),
                   *body = L.new_block("producer.body"), *exit = L.new_block("producer.exit");
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode *iv = b.CreatePHI(ivt, 2, "producer.iv");
  llvm::PHINode *stage = b.CreatePHI(b.getInt32Ty(), 2, "producer.stage");
  llvm::PHINode *phase = b.CreatePHI(b.getInt32Ty(), 2, "producer.phase");
  iv->addIncoming(lb, pre);
  stage->addIncoming(L.i32(0), pre);
  phase->addIncoming(L.i32(0), pre);
  b.CreateCondBr(range.in_range(b, iv), body, exit);
  b.SetInsertPoint(body);
  wait_stage_barrier(L, bars.empty, stage, phase);
  issue_stage(L, loop, pipe, iv, b.getTrue(), stage, bars.full);
  const StageRing ring{pipe.stages};
  iv->addIncoming(b.CreateAdd(iv, step), b.GetInsertBlock());
  stage->addIncoming(ring.next(L, stage), b.GetInsertBlock());
  phase->addIncoming(ring.next_phase(L, stage, phase), b.GetInsertBlock());
  b.CreateBr(header);
  b.SetInsertPoint(exit);
}

}  // namespace

void begin_warp_specialization(Lowering &L) {
  auto &b = L.b;
  const int consumers = L.opts.num_warps;
  // Every specialized loop's mbarriers, initialized by thread 0 before the roles split (all threads synchronize).
  llvm::Value *first = b.CreateICmpEQ(L.tid(), L.i32(0));
  std::vector<const ir::Op *> loops;
  for (const auto &op : L.fn.body->ops)
    if (L.plan.specialized.count(op.get())) loops.push_back(op.get());
  for (const ir::Op *loop : loops) {
    const int S = L.plan.pipelines.at(loop).stages;
    L.stage_barriers[loop] = Lowering::StageBarriers{L.new_mbarriers(S), L.new_mbarriers(S)};
  }
  L.emit_if(first, [&] {
    for (const ir::Op *loop : loops) {
      const Lowering::StageBarriers &bars = L.stage_barriers.at(loop);
      const int S = L.plan.pipelines.at(loop).stages;
      init_mbarriers(L, bars.full, S, 1);
      init_mbarriers(L, bars.empty, S, consumers);
    }
    fence_mbarrier_init(L);
  });
  b.CreateCall(L.intrinsic(llvm::Intrinsic::nvvm_barrier0));  // every thread, the producer's too
  // The producer warpgroup: warps num_warps.. num_warps + 3. Its first thread runs the loops; the rest leave.
  llvm::BasicBlock *producer = L.new_block("producer"), *consumer = L.new_block("consumer");
  b.CreateCondBr(b.CreateICmpUGE(L.warp(), L.i32(consumers)), producer, consumer);
  b.SetInsertPoint(producer);
  const RegisterSplit regs = register_split(L.opts.num_warps, L.opts.min_ctas_per_sm);
  inline_ptx(L, fmt::format("setmaxnreg.dec.sync.aligned.u32 {};", kProducerRegisters), "~{memory}");
  llvm::BasicBlock *issuer = L.new_block("producer.issuer"), *done = L.new_block("producer.done");
  b.CreateCondBr(b.CreateICmpEQ(L.tid(), L.i32(32 * consumers)), issuer, done);
  b.SetInsertPoint(issuer);
  L.tma_issuer = b.getTrue();
  for (const ir::Op *loop : loops) {
    const std::vector<const ir::Op *> ops = producer_ops(L.fn, L.plan, *loop);
    for (const ir::Op *op : ops) {
      L.cur_op = op;
      L.lower_op(*op);
    }
    L.cur_op = loop;
    producer_loop(L, *loop, L.stage_barriers.at(loop));
    for (const ir::Op *op : ops)
      for (int i = 0; i < op->num_results(); ++i) L.forget(op->result(i));
  }
  L.tma_issuer = nullptr;
  L.cur_op = nullptr;
  b.CreateBr(done);
  b.SetInsertPoint(done);
  b.CreateRetVoid();
  b.SetInsertPoint(consumer);
  if (regs.consumer) inline_ptx(L, fmt::format("setmaxnreg.inc.sync.aligned.u32 {};", regs.consumer), "~{memory}");
}

namespace {

/// Lane 0 of each consumer warp arrives on empty[s] for each stage s of `stages`, after every lane's reads of
/// them (bar.warp.sync orders the warp's accesses).
void warps_arrive(Lowering &L, llvm::Value *empty, const std::vector<llvm::Value *> &stages) {
  auto &b = L.b;
  b.CreateCall(L.intrinsic(llvm::Intrinsic::nvvm_bar_warp_sync), {L.i32(-1)});
  L.emit_if(b.CreateICmpEQ(L.lane(), L.i32(0)), [&] {
    for (llvm::Value *s : stages)
      b.CreateCall(L.intrinsic(llvm::Intrinsic::nvvm_mbarrier_arrive_shared), {stage_barrier(L, empty, s)});
  });
}

}  // namespace

void free_all_stages(Lowering &L, const Lowering::StageBarriers &bars, int stages) {
  std::vector<llvm::Value *> all;
  for (int s = 0; s < stages; ++s) all.push_back(L.i32(s));
  warps_arrive(L, bars.empty, all);
}

void release_stage(Lowering &L, const Lowering::StageBarriers &bars, llvm::Value *stage) {
  warps_arrive(L, bars.empty, {stage});
}

}  // namespace tilejit::codegen
