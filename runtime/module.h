// Turning PTX into a loaded kernel with the driver: link (PTX → cubin by the driver's JIT) and load.
#pragma once
#include <string>

#include "runtime/jit_log.h"
#include "runtime/kernel_artifact.h"
#include "runtime/runtime.h"

namespace tilejit::runtime {

/// A linked cubin and what the driver's JIT (ptxas) said about it.
struct LinkedCubin {
  std::string cubin;
  std::string info_log;  // the verbose info log: registers, stack frame and spills per function
  SpillReport spills;    // parsed from info_log
};

/// Compiles `ptx` into a cubin for the current device with cuLinkCreate/cuLinkAddData/cuLinkComplete, with the
/// verbose info log on (CU_JIT_LOG_VERBOSE) so ptxas reports spills. Thread-safe (the driver's JIT is), so the
/// autotuner links candidates on several host threads at once. Throws DriverError naming the call and
/// `kernel_name`, with the JIT's error log appended.
LinkedCubin link_ptx_to_cubin(const std::string &ptx, const std::string &kernel_name);

/// Loads a cubin (or PTX) image with cuModuleLoadData and finds its entry function. When the kernel
/// needs more than 48 KiB of dynamic shared memory it opts in (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
/// above the device's opt-in limit it throws DriverError naming the kernel and both sizes.
/// The module stays loaded until the process exits.
LoadedKernel load_kernel(const KernelArtifact &image);

}  // namespace tilejit::runtime
