// Programmatic dependent launch in codegen: a kernel for sm_90 and newer first lets the stream's next kernel be
// scheduled, then waits for its predecessor, before its first memory access of any kind; older targets have
// neither.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "test_codegen_util.h"
#include "test_dsl_helpers.h"
#include "tilejit/kernels.h"

using namespace tilejit;

namespace {

// The position of the first instruction that touches memory (global, shared, async copies, atomics, wgmma).
size_t first_memory_access(const std::string &ptx) {
  size_t first = std::string::npos;
  for (const char *op : {"ld.global", "st.global", "ld.shared", "st.shared", "cp.async", "atom.", "red.",
                         "ldmatrix", "wgmma.mma_async"})
    first = std::min(first, ptx.find(op));
  return first;
}

// Checks the order of the two grid-dependency instructions (sm_90a) or their absence (other archs).
void check_grid_dependency(const std::string &ptx, const std::string &arch) {
  const size_t launch = ptx.find("griddepcontrol.launch_dependents;"), wait = ptx.find("griddepcontrol.wait;");
  const size_t first = first_memory_access(ptx);
  REQUIRE(first != std::string::npos);
  if (arch == "sm_90a") {
    REQUIRE(launch != std::string::npos);
    REQUIRE(wait != std::string::npos);
    CHECK(launch < wait);
    CHECK(wait < first);
    CHECK(ptx.find("griddepcontrol", wait + 1) == std::string::npos);  // once per kernel
  } else {
    CHECK(ptx.find("griddepcontrol") == std::string::npos);
  }
}

}  // namespace

TEST_CASE("codegen: sm_90 kernels wait for the previous grid before any memory access", "[codegen][ptx]") {
  using namespace dsl_testing;
  auto fn = trace(
      [] {
        Tile x = param(0), y = param(1);
        Tile offs = program_id(0) * 128 + arange(0, 128);
        store(y + offs, load(x + offs) * 2.f);
      },
      {P(DType::f32), P(DType::f32)});
  for (std::string arch : {"sm_80", "sm_90a"}) {
    INFO(arch);
    codegen::CodegenOptions opts;
    opts.arch = arch;
    std::string ptx = codegen::compile_to_ptx(*fn, opts).ptx;
    CHECK(codegen::waits_for_prior_grid(arch) == (arch == "sm_90a"));
    check_grid_dependency(ptx, arch);
    auto [rc, log] = codegen::testing::run_ptxas(codegen::testing::dump_ptx(ptx, "grid_dependency_" + arch), arch);
    INFO("ptxas: " << log);
    CHECK(rc == 0);
  }
  CHECK(codegen::waits_for_prior_grid("sm_90"));
  CHECK(codegen::waits_for_prior_grid("sm_100a"));
  CHECK_FALSE(codegen::waits_for_prior_grid("sm_89"));
}

TEST_CASE("codegen: a pipelined wgmma kernel waits for the previous grid before its first copy", "[codegen][ptx]") {
  // The attention forward: q in shared memory, K/V through a cp.async pipeline, wgmma on sm_90a.
  kernels::BuiltinSpec spec;
  spec.dtype = DType::bf16;
  spec.head_dim = 128;
  spec.num_stages = 3;
  for (std::string arch : {"sm_80", "sm_90a"}) {
    INFO(arch);
    spec.arch = arch;
    const std::string ptx = kernels::builtin_ptx("attention", spec);
    REQUIRE(ptx.find("cp.async") != std::string::npos);
    if (arch == "sm_90a") REQUIRE(ptx.find("wgmma.mma_async") != std::string::npos);
    check_grid_dependency(ptx, arch);
  }
}
