// Helpers for the codegen tests: dump PTX to a temporary file and assemble it with ptxas (CUDA toolkit).
// A missing ptxas makes the test FAIL (exit status 127 from the shell), never skip.
#pragma once
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "codegen/codegen.h"
#include "ir/ir.h"

namespace tilejit::codegen::testing {

inline std::string ptxas_binary() {
  if (const char *p = std::getenv("TILEJIT_PTXAS")) return p;
  if (std::filesystem::exists("/usr/local/cuda/bin/ptxas")) return "/usr/local/cuda/bin/ptxas";
  return "ptxas";
}

/// Writes `ptx` to <tmp>/tilejit_codegen_tests/<tag>.ptx (or under $TILEJIT_PTX_DUMP_DIR) and returns the path.
inline std::filesystem::path dump_ptx(const std::string &ptx, const std::string &tag) {
  const char *env = std::getenv("TILEJIT_PTX_DUMP_DIR");
  auto dir = env ? std::filesystem::path(env) : std::filesystem::temp_directory_path() / "tilejit_codegen_tests";
  std::filesystem::create_directories(dir);
  auto file = dir / (tag + ".ptx");
  std::ofstream(file) << ptx;
  return file;
}

/// Runs ptxas (with extra `flags`, e.g. "-v") on a PTX file; returns its exit status and its output.
inline std::pair<int, std::string> run_ptxas(const std::filesystem::path &file, const std::string &arch,
                                             const std::string &flags = "") {
  auto cubin = file;
  cubin.replace_extension("." + arch + ".cubin");
  std::string cmd = fmt::format("{} {} -arch={} {} -o {} 2>&1", ptxas_binary(), flags, arch, file.string(),
                                cubin.string());
  std::string out;
  FILE *p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

/// ptxas -v on `ptx` (dumped as <tag>_<arch>.ptx): exit status and the log with registers and spills.
inline std::pair<int, std::string> ptxas_v(const std::string &ptx, const std::string &arch, const std::string &tag) {
  return run_ptxas(dump_ptx(ptx, tag + "_" + arch), arch, "-v");
}

/// Compiles fn for sm_80 and sm_90a, REQUIREs that ptxas accepts both, returns the sm_90a result.
inline PtxResult compile_and_assemble(const ir::Function &fn, const std::string &tag, int num_warps = 4) {
  PtxResult last;
  for (std::string arch : {"sm_80", "sm_90a"}) {
    CodegenOptions opts;
    opts.arch = arch;
    opts.num_warps = num_warps;
    PtxResult r = compile_to_ptx(fn, opts);
    REQUIRE(r.ptx.find(".entry " + r.entry) != std::string::npos);
    REQUIRE(r.num_threads == 32 * num_warps);
    auto file = dump_ptx(r.ptx, tag + "_" + arch);
    auto [rc, log] = run_ptxas(file, arch);
    INFO(tag << " for " << arch << " (" << file.string() << "): ptxas says:\n" << log);
    REQUIRE(rc == 0);
    last = std::move(r);
  }
  return last;
}

inline bool contains(const std::string &s, const std::string &what) { return s.find(what) != std::string::npos; }
/// The number of lines of `text` (e.g. PTX) for which `pred(line)` holds.
template <class Pred> size_t count_lines(const std::string &text, Pred pred) {
  size_t n = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) n += pred(line) ? 1 : 0;
  return n;
}

}  // namespace tilejit::codegen::testing
