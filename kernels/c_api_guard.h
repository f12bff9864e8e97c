// Shared by the C ABI files: exceptions → TILEJIT_ERROR_* codes and tilejit_last_error() text (the
// per-thread message lives in c_api.cpp), and the argument conversions they all need. Not installed.
#pragma once
#include <exception>
#include <string>

#include <fmt/format.h>

#include "runtime/driver.h"
#include "tilejit/attention.h"
#include "tilejit/buffer.h"
#include "tilejit/c_api.h"
#include "tilejit/error.h"
#include "tilejit/launch.h"

namespace tilejit::c_api_detail {

/// Replaces this thread's tilejit_last_error() text (defined in c_api.cpp).
void set_last_error(std::string message);

/// Records the configuration a successful call launched with, for tilejit_last_launch_config() (this
/// thread's; defined in c_api.cpp): tile sizes, and num_warps, num_stages, min_ctas_per_sm and the copy method
/// from `launch`. `kernel` is copied (truncated to the field's size).
void set_last_launch_config(const char *kernel, int block_m, int block_n, int block_k, const LaunchConfig &launch,
                            bool autotuned);

/// Runs f; returns TILEJIT_OK and clears the error, or the code of the exception with the message
/// "<function>: <what>".
template <class F>
int guarded(const char *function, F &&f) {
  auto fail = [&](int code, const char *what) {
    set_last_error(fmt::format("{}: {}", function, what));
    return code;
  };
  try {
    f();
    set_last_error({});
    return TILEJIT_OK;
  } catch (const TraceError &e) {
    return fail(TILEJIT_ERROR_INVALID_ARGUMENT, e.what());
  } catch (const DriverError &e) {
    return fail(TILEJIT_ERROR_DRIVER, e.what());
  } catch (const CompileError &e) {
    return fail(TILEJIT_ERROR_COMPILE, e.what());
  } catch (const VerifyError &e) {
    return fail(TILEJIT_ERROR_COMPILE, e.what());
  } catch (const std::exception &e) {
    return fail(TILEJIT_ERROR_INTERNAL, e.what());
  } catch (...) {
    return fail(TILEJIT_ERROR_INTERNAL, "an unknown exception");
  }
}

/// TILEJIT_DTYPE_BF16 / _F16 → DType; throws TraceError for anything else.
inline DType attention_dtype(int dtype) {
  if (dtype == TILEJIT_DTYPE_BF16) return DType::bf16;
  if (dtype == TILEJIT_DTYPE_F16) return DType::f16;
  throw TraceError(fmt::format("dtype {} is not supported (0: bf16, 1: f16)", dtype));
}

/// Four element strides (batch, head, seq, dim) from a C array; throws TraceError when it is null.
inline attention::Strides strides_of(const int64_t *s, const char *name) {
  if (!s) throw TraceError(fmt::format("{} is null (4 strides in elements are needed: batch, head, seq, dim)", name));
  return {s[0], s[1], s[2], s[3]};
}

/// A caller's pointer; `bytes` (0: unknown) bounds the interpreter's accesses. Throws TraceError naming
/// `name` when it is null.
inline DevicePtr pointer_arg(const void *p, const char *name, size_t bytes = 0) {
  if (!p) throw TraceError(fmt::format("pointer '{}' is null", name));
  return DevicePtr{uint64_t(reinterpret_cast<uintptr_t>(p)), bytes};
}

/// Before freeing memory a queued kernel may still use (the interpreter runs synchronously).
inline void wait_for_device(Backend be) {
  if (be == Backend::GPU) runtime::check(runtime::driver().cuCtxSynchronize(), "cuCtxSynchronize");
}

}  // namespace tilejit::c_api_detail
