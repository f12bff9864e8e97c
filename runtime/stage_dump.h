// Writing each stage of a kernel's compilation to the directory TILEJIT_DUMP_STAGES names: the tile IR as
// traced, after each pass of ir::optimize's first round and at its fixed point, then, for each configuration
// compiled, the layouts codegen assigns, the decisions of its lowering, the LLVM IR as lowered and the PTX
// (tilejit/stages.h lists the stages).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "codegen/codegen.h"
#include "ir/passes.h"

namespace tilejit::runtime {

/// Whether TILEJIT_DUMP_STAGES names a directory (is set and not empty).
bool dumping_stages();

/// The directory of fn's stages: <TILEJIT_DUMP_STAGES>/<kernel name>-<16 hex digits of a hash of its optimized
/// tile IR>, one per specialization.
std::string stage_dir(const ir::Function &optimized);
/// The same from the kernel's name and its optimized IR's printed text.
std::string stage_dir(const std::string &kernel, const std::string &optimized_text);

/// Collects the tile-IR stages while ir::optimize runs (observer()), then writes them as NN-<stage>.tir (NN: the
/// stage's place in ir::pipeline_stages()) into the directory of the function as finally specialized (write(),
/// each stage's signature line that function's). Every file is renamed into place whole; a path that cannot be
/// written is named once on stderr and the compile goes on (a debugging aid never fails a launch).
class TileStageDump {
 public:
  ir::StageObserver observer();
  void write(const ir::Function &optimized) const;

 private:
  std::vector<std::pair<std::string, std::string>> stages_;
};

/// Writes fn's plan after each plan pass (codegen::print_layouts), the lowering's decisions
/// (codegen::print_lowering), its LLVM IR as lowered (before LLVM's optimizations) and `ptx`, compiled for opts,
/// into its directory as <pass>-<config>.tir, lowering-<config>.tir, llvm-<config>.ll and ptx-<config>.ptx (<config>: arch, warps,
/// stages, programs per SM, "-nowgmma" when wgmma is off). Failures as TileStageDump::write.
void dump_codegen_stages(const ir::Function &optimized, const codegen::CodegenOptions &opts, const std::string &ptx);

}  // namespace tilejit::runtime
