// Properties of the device the runtime uses, queried once from the driver.
#pragma once
#include <string>

#include "tilejit/device.h"

namespace tilejit::runtime {

/// The cached DeviceInfo of the driver's device (see tilejit::device_info). Throws DriverError.
const DeviceInfo &current_device();

/// The codegen target for a compute capability: 9.0 → "sm_90a" (wgmma and TMA need the 'a' target),
/// 8.0/8.6/8.7/8.9 → "sm_8x", newer GPUs → "sm_90" (LLVM 19 knows no newer target; the driver JIT-compiles
/// sm_90 PTX for them). Throws DriverError for compute capabilities below 8.0.
std::string arch_for_compute_capability(int major, int minor);

}  // namespace tilejit::runtime
