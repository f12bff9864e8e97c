// Specialize warps: the plan pass that decides which loops a producer warpgroup feeds (FlashAttention-3, arXiv
// 2407.08608, 3.1; CUTLASS's warp-specialized sm90 mainloops). With CodegenOptions::warp_specialize, a kernel
// whose dots run on wgmma gets one more warpgroup: its first thread runs, from the kernel's start, the loops
// below issuing their TMA copies into the loop's ring of num_stages buffers, while the num_warps consumer warps run
// the kernel as before but never copy: each iteration waits for its stage's "full" mbarrier (the copies landed)
// and, once its wgmmas have read the stage, each consumer warp arrives on the stage's "empty" mbarrier, which the
// producer waits for before it refills the buffer. Registers move to the consumers with setmaxnreg (PTX ISA
// 9.7.17.1): the producer warpgroup keeps kProducerRegisters, the consumers share the rest.
//
// A loop qualifies when it stands at the top level of the kernel's body (it runs once), its software pipeline
// copies every load by TMA (codegen/tma.h), and what the producer needs — the loop's bounds and step and its
// copies' coordinates — is computed from parameters, program ids, constants, scalar loads and pure ops, without
// any other load of a tile. Pure; no LLVM.
#pragma once
#include <string>
#include <unordered_set>

#include "codegen/lowering_plan.h"
#include "ir/ir.h"

namespace tilejit::codegen {

/// Registers per thread the producer warpgroup keeps (setmaxnreg.dec).
inline constexpr int kProducerRegisters = 40;

/// Fills plan.specialized for fn (plan's other passes done). With `only`, only loops in it (a text's "specialized"
/// marks; the caller checks that each was taken).
TILEJIT_EXPORT void specialize_warps(const ir::Function &fn, LoweringPlan &plan, const std::unordered_set<const ir::Op *> *only = nullptr);

/// Why specialize_warps does not specialize `loop` with plan's other decisions (the reason a "specialized" mark is
/// refused); empty when it does.
TILEJIT_EXPORT std::string why_not_specialized(const ir::Function &fn, const LoweringPlan &plan, const ir::Op &loop);

/// The ops outside `loop` (at the top level of fn's body, in order) that the producer computes for it: what its
/// bounds, step and copies' addresses depend on. Empty with a reason in `why` when one of them is not pure or a
/// scalar load.
TILEJIT_EXPORT std::vector<const ir::Op *> producer_ops(const ir::Function &fn, const LoweringPlan &plan, const ir::Op &loop,
                                         std::string *why = nullptr);

/// How a warp-specialized kernel of `num_warps` consumer warps at `min_ctas_per_sm` programs per SM (0: 1) splits its
/// registers. A program starts with `entry` registers per thread, the cap ptxas derives from .maxntid (the consumers
/// and the producer warpgroup) and .minnctapersm: 64K per SM shared by the programs, a multiple of 8, at most 255.
/// setmaxnreg moves registers only within the program's own pool (PTX ISA 9.7.17.1: .inc blocks until the pool has
/// them): the producer warpgroup gives back entry − kProducerRegisters each (allocated in multiples of 8), which the
/// consumers share: `consumer`, at most 256, 0 when no raise is possible (no setmaxnreg.inc then).
struct RegisterSplit {
  int entry = 0, consumer = 0;
};
TILEJIT_EXPORT RegisterSplit register_split(int num_warps, int min_ctas_per_sm);
/// The fewest registers per thread a program must start with to be warp-specialized: ptxas checks each wgmma's
/// accumulators against the entry count (C7602 "insufficient registers" below it), whatever setmaxnreg raises later.
inline constexpr int kMinEntryRegisters = 128;

/// Whether `num_warps` consumer warps at `min_ctas_per_sm` programs per SM have room for the producer warpgroup:
/// whole warpgroups, at most 32 warps with it, and at least kMinEntryRegisters per thread at entry.
TILEJIT_EXPORT bool producer_warpgroup_fits(int num_warps, int min_ctas_per_sm);

}  // namespace tilejit::codegen
