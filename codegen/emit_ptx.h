// LLVM module → PTX: target machines (per arch, one per concurrent emission, reused), the verifier, the O3
// pipeline and the NVPTX assembly printer. Internal to codegen/ (includes LLVM headers).
#pragma once
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <string>

namespace tilejit::codegen {

/// A cached NVPTX target machine for `arch` ("sm_80", ..., "sm_90a"; PTX ISA 8.5), for queries such as the data
/// layout (it never emits; emission leases machines of its own). Throws CompileError for an arch LLVM 19 cannot
/// target.
llvm::TargetMachine &target_machine(const std::string &arch);
/// Sets the module's triple and data layout for `tm`.
void prepare_module(llvm::Module &m, llvm::TargetMachine &tm);
/// Runs llvm::verifyModule; throws CompileError carrying the verifier's message when the module is broken.
void verify_or_throw(const llvm::Module &m, const std::string &kernel);
/// Runs the new pass manager's O3 pipeline, then the NVPTX backend; returns the PTX text.
/// Thread-safe, and concurrent: each call runs on a target machine no other thread is using.
std::string optimize_and_emit_ptx(llvm::Module &m, const std::string &arch);

}  // namespace tilejit::codegen
