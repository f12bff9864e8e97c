// The CUDA driver, dlopen'ed once per process (libcuda.so.1, or $TILEJIT_CUDA_LIBRARY), with every
// entry point of cuda_api.def resolved, cuInit called, and the device's primary context retained.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "runtime/cuda_types.h"

namespace tilejit::runtime {

/// Function pointers to the driver, one per line of cuda_api.def, plus the chosen device and context.
struct Driver {
#define CUDA_FN(member, symbol, params) cu::CUresult(*member) params = nullptr;
  using CUresult = cu::CUresult;
  using CUdevice = cu::CUdevice;
  using CUdeviceptr = cu::CUdeviceptr;
  using CUcontext = cu::CUcontext;
  using CUmodule = cu::CUmodule;
  using CUfunction = cu::CUfunction;
  using CUstream = cu::CUstream;
  using CUevent = cu::CUevent;
  using CUlinkState = cu::CUlinkState;
  using CUdevice_attribute = cu::CUdevice_attribute;
  using CUfunction_attribute = cu::CUfunction_attribute;
  using CUjit_option = cu::CUjit_option;
  using CUjitInputType = cu::CUjitInputType;
  using CUgraph = cu::CUgraph;
  using CUgraphNode = cu::CUgraphNode;
  using CUgraphExec = cu::CUgraphExec;
  using CUstreamCaptureMode = cu::CUstreamCaptureMode;
  using CUgraphNodeType = cu::CUgraphNodeType;
  using CUlaunchConfig = cu::CUlaunchConfig;
#include "runtime/cuda_api.def"
#undef CUDA_FN
  cu::CUdevice device = 0;
  cu::CUcontext context = nullptr;
  int version = 0;  // cuDriverGetVersion: 13000 for CUDA 13.0
};

/// The loaded driver with the primary context made current on the calling thread.
/// Throws DriverError when the library cannot be loaded, a symbol is missing, cuInit fails or there is
/// no device; the message suggests Backend::Interpreter / TILEJIT_INTERPRET=1. Thread-safe; the load
/// happens once, and a failure is remembered (later calls throw the same error without retrying).
Driver &driver();

/// Loads the driver library at `path` and initializes it, without caching and without making the context
/// current: driver() does this once for the process; tests call it directly to check the errors.
/// Throws DriverError ("CUDA driver <path> could not be loaded (<dlerror>); use Backend::Interpreter ...").
std::unique_ptr<Driver> load_driver(const std::string &path);

/// Throws DriverError unless `result` is CUDA_SUCCESS:
/// "<call> failed for kernel '<kernel>': CUDA_ERROR_X (<driver's description>)[; <detail>]".
/// `kernel` and `detail` may be empty.
void check(cu::CUresult result, std::string_view call, std::string_view kernel = {},
           std::string_view detail = {});

/// "CUDA_ERROR_X (description)" for a result code, using the driver when it is loaded.
std::string describe_result(cu::CUresult result);

}  // namespace tilejit::runtime
