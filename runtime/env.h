// Environment variables read by the runtime:
//   TILEJIT_INTERPRET    non-empty and not "0": Backend::Auto runs on the CPU interpreter
//   TILEJIT_DEBUG        non-empty and not "0": compile/cache decisions and timings go to stderr
//   TILEJIT_CACHE_DIR    on-disk kernel cache (default $XDG_CACHE_HOME/tilejit, else ~/.cache/tilejit)
//   TILEJIT_DEVICE       CUDA device ordinal (default 0)
//   TILEJIT_CUDA_LIBRARY the driver library to dlopen instead of libcuda.so.1 (tests use a fake one)
// Read elsewhere (all in README's table): TILEJIT_PRINT_AUTOTUNING and TILEJIT_AUTOTUNE_THREADS
// (runtime/autotune.cpp), TILEJIT_AUTOTUNE_MORE_PER_SM (kernels/launch_options.h), TILEJIT_DISABLE_WGMMA and
// TILEJIT_WGMMA_SMEM_A (codegen/codegen.cpp); tests also read TILEJIT_PTXAS and TILEJIT_PTX_DUMP_DIR.
// Values are read on each call (cheap), so tests can change them with setenv.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>

namespace tilejit::runtime {

/// The variable's value, or "" when unset.
std::string env_string(const char *name);
/// True when the variable is set to a non-empty value other than "0".
bool env_flag(const char *name);
/// The variable as an integer, nullopt when unset or empty; throws Error naming it when it is not an integer
/// (all of it: "1abc" is rejected).
std::optional<int64_t> env_int(const char *name);
/// TILEJIT_DEBUG is on.
bool debug_enabled();

/// Prints "tilejit: <message>" to stderr when TILEJIT_DEBUG is on.
template <class... Args> void debug_log(fmt::format_string<Args...> format, Args &&...args) {
  if (debug_enabled()) {
    fmt::print(stderr, "tilejit: {}\n", fmt::format(format, std::forward<Args>(args)...));
  }
}

}  // namespace tilejit::runtime
