// LLVM module → PTX: target machines (one per arch, cached), the verifier, the O3 pipeline and the NVPTX
// assembly printer. Internal to codegen/ (includes LLVM headers).
#pragma once
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <string>

namespace tilejit::codegen {

/// The cached NVPTX target machine for `arch` ("sm_80", ..., "sm_90a"; PTX ISA 8.5). Throws CompileError for
/// an arch LLVM 19 cannot target.
llvm::TargetMachine &target_machine(const std::string &arch);
/// Sets the module's triple and data layout for `tm`.
void prepare_module(llvm::Module &m, llvm::TargetMachine &tm);
/// Runs llvm::verifyModule; throws CompileError carrying the verifier's message when the module is broken.
void verify_or_throw(const llvm::Module &m, const std::string &kernel);
/// Runs the new pass manager's O3 pipeline, then the NVPTX backend; returns the PTX text.
/// Thread-safe: emission through one target machine is serialized.
std::string optimize_and_emit_ptx(llvm::Module &m, const std::string &arch);

}  // namespace tilejit::codegen
