// The stages of a kernel's compilation, from the tile IR its trace builds to PTX. Each can be printed for a
// built-in kernel (`tilejit ir KERNEL --stage NAME`), and TILEJIT_DUMP_STAGES=<dir> writes every stage of every
// kernel a process traces or compiles: <dir>/<kernel>-<hash of its optimized tile IR>/ holds NN-<stage>.tir for
// the tile-IR stages (written when the kernel is traced) and <pass>-<config>.tir for each plan pass,
// lowering-<config>.tir, llvm-<config>.ll and ptx-<config>.ptx for each configuration compiled to PTX (<config>: arch, warps, pipeline stages, programs per
// SM; a kernel found in the disk cache is not compiled again).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "tilejit/launch.h"

namespace tilejit {

/// The stages in order: "traced" (the tile IR as the trace built it), each pass of the tile IR's optimization
/// pipeline by its name (the IR after that pass's first run; the pipeline repeats until nothing changes),
/// "optimized" (what the back ends get), then each pass of the lowering's plan by its name, printing the optimized
/// IR with the plan so far in its types (codegen/lowering_plan.h; the first line names the last pass run when it
/// is not the last): "assign_layouts" (each tile value's distributed layout, named by an alias defined before the
/// function: which threads and registers hold which elements; values recomputed per use, "remat"),
/// "fold_transposes" (transposes the dots read from their source, "folded"), "software_pipeline" (loads a loop's
/// cp.async pipeline copies ahead, "pipelined", "staged"), "stage_operands" (loop-invariant dot operands written
/// to shared memory once before their loop, "shared": the whole plan, as the lowering follows it); "lowering" (the same with what the lowering
/// decided after each op: each dot's tensor-core instruction and operand sources, each loop's cp.async pipeline
/// and the loads it copies ahead, where each shared-memory buffer lies, where a running wgmma dot is waited for,
/// layout conversions), "llvm" (the LLVM IR as lowered, before LLVM's optimizations) and "ptx".
std::vector<std::string> compile_stages();

/// Stage `stage` (one of compile_stages()) of the kernel whose tile IR `tir` holds, as any tile-IR stage prints
/// it (`tilejit ir --input FILE`: pass tests and experiments start from text): "traced" is the text read back,
/// each pass's stage the IR after that pass's first run of the pipeline from there, "optimized" its fixed point,
/// and the plan passes', "lowering", "llvm" and "ptx" that compiled for cfg's arch (empty: sm_90a), num_warps,
/// num_stages, min_ctas_per_sm and tma. Float rewrites as kernels get them (not KernelOptions::exact_floats). A text
/// with layouts in its types (a plan pass's or the "lowering" stage) is past the tile IR's passes: it is lowered with
/// the plan it states — every tile value's layout (well formed for its shape and num_warps), and only the
/// transposes, loads and operands it marks folded, pipelined (tma: copied by TMA), staged or shared (a text without marks gets no folded
/// transpose, no software pipeline and no operand staged before a loop), the plan passes after the one its first
/// line names ("// the lowering plan up to PASS ...", print_layouts; none: all have run) deciding freely from there —
/// and only the stages from that pass on may
/// be asked of it.
/// Throws ParseError (the line, the column and what was expected; a layout's too), VerifyError for a text that parses to broken IR,
/// Error for an unknown stage (naming the stages) or a num_warps / num_stages a launch would refuse, and
/// CompileError as compiling does.
std::string stage_of_text(std::string_view tir, const std::string &stage, const LaunchConfig &cfg = {});

}  // namespace tilejit
