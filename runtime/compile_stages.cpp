// The compile stages by name (tilejit/stages.h): their list, and one stage of a kernel given as tile-IR text.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "codegen/codegen.h"
#include "codegen/layout_text.h"
#include "ir/parser.h"
#include "ir/passes.h"
#include "runtime/codegen_options.h"
#include "tilejit/error.h"
#include "tilejit/stages.h"

namespace tilejit {

std::vector<std::string> compile_stages() {
  std::vector<std::string> stages = ir::pipeline_stages();
  stages.emplace_back("layouts");
  stages.emplace_back("lowering");
  stages.emplace_back("llvm");
  stages.emplace_back("ptx");
  return stages;
}

std::string stage_of_text(std::string_view tir, const std::string &stage, const LaunchConfig &cfg) {
  const std::vector<std::string> stages = compile_stages();
  const auto at = std::find(stages.begin(), stages.end(), stage);
  if (at == stages.end())
    throw Error(fmt::format("stage '{}' is not a compile stage; the stages are: {}", stage, fmt::join(stages, ", ")));
  ir::TypeNotes notes;
  std::unique_ptr<ir::Function> fn = ir::parse(tir, &notes);
  runtime::check_warps_and_stages(fn->name, cfg);
  LaunchConfig target = cfg;
  if (target.arch.empty()) target.arch = "sm_90a";
  codegen::CodegenOptions opts = runtime::codegen_options(target);
  // A text with layouts is a layouts (or lowering) stage: the tile IR's passes are behind it and its layouts are
  // what the lowering uses.
  std::optional<codegen::LoweringPlan> layouts;
  if (!notes.aliases.empty() ||
      std::any_of(notes.types.begin(), notes.types.end(), [](const auto &n) { return !n.second.text.empty(); })) {
    const auto first = std::find(stages.begin(), stages.end(), "layouts");
    if (at < first)
      throw Error(fmt::format("stage '{}' comes before 'layouts', and this text already has layouts in its types; "
                              "ask for one of {} (tilejit ir --stage NAME; 'optimized' is the default)", stage,
                              fmt::join(first, stages.end(), ", ")));
    layouts = codegen::read_layouts(*fn, notes, opts);
  } else {
    std::string text;
    ir::optimize(*fn, ir::FloatRewrites::Fast, [&](const char *name, const ir::Function &f) {
      if (text.empty() && stage == name) text = ir::print(f);
    });
    if (!text.empty()) return text;
  }
  const codegen::LoweringPlan *plan = layouts ? &*layouts : nullptr;
  if (stage == "layouts") return codegen::print_layouts(*fn, opts, {}, plan);
  if (stage == "ptx") return codegen::compile_to_ptx(*fn, opts, plan).ptx;
  std::string llvm_ir;
  std::string lowering = codegen::print_lowering(*fn, opts, &llvm_ir, plan);
  return stage == "lowering" ? lowering : llvm_ir;
}

}  // namespace tilejit
