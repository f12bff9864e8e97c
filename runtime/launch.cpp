// runtime::launch: packs the kernel parameters and calls cuLaunchKernel (cuLaunchKernelEx for a programmatic dependent).
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "runtime/driver.h"
#include "runtime/env.h"
#include "runtime/runtime.h"
#include "runtime/tensor_maps.h"
#include "tilejit/error.h"

namespace tilejit::runtime {
namespace {

const char *kind_name(KernelArg::Kind k) {
  switch (k) {
    case KernelArg::Kind::Ptr: return "a pointer";
    case KernelArg::Kind::Int: return "an integer";
    case KernelArg::Kind::Float: return "a float";
  }
  return "?";
}

// Stores one argument into an 8-byte slot in the layout the kernel's parameter expects.
void pack(const ir::ParamInfo &p, const KernelArg &a, const std::string &kernel, uint64_t &slot) {
  auto mismatch = [&](const char *expected) {
    return Error(fmt::format("launch of kernel '{}': parameter '{}' of type {} needs {} argument, got {}",
                             kernel, p.name, p.type.str(), expected, kind_name(a.kind)));
  };
  if (p.type.is_ptr()) {
    if (a.kind != KernelArg::Kind::Ptr) throw mismatch("a pointer");
    slot = a.ptr;  // a 64-bit device address
    return;
  }
  switch (p.type.dtype()) {
    case DType::i32: {
      if (a.kind != KernelArg::Kind::Int) throw mismatch("an integer");
      if (a.i < std::numeric_limits<int32_t>::min() || a.i > std::numeric_limits<int32_t>::max()) {
        throw Error(fmt::format("launch of kernel '{}': argument {} for i32 parameter '{}' is out of the int32 range",
                                kernel, a.i, p.name));
      }
      int32_t v = int32_t(a.i);
      std::memcpy(&slot, &v, sizeof(v));
      return;
    }
    case DType::i64: {
      if (a.kind != KernelArg::Kind::Int) throw mismatch("an integer");
      std::memcpy(&slot, &a.i, sizeof(a.i));
      return;
    }
    case DType::f32: {
      if (a.kind != KernelArg::Kind::Float && a.kind != KernelArg::Kind::Int) throw mismatch("a float");
      float v = a.kind == KernelArg::Kind::Float ? float(a.f) : float(a.i);
      std::memcpy(&slot, &v, sizeof(v));
      return;
    }
    default:
      throw Error(fmt::format("launch of kernel '{}': parameter '{}' has type {}; kernel parameters must be "
                              "pointers, i32, i64 or f32", kernel, p.name, p.type.str()));
  }
}

}  // namespace

void launch(const LoadedKernel &k, Grid grid, const std::vector<ir::ParamInfo> &params,
            const std::vector<KernelArg> &args, Stream *stream) {
  if (args.size() != params.size()) {
    throw Error(fmt::format("launch of kernel '{}': {} arguments given, the kernel has {} parameters", k.name,
                            args.size(), params.size()));
  }
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;  // nothing to run
  if (grid.x > uint32_t(std::numeric_limits<int32_t>::max()) || grid.y > 65535 || grid.z > 65535) {
    throw Error(fmt::format("launch of kernel '{}': grid ({}, {}, {}) exceeds the CUDA limits (x < 2^31, "
                            "y and z <= 65535)", k.name, grid.x, grid.y, grid.z));
  }
  std::vector<uint64_t> slots(args.size());
  std::vector<void *> pointers(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    pack(params[i], args[i], k.name, slots[i]);
    pointers[i] = &slots[i];
  }
  // The tensor maps of its TMA copies follow the kernel's own parameters (codegen/tma.h).
  std::vector<EncodedTensorMap> maps;
  if (k.tensor_maps) {
    encode_tensor_maps(*k.tensor_maps, params, args, k.name, maps);
    for (EncodedTensorMap &m : maps) pointers.push_back(&m);
  }
  auto s = stream ? static_cast<cu::CUstream>(stream->handle()) : nullptr;
  if (void *capturing = capturing_stream(); capturing && capturing != s) {
    std::string where = s ? fmt::format("stream {}", fmt::ptr(s)) : "the default stream";
    throw Error(fmt::format("launch of kernel '{}' on {} while this thread captures a CudaGraph on stream {}: the "
                            "launch would run now and be missing from the graph; pass the captured Stream as "
                            "LaunchConfig::stream", k.name, where, fmt::ptr(capturing)));
  }
  Driver &d = driver();
  auto detail = [&] {
    return fmt::format("grid=({},{},{}) block=({},1,1) dynamic smem={} B", grid.x, grid.y, grid.z, k.num_threads,
                       k.shared_bytes);
  };
  auto fn = static_cast<cu::CUfunction>(k.function);
  // The switch is read per launch (getenv; tests change it with setenv between launches, never concurrently).
  if (k.waits_for_prior_grid && !env_flag(Env::DisableOverlap)) {
    // A programmatic dependent of the stream's previous kernel: the kernel waits for it before touching memory
    // (codegen::waits_for_prior_grid), so only its launch and its programs' start overlap that kernel's end.
    cu::CUlaunchAttribute overlap{};
    overlap.id = cu::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    overlap.value.programmatic_stream_serialization_allowed = 1;
    cu::CUlaunchConfig c{grid.x, grid.y, grid.z, unsigned(k.num_threads), 1, 1, unsigned(k.shared_bytes), s,
                         &overlap, 1};
    check(d.cuLaunchKernelEx(&c, fn, pointers.data(), nullptr), "cuLaunchKernelEx", k.name,
          detail() + ", a programmatic dependent of the stream's previous kernel");
    return;
  }
  check(d.cuLaunchKernel(fn, grid.x, grid.y, grid.z, unsigned(k.num_threads), 1, 1, unsigned(k.shared_bytes), s,
                         pointers.data(), nullptr),
        "cuLaunchKernel", k.name, detail());
}

}  // namespace tilejit::runtime
