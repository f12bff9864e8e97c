// Turning PTX into a loaded kernel with the driver: link (PTX → cubin by the driver's JIT) and load.
#pragma once
#include <string>

#include "runtime/kernel_artifact.h"
#include "runtime/runtime.h"

namespace tilejit::runtime {

/// Compiles `ptx` into a cubin for the current device with cuLinkCreate/cuLinkAddData/cuLinkComplete.
/// Throws DriverError naming the call and `kernel_name`, with the JIT's error log appended.
std::string link_ptx_to_cubin(const std::string &ptx, const std::string &kernel_name);

/// Loads a cubin (or PTX) image with cuModuleLoadData and finds its entry function. When the kernel
/// needs more than 48 KiB of dynamic shared memory it opts in (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
/// above the device's opt-in limit it throws DriverError naming the kernel and both sizes.
/// The module stays loaded until the process exits.
LoadedKernel load_kernel(const KernelArtifact &image);

}  // namespace tilejit::runtime
