// Every built-in kernel's PTX, for sm_80 and sm_90a, is accepted by ptxas (the CUDA toolkit's assembler).
// ptxas must be installed (.ci/run installs nothing for it but fails loudly when it is missing).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "test_codegen_util.h"
#include "tilejit/kernels.h"

using namespace tilejit;

namespace {

using codegen::testing::dump_ptx;
using codegen::testing::run_ptxas;

void check_kernel(const std::string &name, kernels::BuiltinSpec spec, const std::string &tag) {
  for (std::string arch : {"sm_80", "sm_90a"}) {
    spec.arch = arch;
    std::string ptx = kernels::builtin_ptx(name, spec);
    REQUIRE(ptx.find(".entry") != std::string::npos);
    auto [rc, log] = run_ptxas(dump_ptx(ptx, tag + "_" + arch), arch);
    INFO(name << " for " << arch << ": ptxas says:\n" << log);
    REQUIRE(rc == 0);
  }
}

}  // namespace

TEST_CASE("ptxas is installed", "[ptx]") {
  auto [rc, log] = run_ptxas(dump_ptx("", "probe"), "sm_80");  // an empty file is an error, but proves ptxas runs
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
