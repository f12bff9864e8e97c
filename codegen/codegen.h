// GPU code generation: tile IR → LLVM IR (NVVM intrinsics) → PTX through LLVM's NVPTX backend.
// This header includes no LLVM header.
#pragma once
#include <string>
#include <vector>

#include "ir/ir.h"
#include "tilejit/export.h"

namespace tilejit::codegen {

struct LoweringPlan;  // codegen/lowering_plan.h

struct CodegenOptions {
  std::string arch = "sm_90a";  // sm_70, sm_72, sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a
  int num_warps = 4;            // power of two in [1, 32]
  int num_stages = 1;           // ≥ 2: cp.async software pipeline of loops' dot operand loads (codegen/pipeline.h), sm_80+
  bool wgmma = true;            // sm_90a: tensor-core dots whose B operand is staged in shared memory use wgmma
                                // (codegen/wgmma.h) instead of mma.sync; false keeps mma.sync everywhere (the
                                // runtime sets it from TILEJIT_DISABLE_WGMMA, a debugging switch)
  int min_ctas_per_sm = 0;      // ≥ 1: .minnctapersm (with .maxntid): registers capped so this many fit per SM
  bool tma = false;             // sm_90+ with wgmma: pipelined loads that are affine tiles of a 2-D tensor are copied
                                // by the Tensor Memory Accelerator (codegen/tma.h) instead of cp.async
  bool warp_specialize = false; // with tma: a producer warpgroup issues the copies of the loops that qualify
                                // (codegen/specialize_warps.h); the kernel then runs num_warps + 4 warps
};

/// Kernel ABI (what the runtime passes): one .param per ir::Function param, in order: pointers as 64-bit
/// device addresses (.u64), i32/i64/f32 scalars by value in their natural size. Launch with a 1-D block of
/// num_threads threads, the grid = programs (program_id(a) = %ctaid.{x,y,z}), and shared_bytes of dynamic
/// shared memory. Loop-invariant dot operands additionally use static shared memory (at most 44 KB, declared
/// in the PTX, so the driver accounts for it; the launch only provides shared_bytes); past that they are
/// staged in the dynamic buffer (in shared_bytes), unless the block would then exceed the arch's shared memory.
struct PtxResult {
  std::string ptx;            // PTX text (.version 8.5)
  std::string entry;          // the .entry name (the kernel's function name, sanitized)
  int shared_bytes = 0;       // dynamic shared memory the launch must provide (may exceed 48 KB)
  int num_threads = 128;      // 32 · num_warps
  /// The tensor maps (tensor_map_text of each, codegen/tma.h) the launch passes after fn's parameters: each a
  /// 128-byte .param aligned to 64 bytes holding cuTensorMapEncodeTiled's CUtensorMap.
  std::vector<std::string> tensor_maps;
};

/// 90 for "sm_90a", 80 for "sm_80": the digits of an arch name.
int sm_version(const std::string &arch);
/// Throws CompileError naming fn unless num_warps is a power of two in [1, 32].
TILEJIT_EXPORT void check_num_warps(const ir::Function &fn, int num_warps);
/// Lowers `fn` to LLVM IR, runs the LLVM verifier and the O3 pipeline, and emits PTX for opts.arch.
/// Throws CompileError naming the op (and its source line) that could not be lowered.
/// `plan`: the lowering plan to follow (read_layouts, from a plan's text; made for these opts, else
/// CompileError); null: plan_lowering's. The same holds for emit_llvm_ir and print_lowering.
TILEJIT_EXPORT PtxResult compile_to_ptx(const ir::Function &fn, const CodegenOptions &opts,
                                        const LoweringPlan *plan = nullptr);
/// The LLVM IR module text after lowering (before optimization), verified; used by tests and `tilejit ir --llvm`.
TILEJIT_EXPORT std::string emit_llvm_ir(const ir::Function &fn, const CodegenOptions &opts,
                                        const LoweringPlan *plan = nullptr);
/// fn's text with each tile value's layout in its type (as print_layouts) and, after each op, what its lowering
/// for opts decided: tensor-core instruction and operand sources of each dot, the cp.async software pipeline of
/// each loop and the loads it stages, where a dot's deferred wgmma wait lands, layout conversions. The
/// "lowering" compile stage; throws as compile_to_ptx does. `llvm_ir`, when given, receives what emit_llvm_ir
/// returns, and `followed` what followed_plan returns, from the same lowering.
TILEJIT_EXPORT std::string print_lowering(const ir::Function &fn, const CodegenOptions &opts,
                                          std::string *llvm_ir = nullptr, const LoweringPlan *plan = nullptr,
                                          LoweringPlan *followed = nullptr);
/// The plan the lowering of fn for opts follows: `plan` (or plan_lowering's), unless the loop-invariant operands it
/// stages in the dynamic buffer leave the kernel more shared memory than a block has once the lowering has sized
/// its scratch: those then stay in registers (stage_operands without the dynamic buffer). What the last plan
/// pass's compile stage prints; throws as compile_to_ptx does.
TILEJIT_EXPORT LoweringPlan followed_plan(const ir::Function &fn, const CodegenOptions &opts,
                                          const LoweringPlan *plan = nullptr);
/// Whether kernels compiled for `arch` start with the grid-dependency control of programmatic dependent launch
/// (sm_90 and newer; PTX ISA, "Parallel Synchronization and Communication Instructions: griddepcontrol"; CUDA
/// Programming Guide, "Programmatic Dependent Launch and Synchronization"). Each program first lets the stream's
/// next kernel be scheduled (`griddepcontrol.launch_dependents`), then waits until the previous kernel in the
/// stream has finished and its memory is visible (`griddepcontrol.wait`), before any memory access. Such a
/// kernel may be launched as a programmatic dependent of its predecessor: its launch and its programs' start
/// overlap the predecessor's last programs; none of its memory accesses does.
TILEJIT_EXPORT bool waits_for_prior_grid(const std::string &arch);
/// LLVM's version string ("19.1.7"), part of the compile-cache key.
TILEJIT_EXPORT std::string llvm_version();

}  // namespace tilejit::codegen
