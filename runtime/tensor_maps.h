// The tensor maps of a kernel's TMA copies (codegen/tma.h), encoded for each launch from its arguments with the
// driver's cuTensorMapEncodeTiled (CUDA Driver API, "Tensor Map Object Management").
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace tilejit::runtime {

/// One encoded CUtensorMap: 128 bytes, 64-byte aligned, passed by value as a kernel parameter.
struct alignas(64) EncodedTensorMap {
  uint64_t words[16];
};

/// The specs of `texts` (codegen::PtxResult::tensor_maps) for kernel `kernel`; null when there are none. Throws
/// Error naming the kernel for a text that does not parse (a corrupt cache entry is rebuilt before this).
std::shared_ptr<const TensorMaps> parse_tensor_maps(const std::vector<std::string> &texts, const std::string &kernel);
/// Encodes each map for a launch with `args` (the kernel's own parameters, `params`: their names) into `out`. Throws Error naming the
/// kernel, the map and the values when an extent, stride or address does not suit TMA, and DriverError when
/// the driver refuses the map.
void encode_tensor_maps(const TensorMaps &maps, const std::vector<ir::ParamInfo> &params,
                        const std::vector<KernelArg> &args, const std::string &kernel, std::vector<EncodedTensorMap> &out);

}  // namespace tilejit::runtime
