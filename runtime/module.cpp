#include "runtime/module.h"

#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/env.h"
#include "runtime/tensor_maps.h"
#include "tilejit/error.h"

namespace tilejit::runtime {
namespace {

// Shared memory a block may use without opting in.
constexpr int kDefaultSharedLimit = 48 * 1024;

// Destroys a link state on every path (the cubin it returns lives inside it).
struct LinkState {
  Driver &d;
  cu::CUlinkState state = nullptr;
  ~LinkState() {
    if (state) d.cuLinkDestroy(state);
  }
};

std::string log_text(const std::vector<char> &log) {
  std::string s(log.data());
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

LinkedCubin link_ptx_to_cubin(const std::string &ptx, const std::string &kernel_name) {
  Driver &d = driver();
  std::vector<char> info_log(16 * 1024, '\0'), error_log(16 * 1024, '\0');
  // Verbose always: the info log's spill report (a few lines per kernel) is how the autotuner drops configs
  // that spill.
  cu::CUjit_option options[] = {cu::CU_JIT_INFO_LOG_BUFFER, cu::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                                cu::CU_JIT_ERROR_LOG_BUFFER, cu::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                                cu::CU_JIT_LOG_VERBOSE};
  void *values[] = {info_log.data(), reinterpret_cast<void *>(uintptr_t(info_log.size() - 1)),
                    error_log.data(), reinterpret_cast<void *>(uintptr_t(error_log.size() - 1)),
                    reinterpret_cast<void *>(uintptr_t(1))};
  LinkState link{d};
  check(d.cuLinkCreate(5, options, values, &link.state), "cuLinkCreate", kernel_name);
  // PTX is passed with its terminating NUL, as the driver expects for text input.
  auto added = d.cuLinkAddData(link.state, cu::CU_JIT_INPUT_PTX, const_cast<char *>(ptx.c_str()), ptx.size() + 1,
                               kernel_name.c_str(), 0, nullptr, nullptr);
  check(added, "cuLinkAddData", kernel_name, fmt::format("PTX JIT error log: {}", log_text(error_log)));
  void *cubin = nullptr;
  size_t cubin_bytes = 0;
  check(d.cuLinkComplete(link.state, &cubin, &cubin_bytes), "cuLinkComplete", kernel_name,
        fmt::format("linker error log: {}", log_text(error_log)));
  LinkedCubin out;
  out.cubin = std::string(static_cast<const char *>(cubin), cubin_bytes);
  out.info_log = log_text(info_log);
  out.spills = parse_spill_report(out.info_log);
  if (!out.info_log.empty()) debug_log("JIT log for '{}': {}", kernel_name, out.info_log);
  return out;
}

LoadedKernel load_kernel(const KernelArtifact &image) {
  Driver &d = driver();
  cu::CUmodule module = nullptr;
  check(d.cuModuleLoadData(&module, image.code.c_str()), "cuModuleLoadData", image.entry);
  LoadedKernel k;
  k.name = image.entry;
  k.shared_bytes = image.shared_bytes;
  k.num_threads = image.num_threads;
  k.spill_stores = image.spill_stores;
  k.spill_loads = image.spill_loads;
  k.tensor_maps = parse_tensor_maps(image.tensor_maps, image.entry);
  cu::CUfunction fn = nullptr;
  check(d.cuModuleGetFunction(&fn, module, image.entry.c_str()), "cuModuleGetFunction", image.entry);
  k.function = fn;
  // The 48 KB default covers static and dynamic shared memory together (codegen declares staged operands
  // static): opt in whenever their sum exceeds it, up to the device's per-block limit minus the static part.
  int static_bytes = 0;
  check(d.cuFuncGetAttribute(&static_bytes, cu::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn), "cuFuncGetAttribute",
        image.entry, "reading SHARED_SIZE_BYTES");
  if (static_bytes + image.shared_bytes > kDefaultSharedLimit) {
    int limit = current_device().max_shared_per_block_optin - static_bytes;
    if (image.shared_bytes > limit) {
      throw DriverError(fmt::format("kernel '{}' needs {} bytes of dynamic shared memory but device '{}' "
                                    "allows at most {} bytes per block beside its static shared memory",
                                    image.entry, image.shared_bytes, current_device().name, limit));
    }
    check(d.cuFuncSetAttribute(fn, cu::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, image.shared_bytes),
          "cuFuncSetAttribute", image.entry,
          fmt::format("opting in to {} bytes of dynamic shared memory", image.shared_bytes));
  }
  check(d.cuFuncGetAttribute(&k.num_regs, cu::CU_FUNC_ATTRIBUTE_NUM_REGS, fn), "cuFuncGetAttribute", image.entry,
        "reading NUM_REGS");
  check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&k.programs_per_sm, fn, k.num_threads, size_t(k.shared_bytes)),
        "cuOccupancyMaxActiveBlocksPerMultiprocessor", image.entry,
        fmt::format("{} threads, {} bytes of dynamic shared memory", k.num_threads, k.shared_bytes));
  return k;
}

}  // namespace tilejit::runtime
