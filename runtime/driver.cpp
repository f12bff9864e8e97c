#include "runtime/driver.h"

#include <algorithm>

#include <dlfcn.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "runtime/env.h"
#include "tilejit/error.h"

namespace tilejit::runtime {
namespace {

constexpr const char *kDefaultLibrary = "libcuda.so.1";

// No usable driver: `cause`, and the advice for C++ callers in the message (DriverError::cause keeps it apart).
DriverError unusable(const std::string &cause, int code = -1) {
  return DriverError(cause + "; use Backend::Interpreter or set TILEJIT_INTERPRET=1", code, cause);
}

// The outcome of the one attempt to load the driver: either a driver or the error to rethrow.
struct LoadResult {
  std::unique_ptr<Driver> driver;
  std::optional<DriverError> error;
};

// Set once the driver is loaded, so describe_result() can ask it for error names.
std::atomic<Driver *> g_loaded{nullptr};

void load_symbols(Driver &d, void *lib, const std::string &path) {
#define CUDA_FN(member, symbol, params)                                                          \
  d.member = reinterpret_cast<decltype(d.member)>(dlsym(lib, symbol));                           \
  if (!d.member) {                                                                               \
    throw unusable(fmt::format("CUDA driver {} lacks the entry point {} (driver too old?)", path,  \
                               symbol));                                                         \
  }
#include "runtime/cuda_api.def"
#undef CUDA_FN
}

// Device and context setup, with driver errors turned into DriverError through `d` itself.
void init_device(Driver &d) {
  auto fail = [&](cu::CUresult r, const char *call) {
    if (r == cu::CUDA_SUCCESS) return;
    const char *name = nullptr, *text = nullptr;
    d.cuGetErrorName(r, &name);
    d.cuGetErrorString(r, &text);
    throw unusable(fmt::format("{} failed: {} ({})", call, name ? name : "unknown CUresult",
                               text ? text : "no description"),
                   r);
  };
  fail(d.cuInit(0), "cuInit");
  fail(d.cuDriverGetVersion(&d.version), "cuDriverGetVersion");
  int count = 0;
  fail(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
  int ordinal = 0;
  try {
    if (auto v = env_int(Env::Device)) ordinal = int(std::clamp<int64_t>(*v, -1, 1 << 20));
  } catch (const Error &) {
    throw DriverError(fmt::format("TILEJIT_DEVICE='{}' is not a device ordinal", env_string(Env::Device)));
  }
  if (count == 0) {
    throw unusable("the CUDA driver reports no device");
  }
  if (ordinal < 0 || ordinal >= count) {
    throw DriverError(fmt::format("TILEJIT_DEVICE={} is out of range: the driver reports {} device(s)",
                                  env_string(Env::Device), count));
  }
  fail(d.cuDeviceGet(&d.device, ordinal), "cuDeviceGet");
  fail(d.cuDevicePrimaryCtxRetain(&d.context, d.device), "cuDevicePrimaryCtxRetain");
}

const LoadResult &loaded() {
  static const LoadResult result = [] {
    LoadResult r;
    std::string path = env_string(Env::CudaLibrary);
    try {
      r.driver = load_driver(path.empty() ? kDefaultLibrary : path);
      g_loaded = r.driver.get();
    } catch (const DriverError &e) {
      r.error = e;
      debug_log("{}", e.what());
    }
    return r;
  }();
  return result;
}

}  // namespace

std::unique_ptr<Driver> load_driver(const std::string &path) {
  // Never dlclose: the driver stays loaded for the process's lifetime (destructors of buffers and
  // modules may run during exit).
  void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    throw unusable(fmt::format("CUDA driver {} could not be loaded ({})", path, why ? why : "unknown dlopen error"));
  }
  auto d = std::make_unique<Driver>();
  load_symbols(*d, lib, path);
  init_device(*d);
  debug_log("loaded CUDA driver {} (version {}), device {}", path, d->version, d->device);
  return d;
}

Driver &driver() {
  const LoadResult &r = loaded();
  if (!r.driver) throw *r.error;
  // The primary context must be current on every thread that calls the driver; set it once per thread.
  thread_local bool context_current = false;
  if (!context_current) {
    check(r.driver->cuCtxSetCurrent(r.driver->context), "cuCtxSetCurrent");
    context_current = true;
  }
  return *r.driver;
}

std::string describe_result(cu::CUresult result) {
  const char *name = nullptr, *text = nullptr;
  if (Driver *d = g_loaded.load()) {
    d->cuGetErrorName(result, &name);
    d->cuGetErrorString(result, &text);
  }
  if (!name) return fmt::format("CUresult {}", result);
  return fmt::format("{} ({})", name, text ? text : "no description");
}

void check(cu::CUresult result, std::string_view call, std::string_view kernel, std::string_view detail) {
  if (result == cu::CUDA_SUCCESS) return;
  std::string message = kernel.empty()
                            ? fmt::format("{} failed: {}", call, describe_result(result))
                            : fmt::format("{} failed for kernel '{}': {}", call, kernel, describe_result(result));
  if (!detail.empty()) message += fmt::format("; {}", detail);
  throw DriverError(message, result);
}

}  // namespace tilejit::runtime
