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

}  // namespace tilejit::codegen
