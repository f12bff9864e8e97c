// Software pipelining of a `for` loop's loads with cp.async (sm_80+) or TMA (sm_90, codegen/tma.h): the copies the
// lowering emits for the pipelines plan_pipelines planned (codegen/software_pipeline.h says which loads qualify).
//
// A pipelined load (a tensor-core dot operand of the body, directly or through a folded Trans) is not lowered to
// registers: its tile goes global → shared with
// 16-byte cp.async straight into the swizzled staging the dot reads (with ldmatrix, or by wgmma's descriptor:
// stage buffers are then 1024-byte aligned; an A read by wgmma has its rows copied in wgmma's order). With
// S = num_stages buffers per load, copied A = LoweringPlan::lookahead iterations ahead (S-1; S-2 when a dot of the
// loop is left running into the next iteration, codegen/place_waits.h, whose buffer is then still being read):
//   prologue:     barrier; issue iterations 0..A-1 into buffers 0..A-1 (one commit group each)
//   iteration i:  cp.async.wait_group A-1 (iteration i's group has landed); barrier (its data is visible, and
//                 every thread is done reading buffer (i+A) mod S: (i-1) mod S, or with a running dot
//                 (i-2) mod S, whose wgmmas every thread's wgmma.wait_group 1 completed); issue iteration i+A into
//                 that buffer; the dots (and the staged reads below) read buffer i mod S
//   exit:         cp.async.wait_group 0 (no copy may land in shared memory reused after the loop)
// Iterations past the upper bound and masked-off 16-byte chunks are zero-filled (src-size 0: nothing is
// read from global memory). Pointers and masks of a later iteration are computed by re-lowering their
// address computation (ops of the body that depend only on the induction variable and values from outside
// the loop) with the induction variable advanced.
//
// A load copied by TMA goes the same way, but thread 0 issues its whole tile (one cp.async.bulk.tensor per box)
// after an mbarrier.arrive.expect_tx of the stage's bytes on the stage's mbarrier, and "landed" is every thread's
// wait for that mbarrier's phase (stage i's k-th fill completes phase k, parity k mod 2, which the loop carries).
// A masked-off box element is zero-filled by the copy; an iteration past the upper bound issues nothing. The
// barrier after the wait orders the refill after every thread's reads as for cp.async.
//
// A staged load (a small load read by other ops: a key-major backward's per-query logsumexp and delta) rides in the
// same stages: each element goes global → shared with a 4-byte cp.async issued with its stage, zero-filled where
// masked, and the load is lowered where it stands as a read of this iteration's stage buffer in the result's
// layout (`other` selected where masked). Its global latency and its masked-off branches leave the body's
// critical path; its address arithmetic moves to the stage's issue.
//
// The address slice may also contain unmasked scalar loads (a block-sparse loop's `load(list + i)`): they are
// re-lowered too, executed only when that iteration is in range (0 otherwise).
#pragma once
#include <optional>
#include <vector>

#include "codegen/lowering.h"
#include "codegen/lowering_plan.h"

namespace tilejit::codegen {

/// Issues the copies of the iteration whose induction variable is `iv` into stage `stage` (i32), zero-filled
/// where `valid` (i1) is false, and commits them as one group. Loads copied by TMA are issued by thread 0 on
/// the stage's mbarrier of `barriers` (init_stage_barriers), and not at all for an iteration that is not valid
/// (none reads it). Leaves the induction variable unbound.
void issue_stage(Lowering &L, const ir::Op &for_op, const LoopPipeline &p, llvm::Value *iv, llvm::Value *valid,
                 llvm::Value *stage, llvm::Value *barriers = nullptr);
/// A pipeline with TMA copies (LoopPipeline::tma_bytes): one mbarrier per stage in static shared memory, which
/// thread 0 initializes (arrival count 1: its own arrive.expect_tx) before a barrier. Returns their base.
/// PTX ISA 9.7.13.15 (mbarrier).
llvm::Value *init_stage_barriers(Lowering &L, const LoopPipeline &p);
/// A side-effecting inline-PTX statement `text` with operands `args` ($0, $1, ...; `constraints` as LLVM writes
/// them, a memory clobber included where the statement reads or writes memory).
void inline_ptx(Lowering &L, const std::string &text, const std::string &constraints,
                const std::vector<llvm::Value *> &args = {});
/// A ring of S stage buffers: the stage after `stage` (i32) and the one before it (0 follows S − 1), and the mbarrier
/// phase parity of the next iteration, which flips when the ring wraps.
struct StageRing {
  int stages;
  llvm::Value *next(Lowering &L, llvm::Value *stage) const;
  llvm::Value *previous(Lowering &L, llvm::Value *stage) const;
  llvm::Value *next_phase(Lowering &L, llvm::Value *stage, llvm::Value *phase) const;
};
/// The mbarrier of stage `stage` (i32) in an array of them (new_mbarriers).
llvm::Value *stage_barrier(Lowering &L, llvm::Value *barriers, llvm::Value *stage);
/// mbarrier.init of `count` mbarriers from `barriers`, each expecting `arrivals` arrivals per phase (the caller runs
/// it in one thread, then fence_mbarrier_init and a barrier).
void init_mbarriers(Lowering &L, llvm::Value *barriers, int count, int arrivals);
/// fence.mbarrier_init.release.cluster: the initializations are visible to the threads past the next barrier.
void fence_mbarrier_init(Lowering &L);
/// Unsuccessful mbarrier.try_wait calls after which a wait traps (wait_stage_barrier).
inline constexpr int kMaxBarrierTries = 1 << 24;
/// Every thread waits until stage `stage`'s mbarrier completes the phase of parity `phase` (i32 0 or 1): the
/// stage's TMA copies have landed and are visible to it (mbarrier.try_wait.parity in a loop; a trap after
/// kMaxBarrierTries failures, so that a schedule bug fails the launch instead of hanging it).
void wait_stage_barrier(Lowering &L, llvm::Value *barriers, llvm::Value *stage, llvm::Value *phase);
/// After the loop: a barrier (no thread still waits on them), then thread 0 invalidates the mbarriers
/// (mbarrier.inval), so that a later initialization of the same objects is valid.
void retire_stage_barriers(Lowering &L, const LoopPipeline &p, llvm::Value *barriers);
/// Thread 0 issues the TMA copies of one stage (at byte `stage_off` of the stage buffers) on the stage's mbarrier,
/// when `valid`. Part of issue_stage.
void issue_tma_copies(Lowering &L, const LoopPipeline &p, llvm::Value *stage_off, llvm::Value *valid,
                      llvm::Value *barriers, llvm::Value *stage);
/// Makes the dots and staged reads read stage `stage` (i32) of every pipelined load.
void bind_stage(Lowering &L, const LoopPipeline &p, llvm::Value *stage);
/// The registers of a load staged `to_registers`, read from its buffer of the stage bound last (bind_stage) in
/// the load's layout, `other` where its mask is false.
Tile read_staged_load(Lowering &L, const ir::Op &load);
/// cp.async.wait_group: waits until at most `pending` committed groups of this thread are in flight.
void wait_copies(Lowering &L, int pending);

}  // namespace tilejit::codegen
