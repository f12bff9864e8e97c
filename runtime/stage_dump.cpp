#include "runtime/stage_dump.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <unistd.h>

#include "codegen/layout_text.h"
#include "codegen/codegen.h"
#include "runtime/env.h"
#include "tilejit/error.h"
#include "tilejit/stages.h"

namespace tilejit::runtime {
namespace {

// FNV-1a: the same directory for the same IR in every process.
uint64_t text_hash(const std::string &text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Writes to a file of its own first and renames it into place, so that threads or processes dumping the same
// kernel never leave a torn file. A debugging aid: a failure is reported once on stderr and the compile goes on.
void write_file(const std::filesystem::path &dir, const std::string &name, const std::string &text) {
  static std::atomic<uint64_t> counter{0};
  static std::atomic<bool> warned{false};
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::filesystem::path path = dir / name;
  const std::filesystem::path tmp =
      dir / fmt::format(".{}.{}.{}.tmp", name, static_cast<long>(::getpid()), counter.fetch_add(1));
  bool ok = !ec;
  if (ok) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    ok = bool(out);
    if (ok) std::filesystem::rename(tmp, path, ec);
    ok = ok && !ec;
    if (!ok) std::filesystem::remove(tmp, ec);
  }
  if (!ok && !warned.exchange(true))
    fmt::print(stderr, "tilejit: warning: {}: cannot write the compile stage '{}'; compile stages are not written\n",
               env_name(Env::DumpStages), path.string());
}

}  // namespace

bool dumping_stages() { return !env_string(Env::DumpStages).empty(); }

std::string stage_dir(const ir::Function &optimized) { return stage_dir(optimized.name, ir::print(optimized)); }

std::string stage_dir(const std::string &kernel, const std::string &optimized_text) {
  return (std::filesystem::path(env_string(Env::DumpStages)) /
          fmt::format("{}-{:016x}", kernel, text_hash(optimized_text)))
      .string();
}

ir::StageObserver TileStageDump::observer() {
  return [this](const char *stage, const ir::Function &fn) { stages_.emplace_back(stage, ir::print(fn)); };
}

void TileStageDump::write(const ir::Function &optimized) const {
  // The parameters as the kernel is specialized in the end (facts about unused ones dropped after optimize):
  // every stage's first line, the signature, is the final function's.
  const std::string final_text = ir::print(optimized);
  const std::string dir = stage_dir(optimized.name, final_text);
  const std::string signature = final_text.substr(0, final_text.find('\n'));
  const std::vector<std::string> &order = ir::pipeline_stages();
  for (const auto &[stage, text] : stages_) {
    const size_t n = size_t(std::find(order.begin(), order.end(), stage) - order.begin());
    const size_t eol = text.find('\n');
    write_file(dir, fmt::format("{:02}-{}.tir", n, stage), signature + (eol == std::string::npos ? "" : text.substr(eol)));
  }
}

void dump_codegen_stages(const ir::Function &optimized, const codegen::CodegenOptions &opts, const std::string &ptx) {
  const std::string config = fmt::format("{}-w{}-s{}-c{}{}{}", opts.arch, opts.num_warps, opts.num_stages,
                                         opts.min_ctas_per_sm, opts.wgmma ? "" : "-nowgmma",
                                         opts.warp_specialize ? "-ws" : opts.tma ? "-tma" : "");
  const std::string dir = stage_dir(optimized);
  // One lowering gives the lowering stage, the LLVM IR and the whole plan as it was followed (the last pass's stage).
  std::string llvm_ir;
  codegen::LoweringPlan followed;
  const std::string lowering = codegen::print_lowering(optimized, opts, &llvm_ir, nullptr, &followed);
  const std::vector<std::string> &passes = codegen::plan_passes();
  for (size_t i = 0; i < passes.size(); ++i) {
    const codegen::LoweringPlan plan =
        i + 1 < passes.size() ? codegen::plan_lowering_up_to(optimized, opts, int(i + 1)) : std::move(followed);
    write_file(dir, passes[i] + "-" + config + ".tir", codegen::print_layouts(optimized, opts, {}, &plan));
  }
  write_file(dir, "lowering-" + config + ".tir", lowering);
  write_file(dir, "llvm-" + config + ".ll", llvm_ir);
  write_file(dir, "ptx-" + config + ".ptx", ptx);
}

}  // namespace tilejit::runtime
