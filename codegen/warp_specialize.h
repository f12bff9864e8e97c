// Warp specialization's emission (codegen/warp_specialize.cpp; the plan pass is codegen/specialize_warps.h).
#pragma once
#include "codegen/lowering.h"

namespace tilejit::codegen {

/// At the kernel's entry, when plan.specialized is not empty: initializes every specialized loop's full and empty
/// mbarriers (Lowering::stage_barriers), synchronizes all threads, then splits the roles. The producer warpgroup
/// lowers its loops (the ops each needs, then each iteration's wait for its stage and TMA copies) and returns;
/// the consumers continue from the returned insertion point with their registers raised (setmaxnreg).
void begin_warp_specialization(Lowering &L);
/// The consumers reach a specialized loop: each warp frees every stage once (what the producer's first fills wait
/// for).
void free_all_stages(Lowering &L, const Lowering::StageBarriers &bars, int stages);
/// The consumers are done reading `stage` (i32): each warp arrives on its empty mbarrier.
void release_stage(Lowering &L, const Lowering::StageBarriers &bars, llvm::Value *stage);


/// Pingpong (codegen/specialize_warps.h, why_not_pingpong): the turns of the two consumer warpgroups.
/// The second warpgroup hands the first its first turn (at the loop, before its first iteration).
void pingpong_enter(Lowering &L);
/// The first warpgroup takes the turn the second handed over after its last dot (at the loop's exit).
void pingpong_exit(Lowering &L);
/// Before a dot's wgmmas: this warpgroup waits for its turn.
void pingpong_wait_turn(Lowering &L);
/// After a dot's wgmma group is committed: the turn passes to the other warpgroup.
void pingpong_pass_turn(Lowering &L);

}  // namespace tilejit::codegen
