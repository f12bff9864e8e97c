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
  for (const std::string &pass : codegen::plan_passes()) stages.push_back(pass);
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
  // The plan passes' stages print the plan after that pass; the later stages follow the whole plan.
  const std::vector<std::string> &passes = codegen::plan_passes();
  const auto pass = std::find(passes.begin(), passes.end(), stage);
  const int upto = pass == passes.end() ? int(passes.size()) : int(pass - passes.begin()) + 1;
  // A text with layouts is a plan pass's stage (or the lowering's): the tile IR's passes are behind it, its layouts
  // and marks are what the plan passes it states decided, and the later ones run from there.
  std::optional<codegen::LoweringPlan> read;
  if (!notes.aliases.empty() ||
      std::any_of(notes.types.begin(), notes.types.end(), [](const auto &n) { return !n.second.text.empty(); })) {
    const int done = codegen::plan_up_to(tir, opts);
    const auto first = std::find(stages.begin(), stages.end(), passes[size_t(done - 1)]);
    if (at < first)
      throw Error(fmt::format("stage '{}' comes before '{}', and this text is {}; ask for one of {} (tilejit ir "
                              "--stage NAME; 'optimized' is the default)", stage, *first,
                              done == int(passes.size()) ? "a whole plan (after that pass)" : "a plan up to that pass",
                              fmt::join(first, stages.end(), ", ")));
    read = codegen::read_layouts(*fn, notes, opts, done, upto);
  } else {
    std::string text;
    ir::optimize(*fn, ir::FloatRewrites::Fast, [&](const char *name, const ir::Function &f) {
      if (text.empty() && stage == name) text = ir::print(f);
    });
    if (!text.empty()) return text;
    if (pass != passes.end()) read = codegen::plan_lowering_up_to(*fn, opts, upto);
  }
  const codegen::LoweringPlan *plan = read ? &*read : nullptr;
  if (pass != passes.end() && pass + 1 == passes.end()) {  // the whole plan, as the lowering follows it
    const codegen::LoweringPlan followed = codegen::followed_plan(*fn, opts, plan);
    return codegen::print_layouts(*fn, opts, {}, &followed);
  }
  if (pass != passes.end()) return codegen::print_layouts(*fn, opts, {}, plan);
  if (stage == "ptx") return codegen::compile_to_ptx(*fn, opts, plan).ptx;
  std::string llvm_ir;
  std::string lowering = codegen::print_lowering(*fn, opts, &llvm_ir, plan);
  return stage == "lowering" ? lowering : llvm_ir;
}

}  // namespace tilejit
