// What the current CUDA device is (device 0, or the ordinal in the environment variable TILEJIT_DEVICE).
#pragma once
#include <string>

namespace tilejit {

struct DeviceInfo {
  std::string name;                    // "NVIDIA H200"
  std::string arch;                    // the codegen target: "sm_90a" for compute capability 9.0, "sm_80", ...
  int sm_count = 0;                    // streaming multiprocessors
  int max_shared_per_block_optin = 0;  // bytes of shared memory one block may use after opting in
  int cc_major = 0, cc_minor = 0;      // compute capability
};

/// The current device's properties (queried once, then cached). Throws DriverError without a GPU.
DeviceInfo device_info();

}  // namespace tilejit
