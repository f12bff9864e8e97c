// The layouts' textual form, both ways: how the plan passes' and the "lowering" stages write a tile value's
// layout (and the plan's marks) inside its type, and those texts read back into a LoweringPlan, so that the lowering
// can start from a plan whose layouts a test or a person chose (`tilejit ir --input FILE --stage ptx`).
//
//   text    := [header "\n"] (alias "=" layout ["//" comment] "\n")* function   (aliases: "#blocked0 = #blocked<...>")
//   header  := "// the lowering plan " ["up to " pass " "] "for " arch ", " n " warps, " n " stages"
//              [", at least " n " programs per SM"] [", without wgmma"]
//   alias   := "#" [A-Za-z0-9_]+                 (a name followed by '<' is a layout written out, not an alias)
//   note    := (layout | alias) mark*         mark := "remat" | "folded" | "pipelined" | "staged" | "shared"
//              (inside a result's tensor type; marks in any order, each once, "pipelined" and "staged" not both)
//   layout  := blocked | "#slice<dims=" list " of " blocked ">"
//   blocked := "#blocked<spt=" list " tpw=" list " wpc=" list " order=" list ">"     list := "[" n ("," n)* "]"
//
// spt, tpw, wpc are the parent's size_per_thread, threads_per_warp and warps_per_cta per parent dim, order its
// dims fastest first (codegen/layout.h). #slice names, for each tile dim, the parent dim it is; parent dims it
// leaves out are replicated (a reduction's result), and a layout whose tile dims are not the parent's in order
// is written the same way. "remat": the value is recomputed in each user's layout instead of converted. "folded":
// a transpose the dots read from its source (codegen/fold_transposes.h), never materialized. "pipelined": a load
// its loop's software pipeline copies ahead into the stage buffers its dots read; "staged": one copied ahead and
// read from there into registers (codegen/software_pipeline.h). "shared": a loop-invariant dot operand written to
// shared memory of its own once, before its loop (codegen/stage_operands.h). Each mark is a pass's decision: a
// plan up to an earlier pass (the header's "up to") has none of it.
#pragma once
#include <string>
#include <string_view>

#include "codegen/lowering_plan.h"
#include "ir/ir.h"
#include "ir/parser.h"
#include "ir/passes.h"
#include "tilejit/export.h"

namespace tilejit::codegen {

/// l written out ("#blocked<...>" or "#slice<...>", as an alias line of a plan's text defines it).
TILEJIT_EXPORT std::string layout_text(const Layout &l);

/// fn's text with each tile value's layout (and marks) in its type, each distinct layout defined once before the
/// function and named in order of first use ("#blocked0 = #blocked<spt=[1,4] tpw=[8,4] wpc=[4,1] order=[1,0]>",
/// then "tensor<64x64xf32, #blocked0>"), and `comment`'s text after each op (the "lowering" stage's decisions): the
/// plan passes' compile stages without one. The plan is `plan`, or plan_lowering's for opts when it is null. The first
/// line says what the plan was made for, and when it is partial the last pass run ("// the lowering plan up to
/// fold_transposes for sm_90a, 4 warps, 2 stages"; plan_up_to reads it).
TILEJIT_EXPORT std::string print_layouts(const ir::Function &fn, const CodegenOptions &opts,
                                         const ir::OpAnnotator &comment = {}, const LoweringPlan *plan = nullptr);

/// The lowering plan that `notes` (ir::parse's annotations of fn's results) state for opts: every tile result
/// has one; a for loop's carried region arguments take their loop result's. Each layout must be well formed for
/// its value's shape: one entry per parent dim in every list, powers of two, 32 threads per warp, num_warps warps
/// per program, order a permutation of the parent dims, at most max(elements / 2, 1024) of the value's elements per
/// thread (and 8 times that with copies; the compiler's plans stay far below), at most 16 parent dims, a tensor-core
/// dot's result in the MMA layout, aliases resolved, #slice dims distinct parent dims, one per tile dim (a
/// blocked layout names its tile dims in order), "remat" only on values the lowering can recompute (constants,
/// aranges, splats, expansions, broadcasts and elementwise ops), "folded" only on transposes fold_transposes
/// would fold (a text without it keeps the transpose materialized), "pipelined" or "staged" only on loads the
/// software pipeline of their loop takes so for opts (the marked loads are its only candidates: a loop without
/// marks has no pipeline), "shared" only on loop-invariant dot operands stage_operands would stage (the marked
/// ones are its only candidates), "running" only on dots place_waits would leave running (the marked ones are its
/// only candidates). Marks come in any order, each once. The text is a plan after the first `done` passes of
/// plan_passes() (marks of later passes are refused); the passes after it run up to the first `target`
/// (done ≤ target ≤ 5), deciding freely. Throws ParseError naming the line and column of
/// the layout (of the type's '>', for a missing one; of the alias line, for an error inside an alias) and what was
/// expected there.
TILEJIT_EXPORT LoweringPlan read_layouts(const ir::Function &fn, const ir::TypeNotes &notes, const CodegenOptions &opts,
                                         int done = 6, int target = 6);

/// A plan's first line as print_layouts writes it for opts, after the first `passes` plan passes ("// the lowering
/// plan [up to PASS ]for ARCH, W warps, S stages[, at least C programs per SM][, without wgmma]\n").
TILEJIT_EXPORT std::string plan_header(const CodegenOptions &opts, int passes);
/// How many plan passes a plan's text states it is after: 1 to 3 for a header "// the lowering plan up to PASS
/// ..." (print_layouts of a partial plan), 4 for the complete plan's header or none (a hand-written plan). Any
/// comment line mentioning a lowering plan is a header: at most one, before the function, and exactly
/// plan_header(opts, passes) — the arch, warps and stages it names are the ones it is compiled with. Throws
/// ParseError naming the line otherwise.
TILEJIT_EXPORT int plan_up_to(std::string_view text, const CodegenOptions &opts);

}  // namespace tilejit::codegen
