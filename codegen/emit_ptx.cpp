#include "codegen/emit_ptx.h"

#include <fmt/format.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/PassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetOptions.h>

#include <map>
#include <memory>
#include <mutex>

#include "tilejit/error.h"

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

namespace tilejit::codegen {
namespace {

constexpr const char *kTriple = "nvptx64-nvidia-cuda";
// PTX ISA 8.5 is the newest LLVM 19 knows; an unknown feature would silently fall back, so it is fixed here.
constexpr const char *kFeatures = "+ptx85";
const char *const kArchs[] = {"sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a"};

struct CachedMachine {
  std::unique_ptr<llvm::TargetMachine> tm;
  std::mutex emit_mutex;  // LLVM does not promise that one TargetMachine emits from two threads at once
};

std::mutex g_cache_mutex;
std::map<std::string, std::unique_ptr<CachedMachine>> g_cache;

CachedMachine &cached(const std::string &arch) {
  static std::once_flag init;
  std::call_once(init, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
  bool known = false;
  for (const char *a : kArchs) known |= arch == a;
  if (!known) {
    std::string list;
    for (const char *a : kArchs) list += std::string(list.empty() ? "" : ", ") + a;
    throw CompileError(fmt::format("codegen: unknown GPU arch '{}' (LLVM 19 targets: {})", arch, list));
  }
  std::lock_guard lock(g_cache_mutex);
  auto &slot = g_cache[arch];
  if (!slot) {
    std::string err;
    const llvm::Target *target = llvm::TargetRegistry::lookupTarget(kTriple, err);
    if (!target) throw CompileError("codegen: the NVPTX target is not available: " + err);
    llvm::TargetOptions options;
    auto tm = std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
        kTriple, arch, kFeatures, options, std::nullopt, std::nullopt, llvm::CodeGenOptLevel::Aggressive));
    if (!tm) throw CompileError(fmt::format("codegen: LLVM could not create a target machine for {}", arch));
    slot = std::make_unique<CachedMachine>();
    slot->tm = std::move(tm);
  }
  return *slot;
}

}  // namespace

llvm::TargetMachine &target_machine(const std::string &arch) { return *cached(arch).tm; }

void prepare_module(llvm::Module &m, llvm::TargetMachine &tm) {
  m.setTargetTriple(kTriple);
  m.setDataLayout(tm.createDataLayout());
}

void verify_or_throw(const llvm::Module &m, const std::string &kernel) {
  std::string msg;
  llvm::raw_string_ostream os(msg);
  if (llvm::verifyModule(m, &os)) {
    os.flush();
    throw CompileError(fmt::format("codegen: the LLVM module for kernel '{}' failed verification: {}", kernel, msg));
  }
}

std::string optimize_and_emit_ptx(llvm::Module &m, const std::string &arch) {
  CachedMachine &cm = cached(arch);
  std::lock_guard lock(cm.emit_mutex);
  llvm::TargetMachine &tm = *cm.tm;
  {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(&tm);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    mpm.run(m, mam);
  }
  llvm::SmallString<0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile))
    throw CompileError(fmt::format("codegen: LLVM cannot emit PTX for {}", arch));
  pm.run(m);
  return std::string(buf.str());
}

}  // namespace tilejit::codegen
