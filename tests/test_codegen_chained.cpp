// PTX checks of chained and deferred wgmma dots (codegen/lower_dot_mma.cpp, Lowering::defer_wgmma) on a DSL
// kernel shaped like the flex kernel's ALiBi through the tensor cores (tests/chained_dot_kernel.h).
#include <catch2/catch.hpp>

#include "chained_dot_kernel.h"
#include "codegen/codegen.h"
#include "test_codegen_util.h"

using namespace tilejit;
using codegen::CodegenOptions;
using codegen::PtxResult;
using codegen::testing::contains;
using codegen::testing::count_lines;
using codegen::testing::ptxas_v;

TEST_CASE("codegen: a wgmma dot continues a running one's accumulators without a wait or fence", "[codegen][mma]") {
  // s = q·kᵀ + af·bf in two key loops (tests/chained_dot_kernel.h): per loop, af·bf (K = 16: A in 32-byte
  // rows, B a loop-invariant operand read by descriptor) is issued and committed, and the q·k wgmmas
  // continue its accumulators at once. Its result is waited for where it is first read.
  auto k = tilejit::testing::chained_dot_kernel();
  DevicePtr p{256, 1 << 20};
  const ir::Function &fn = k.function(p, p, p, p, p, p, 1, 4, 64, 64, 64);
  CodegenOptions opts;
  opts.arch = "sm_90a";
  opts.num_warps = 4;
  opts.num_stages = 2;
  PtxResult r = codegen::compile_to_ptx(fn, opts);
  auto [rc, log] = ptxas_v(r.ptx, "sm_90a", "chained_dot");
  INFO(log);
  REQUIRE(rc == 0);
  REQUIRE_FALSE(contains(log, "serialized"));  // ptxas C7512: the overlap would be lost
  auto n = [&](const char *s) { return count_lines(r.ptx, [&](auto &l) { return contains(l, s); }); };
  // Per loop: af·bf one m64n64k16, q·k four (K = 64); one commit each, one fence (none for the chain).
  REQUIRE(n("wgmma.mma_async") == 10);
  REQUIRE(n("wgmma.commit_group") == 4);
  REQUIRE(n("wgmma.fence") == 2);
  // Between af·bf's commit and the q·k wgmmas of the same loop there is no wait.
  for (size_t at = r.ptx.find("wgmma.commit_group"), loops = 0; loops < 2; ++loops) {
    size_t next_mma = r.ptx.find("wgmma.mma_async", at), next_wait = r.ptx.find("wgmma.wait_group", at);
    REQUIRE(next_mma < next_wait);
    at = r.ptx.find("wgmma.commit_group", r.ptx.find("wgmma.commit_group", at) + 1);
    at = r.ptx.find("wgmma.commit_group", at + 1);
  }
  // q, af and bf are staged before each loop: the first loop's staging (inside the if) may not have run.
  REQUIRE(n(".shared .align 1024 .b8 tilejit_staged") == 6);
}
