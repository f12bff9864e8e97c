// ptxas's spill report through the driver's link on the GPU: the verbose JIT log is parsed for every kernel,
// the figures reach LoadedKernel and CompileStats, and a cubin from the disk cache keeps them. On the H200
// (sm_90a) two attention configs are far from the edge (tests/test_autotune_prior.cpp runs ptxas on them):
// 128x128 at two programs per SM spills hundreds of bytes; 64x32 with 8 warps and no register cap needs about
// half of the 255 registers it may use.
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

#include "kernel_checks.h"
#include "runtime/module.h"
#include "runtime/runtime.h"
#include "test_runtime_scoped_env.h"
#include "tilejit/attention.h"
#include "tilejit/device.h"

using namespace tilejit;
using namespace tilejit::testing;
namespace fs = std::filesystem;

namespace {

// Compiles and runs the attention forward (d=128) with one config; returns the compile stats.
runtime::CompileStats attention_stats(int block_m, int block_n, int min_ctas_per_sm) {
  attention::Shape s{1, 2, 256, 256, 128};
  size_t n = size_t(s.batch) * s.heads * s.seqlen_q * s.head_dim;
  auto q = upload_as(random_values(n, DType::bf16), DType::bf16, Backend::GPU);
  auto k = upload_as(random_values(n, DType::bf16), DType::bf16, Backend::GPU);
  auto v = upload_as(random_values(n, DType::bf16), DType::bf16, Backend::GPU);
  Buffer out(n * 2, Backend::GPU), lse(size_t(s.batch) * s.heads * s.seqlen_q * 4, Backend::GPU);
  attention::Options opt;
  opt.dtype = DType::bf16;
  opt.backend = Backend::GPU;
  opt.block_m = block_m;
  opt.block_n = block_n;
  opt.num_warps = 8;
  opt.num_stages = 2;
  opt.min_ctas_per_sm = min_ctas_per_sm;
  attention::forward(q, k, v, out, lse, s, opt);
  return runtime::last_compile_stats();
}

}  // namespace

TEST_CASE("the driver's link reports spills to LoadedKernel, CompileStats and the cubin cache", "[gpu][runtime]") {
  std::random_device rd;
  fs::path dir = fs::temp_directory_path() / ("tilejit-gpu-spills-" + std::to_string(rd()));
  ScopedEnv env("TILEJIT_CACHE_DIR", dir.string());
  runtime::forget_loaded_kernels();
  bool h200 = device_info().arch == "sm_90a";

  runtime::CompileStats spilling = attention_stats(128, 128, 2);
  INFO("128x128 at two per SM: " << spilling.source << ", spills " << spilling.spill_stores << "/"
                                 << spilling.spill_loads);
  CHECK(spilling.source == "compiled");
  REQUIRE(spilling.spill_stores >= 0);  // the verbose log was parsed
  REQUIRE(spilling.spill_loads >= 0);
  if (h200) CHECK(spilling.spill_stores > 0);

  runtime::CompileStats clean = attention_stats(64, 32, 0);
  INFO("64x32, no register cap: spills " << clean.spill_stores << "/" << clean.spill_loads);
  CHECK(clean.source == "compiled");
  REQUIRE(clean.spill_stores >= 0);
  if (h200) {
    CHECK(clean.spill_stores == 0);
    CHECK(clean.spill_loads == 0);
  }

  // From the disk: the cubin entry carries the figures.
  runtime::forget_loaded_kernels();
  runtime::CompileStats cached = attention_stats(128, 128, 2);
  CHECK(cached.source == "cubin cache");
  CHECK(cached.spill_stores == spilling.spill_stores);
  CHECK(cached.spill_loads == spilling.spill_loads);
  fs::remove_all(dir);
}
