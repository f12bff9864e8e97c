// Programmatic dependent launch in codegen: a kernel for sm_90 and newer first lets the stream's next kernel be
// scheduled, then waits for its predecessor, before its first memory access; older targets have neither.
#include <catch2/catch.hpp>

#include "test_codegen_util.h"
#include "test_dsl_helpers.h"

using namespace tilejit;

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
    const bool sm90 = arch == "sm_90a";
    CHECK(codegen::waits_for_prior_grid(arch) == sm90);
    const size_t launch = ptx.find("griddepcontrol.launch_dependents;"), wait = ptx.find("griddepcontrol.wait;");
    const size_t first_load = ptx.find("ld.global");
    REQUIRE(first_load != std::string::npos);
    if (sm90) {
      REQUIRE(launch != std::string::npos);
      REQUIRE(wait != std::string::npos);
      CHECK(launch < wait);
      CHECK(wait < first_load);
      CHECK(ptx.find("griddepcontrol", wait + 1) == std::string::npos);  // once per kernel
    } else {
      CHECK(ptx.find("griddepcontrol") == std::string::npos);
    }
    auto [rc, log] = codegen::testing::run_ptxas(codegen::testing::dump_ptx(ptx, "grid_dependency_" + arch), arch);
    INFO("ptxas: " << log);
    CHECK(rc == 0);
  }
  CHECK(codegen::waits_for_prior_grid("sm_90"));
  CHECK(codegen::waits_for_prior_grid("sm_100a"));
  CHECK_FALSE(codegen::waits_for_prior_grid("sm_89"));
}
