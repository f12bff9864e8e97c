#include "runtime/device.h"

#include <fmt/format.h>

#include "runtime/driver.h"
#include "runtime/runtime.h"
#include "tilejit/error.h"

namespace tilejit::runtime {

std::string arch_for_compute_capability(int major, int minor) {
  if (major < 8) {
    throw DriverError(fmt::format("compute capability {}.{} is not supported: tilejit needs sm_80 or newer",
                                  major, minor));
  }
  if (major == 9 && minor == 0) return "sm_90a";
  if (major == 8 || major == 9) return fmt::format("sm_{}{}", major, minor);
  return "sm_90";
}

namespace {
DeviceInfo query_device() {
  Driver &d = driver();
  DeviceInfo info;
  char name[256] = {};
  check(d.cuDeviceGetName(name, sizeof(name) - 1, d.device), "cuDeviceGetName");
  info.name = name;
  auto attribute = [&](cu::CUdevice_attribute attr, const char *what) {
    int value = 0;
    check(d.cuDeviceGetAttribute(&value, attr, d.device), "cuDeviceGetAttribute", {}, what);
    return value;
  };
  info.cc_major = attribute(cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major");
  info.cc_minor = attribute(cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor");
  info.sm_count = attribute(cu::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count");
  info.max_shared_per_block_optin =
      attribute(cu::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "max shared memory per block (opt-in)");
  info.arch = arch_for_compute_capability(info.cc_major, info.cc_minor);
  return info;
}
}  // namespace

const DeviceInfo &current_device() {
  static const DeviceInfo info = query_device();  // a throw leaves it uninitialized: retried next call
  return info;
}

std::string device_arch() { return current_device().arch; }

}  // namespace tilejit::runtime

namespace tilejit {
DeviceInfo device_info() { return runtime::current_device(); }
}  // namespace tilejit
