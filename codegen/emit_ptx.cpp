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
#include <vector>

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

void initialize_nvptx() {
  static std::once_flag init;
  std::call_once(init, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

void check_arch(const std::string &arch) {
  bool known = false;
  for (const char *a : kArchs) known |= arch == a;
  if (!known) {
    std::string list;
    for (const char *a : kArchs) list += std::string(list.empty() ? "" : ", ") + a;
    throw CompileError(fmt::format("codegen: unknown GPU arch '{}' (LLVM 19 targets: {})", arch, list));
  }
}

std::unique_ptr<llvm::TargetMachine> create_machine(const std::string &arch) {
  initialize_nvptx();
  std::string err;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(kTriple, err);
  if (!target) throw CompileError("codegen: the NVPTX target is not available: " + err);
  llvm::TargetOptions options;
  auto tm = std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      kTriple, arch, kFeatures, options, std::nullopt, std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!tm) throw CompileError(fmt::format("codegen: LLVM could not create a target machine for {}", arch));
  return tm;
}

// Target machines per arch. LLVM does not promise that one TargetMachine runs two pipelines at once, so each
// emission leases a machine of its own (the autotuner compiles its candidates on several host threads; one
// shared machine would need a lock around all of their optimization and emission). Idle machines are kept
// for the next lease; `reference` only answers queries (data layout) and never emits.
struct Machines {
  std::unique_ptr<llvm::TargetMachine> reference;
  std::vector<std::unique_ptr<llvm::TargetMachine>> idle;
};
std::mutex g_machines_mutex;
std::map<std::string, Machines> g_machines;

// A target machine used by one thread at a time; returned to the idle list on destruction.
class Lease {
 public:
  explicit Lease(const std::string &arch) : arch_(arch) {
    check_arch(arch);
    {
      std::lock_guard lock(g_machines_mutex);
      auto &idle = g_machines[arch].idle;
      if (!idle.empty()) {
        tm_ = std::move(idle.back());
        idle.pop_back();
      }
    }
    if (!tm_) tm_ = create_machine(arch);  // outside the lock: other threads keep leasing
  }
  ~Lease() {
    std::lock_guard lock(g_machines_mutex);
    g_machines[arch_].idle.push_back(std::move(tm_));
  }
  Lease(const Lease &) = delete;
  Lease &operator=(const Lease &) = delete;
  llvm::TargetMachine &get() { return *tm_; }

 private:
  std::string arch_;
  std::unique_ptr<llvm::TargetMachine> tm_;
};

}  // namespace

llvm::TargetMachine &target_machine(const std::string &arch) {
  check_arch(arch);
  std::lock_guard lock(g_machines_mutex);
  Machines &m = g_machines[arch];
  if (!m.reference) m.reference = create_machine(arch);
  return *m.reference;
}

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
  Lease lease(arch);
  llvm::TargetMachine &tm = lease.get();
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
