// Every built-in kernel's PTX, for sm_80 and sm_90a, is accepted by ptxas (the CUDA toolkit's assembler).
// ptxas must be installed (.ci/run installs nothing for it but fails loudly when it is missing).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tilejit/kernels.h"

using namespace tilejit;

namespace {

std::string ptxas_path() {
  if (const char *p = std::getenv("TILEJIT_PTXAS")) return p;
  if (std::filesystem::exists("/usr/local/cuda/bin/ptxas")) return "/usr/local/cuda/bin/ptxas";
  return "ptxas";  // from PATH
}

// Assembles `ptx` for `arch`; returns ptxas's exit status and output (-v: registers, spills).
std::pair<int, std::string> assemble(const std::string &ptx, const std::string &arch, const std::string &tag) {
  auto dir = std::filesystem::temp_directory_path() / "tilejit_ptxas_test";
  std::filesystem::create_directories(dir);
  auto file = dir / (tag + "_" + arch + ".ptx");
  std::ofstream(file) << ptx;
  std::string cmd = fmt::format("{} -v -arch={} {} -o {} 2>&1", ptxas_path(), arch, file.string(),
                                (dir / (tag + "_" + arch + ".cubin")).string());
  std::string out;
  FILE *p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

void check_kernel(const std::string &name, kernels::BuiltinSpec spec, const std::string &tag) {
  for (std::string arch : {"sm_80", "sm_90a"}) {
    spec.arch = arch;
    std::string ptx = kernels::builtin_ptx(name, spec);
    REQUIRE(ptx.find(".entry") != std::string::npos);
    auto [rc, log] = assemble(ptx, arch, tag);
    INFO(name << " for " << arch << ": ptxas says:\n" << log);
    REQUIRE(rc == 0);
  }
}

}  // namespace

TEST_CASE("ptxas is installed", "[ptx]") {
  auto [rc, log] = assemble("", "sm_80", "probe");  // an empty file is an error, but proves ptxas runs
  INFO(log);
  REQUIRE(rc != 127);  // 127: the shell could not find ptxas
}

TEST_CASE("built-in kernels assemble with ptxas for sm_80 and sm_90a", "[ptx]") {
  kernels::BuiltinSpec spec;
  spec.dtype = DType::f32;
  check_kernel("vector_add", spec, "vector_add");
  for (DType dt : {DType::f32, DType::bf16}) {
    spec.dtype = dt;
    check_kernel("softmax", spec, "softmax");
    check_kernel("matmul", spec, "matmul");
  }
  spec.dtype = DType::bf16;
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      spec.head_dim = d;
      spec.causal = causal;
      check_kernel("attention", spec, fmt::format("attention_d{}_{}", d, causal));
    }
}

TEST_CASE("built-in kernel specs are validated", "[ptx]") {
  kernels::BuiltinSpec spec;
  spec.dtype = DType::f64;
  REQUIRE_THROWS_WITH(kernels::builtin_ir("matmul", spec), Catch::Contains("has no f64 version"));
  spec.dtype = DType::bf16;
  REQUIRE_THROWS_WITH(kernels::builtin_ir("vector_add", spec), Catch::Contains("has no bf16 version"));
  spec.dtype = DType::f32;
  spec.cols = 1 << 30;
  REQUIRE_THROWS_WITH(kernels::builtin_ir("softmax", spec), Catch::Contains("--cols must be in [1, 16384]"));
  REQUIRE_THROWS_WITH(kernels::builtin_ir("nope", spec), Catch::Contains("unknown built-in kernel 'nope'"));
}
