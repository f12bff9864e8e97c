// Backend selection and the errors a machine without a CUDA driver gives (no GPU needed).
#include <catch2/catch.hpp>

#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/env.h"
#include "test_runtime_scoped_env.h"
#include "tilejit/buffer.h"
#include "tilejit/device.h"
#include "tilejit/error.h"
#include "tilejit/launch.h"
#include "tilejit/timer.h"
#include "tilejit/flex_attention.h"
#include "tilejit/kernel.h"
#include "tilejit/ops.h"

using namespace tilejit;
using testing::ScopedEnv;

TEST_CASE("resolve_backend follows TILEJIT_INTERPRET for Backend::Auto", "[runtime]") {
  {
    ScopedEnv env("TILEJIT_INTERPRET", "1");
    CHECK(resolve_backend(Backend::Auto) == Backend::Interpreter);
    CHECK(resolve_backend(Backend::GPU) == Backend::GPU);  // explicit choices are kept
  }
  {
    ScopedEnv env("TILEJIT_INTERPRET", "0");
    CHECK(resolve_backend(Backend::Auto) == Backend::GPU);
  }
  {
    ScopedEnv env("TILEJIT_INTERPRET", "");
    CHECK(resolve_backend(Backend::Auto) == Backend::GPU);
  }
  {
    ScopedEnv env("TILEJIT_INTERPRET", std::nullopt);
    CHECK(resolve_backend(Backend::Auto) == Backend::GPU);
    CHECK(resolve_backend(Backend::Interpreter) == Backend::Interpreter);
  }
}

TEST_CASE("a missing driver library gives a DriverError that names it and suggests the interpreter", "[runtime]") {
  try {
    runtime::load_driver("/nonexistent/libcuda.so.1");
    FAIL("load_driver should have thrown");
  } catch (const DriverError &e) {
    std::string msg = e.what();
    CHECK_THAT(msg, Catch::StartsWith("CUDA driver /nonexistent/libcuda.so.1 could not be loaded ("));
    CHECK_THAT(msg, Catch::Contains("No such file"));  // dlerror's text is included
    CHECK_THAT(msg, Catch::EndsWith("use Backend::Interpreter or set TILEJIT_INTERPRET=1"));
    CHECK(e.code == -1);
    // The failure alone, for front ends with their own advice: the message up to the advice.
    CHECK(msg == e.cause + "; use Backend::Interpreter or set TILEJIT_INTERPRET=1");
    CHECK_THAT(e.cause, Catch::EndsWith("No such file or directory)"));
  }
}

TEST_CASE("a library that is not the CUDA driver is rejected, naming the missing entry point", "[runtime]") {
  // libc loads fine but has no cuInit.
  CHECK_THROWS_WITH(runtime::load_driver("libc.so.6"),
                    Catch::Contains("libc.so.6 lacks the entry point cuInit") &&
                        Catch::Contains("TILEJIT_INTERPRET=1"));
}

TEST_CASE("without a GPU, GPU objects throw DriverError and gpu_available is false", "[runtime]") {
  if (gpu_available()) {
    WARN("a GPU is present: the no-driver checks are skipped");
    return;
  }
  CHECK_NOTHROW(gpu_available());  // never throws, also when asked again
  CHECK_THROWS_AS(Buffer(1024, Backend::GPU), DriverError);
  CHECK_THROWS_WITH(Buffer(1024, Backend::GPU), Catch::Contains("TILEJIT_INTERPRET=1"));
  try {
    Buffer b(1024, Backend::GPU);
  } catch (const DriverError &e) {  // rethrown from the one load attempt, cause included
    CHECK_FALSE(e.cause.empty());
    CHECK_THAT(e.cause, !Catch::Contains("TILEJIT_INTERPRET"));
  }
  CHECK_THROWS_AS(Stream(), DriverError);
  CHECK_THROWS_AS(GpuTimer(), DriverError);
  CHECK_THROWS_AS(device_info(), DriverError);
  {
    ScopedEnv env("TILEJIT_INTERPRET", "1");
    Buffer b(64, Backend::Auto);  // Auto resolves to the interpreter: host memory, no driver needed
    CHECK_FALSE(b.on_gpu());
  }
}

TEST_CASE("a host buffer given to a Backend::Auto launch says why Auto meant the GPU", "[runtime]") {
  ScopedEnv env("TILEJIT_INTERPRET", std::nullopt);
  Buffer x(64 * 4, Backend::Interpreter);
  auto k = Kernel("fill", [](Ptr<f32> p) { store(p + arange(0, 64), zeros({64}, DType::f32)); });
  const std::string why = "Backend::Auto means the GPU unless TILEJIT_INTERPRET=1 is set";
  CHECK_THROWS_WITH(k.launch(Grid{1}, LaunchConfig{.backend = Backend::Auto}, x),
                    Catch::Contains("host (interpreter) buffer but the launch runs on the GPU") && Catch::Contains(why));
  // An explicit GPU launch needs no explanation of Auto (and without a GPU it fails on the driver first).
  try {
    k.launch(Grid{1}, LaunchConfig{.backend = Backend::GPU}, x);
  } catch (const Error &e) {
    CHECK_THAT(std::string(e.what()), !Catch::Contains(why));
  }
  attention::FlexShape shape{.batch = 1, .heads_q = 1, .seqlen_q = 16, .seqlen_k = 16, .head_dim_qk = 16};
  Buffer q(16 * 16 * 2, Backend::Interpreter), o(16 * 16 * 2, Backend::Interpreter), lse(16 * 4, Backend::Interpreter);
  attention::FlexOptions opt;  // backend Auto
  CHECK_THROWS_WITH(attention::flex_forward(q, q, q, o, lse, shape, opt), Catch::Contains(why));
  if (!gpu_available())
    CHECK_THROWS_WITH(attention::flex_forward(q, q, q, o, lse, shape, opt),
                      Catch::Contains("no usable GPU is here: pass Backend::Interpreter"));
}

TEST_CASE("integer environment variables are read whole or rejected by name", "[runtime]") {
  {
    ScopedEnv env("TILEJIT_AUTOTUNE_THREADS", "12");
    CHECK(runtime::env_int(runtime::Env::AutotuneThreads) == 12);
  }
  {
    ScopedEnv env("TILEJIT_AUTOTUNE_THREADS", "-3");
    CHECK(runtime::env_int(runtime::Env::AutotuneThreads) == -3);
  }
  {
    ScopedEnv env("TILEJIT_AUTOTUNE_THREADS", "");
    CHECK_FALSE(runtime::env_int(runtime::Env::AutotuneThreads).has_value());
  }
  for (const char *bad : {"1abc", "abc", " 1", "1.5", "99999999999999999999"}) {
    ScopedEnv env("TILEJIT_AUTOTUNE_THREADS", bad);
    INFO(bad);
    CHECK_THROWS_WITH(runtime::env_int(runtime::Env::AutotuneThreads),
                      Catch::Contains("TILEJIT_AUTOTUNE_THREADS='" + std::string(bad) + "' is not an integer"));
  }
}

TEST_CASE("the compile-cache key carries the registered variables that change generated code", "[runtime]") {
  {
    ScopedEnv off("TILEJIT_DISABLE_WGMMA", "");
    ScopedEnv dbg("TILEJIT_DEBUG", "1");  // changes no code: not in the key
    CHECK(runtime::env_code_key() == "");
  }
  ScopedEnv on("TILEJIT_DISABLE_WGMMA", "yes");
  CHECK(runtime::env_code_key() == "TILEJIT_DISABLE_WGMMA=1;");  // values normalized
  // A switch that changes only what the autotuner tries enters its keys, not the compile cache's.
  ScopedEnv fewer("TILEJIT_AUTOTUNE_MORE_PER_SM", "0");
  CHECK(runtime::env_code_key() == "TILEJIT_DISABLE_WGMMA=1;");
  CHECK(runtime::env_tuning_key() == "TILEJIT_AUTOTUNE_MORE_PER_SM=0;TILEJIT_DISABLE_WGMMA=1;");
  CHECK(std::string(runtime::env_name(runtime::Env::DisableWgmma)) == "TILEJIT_DISABLE_WGMMA");
}

TEST_CASE("compute capabilities map to codegen targets", "[runtime]") {
  CHECK(runtime::arch_for_compute_capability(9, 0) == "sm_90a");
  CHECK(runtime::arch_for_compute_capability(8, 0) == "sm_80");
  CHECK(runtime::arch_for_compute_capability(8, 6) == "sm_86");
  CHECK(runtime::arch_for_compute_capability(8, 9) == "sm_89");
  CHECK(runtime::arch_for_compute_capability(10, 0) == "sm_90");  // newer GPUs JIT sm_90 PTX
  CHECK_THROWS_WITH(runtime::arch_for_compute_capability(7, 5), Catch::Contains("compute capability 7.5"));
}

TEST_CASE("describe_result names unknown results by number when no driver is loaded", "[runtime]") {
  if (gpu_available()) return;
  CHECK(runtime::describe_result(700) == "CUresult 700");
  CHECK_THROWS_WITH(runtime::check(700, "cuLaunchKernel", "attn_fwd", "grid=(1,1,1)"),
                    "cuLaunchKernel failed for kernel 'attn_fwd': CUresult 700; grid=(1,1,1)");
  CHECK_THROWS_WITH(runtime::check(2, "cuMemAlloc"), "cuMemAlloc failed: CUresult 2");
  CHECK_NOTHROW(runtime::check(0, "cuMemAlloc"));
}
