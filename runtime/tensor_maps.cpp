// Tensor maps for TMA copies (runtime/tensor_maps.h).
#include "runtime/tensor_maps.h"

#include <fmt/format.h>

#include "codegen/tma.h"
#include "runtime/driver.h"
#include "tilejit/error.h"

namespace tilejit::runtime {

struct TensorMaps {
  std::vector<codegen::TensorMapSpec> specs;
  std::vector<std::string> texts;
};

std::shared_ptr<const TensorMaps> parse_tensor_maps(const std::vector<std::string> &texts, const std::string &kernel) {
  if (texts.empty()) return nullptr;
  auto maps = std::make_shared<TensorMaps>();
  for (const std::string &t : texts) {
    std::optional<codegen::TensorMapSpec> s = codegen::parse_tensor_map(t);
    if (!s) throw Error(fmt::format("kernel '{}': tensor map '{}' does not parse", kernel, t));
    maps->specs.push_back(*s);
    maps->texts.push_back(t);
  }
  return maps;
}

void encode_tensor_maps(const TensorMaps &maps, const std::vector<ir::ParamInfo> &params,
                        const std::vector<KernelArg> &args, const std::string &kernel, std::vector<EncodedTensorMap> &out) {
  auto name = [&](int p) {
    return p >= 0 && size_t(p) < params.size() ? fmt::format("'{}'", params[size_t(p)].name) : fmt::format("{}", p);
  };
  out.assign(maps.specs.size(), EncodedTensorMap{});
  for (size_t i = 0; i < maps.specs.size(); ++i) {
    const codegen::TensorMapSpec &s = maps.specs[i];
    auto fail = [&](const std::string &why) {
      return Error(fmt::format("launch of kernel '{}': TMA tensor map {} ({}): {}; launch with LaunchConfig::tma off "
                               "to copy with cp.async instead", kernel, i, maps.texts[i], why));
    };
    auto value = [&](const codegen::LaunchValue &v, const char *what) {
      std::optional<int64_t> x = v.at(args);
      if (!x) throw fail(fmt::format("its {} is not an integer argument product within int64", what));
      return *x;
    };
    if (s.base_param < 0 || size_t(s.base_param) >= args.size() || args[size_t(s.base_param)].kind != KernelArg::Kind::Ptr)
      throw fail("its base is not a pointer argument");
    const uint64_t base = args[size_t(s.base_param)].ptr;
    const int rank = int(s.dims.size());
    if (rank < 2 || rank > 5) throw fail(fmt::format("it has {} dimensions (TMA takes 2 to 5)", rank));
    // An extent ≤ 0 masks every element: the kernel moves its coordinates past an extent of 1 (codegen/tma.h).
    uint64_t dims[5] = {}, strides[4] = {};
    unsigned box[5] = {unsigned(s.box_cols), unsigned(s.box_rows), 1, 1, 1}, unit[5] = {1, 1, 1, 1, 1};
    std::string extents;
    for (int d = 0; d < rank; ++d) {
      const int64_t stride = d == 0 ? 1 : value(s.dims[size_t(d)].stride, "stride");
      // Unbounded: as far as any address of the device could lie (2^47 bytes), within the 2^31 − 1 of codegen.
      const int64_t extent = s.dims[size_t(d)].extent ? value(*s.dims[size_t(d)].extent, "extent")
                             : stride > 0 ? std::min<int64_t>(codegen::kUnboundedExtent, (int64_t(1) << 46) / stride)
                                          : codegen::kUnboundedExtent;
      dims[d] = uint64_t(std::max<int64_t>(extent, 1));
      if (dims[d] > (uint64_t(1) << 32)) throw fail(fmt::format("its extent {} along dim {} exceeds 2^32", extent, d));
      extents += fmt::format("{}{}", d ? "x" : "", extent);
      if (d == 0) continue;
      if (stride <= 0 || (stride * 2) % 16 || stride * 2 >= (int64_t(1) << 40))
        throw fail(fmt::format("its stride of {} elements along dim {} is not a positive multiple of 16 bytes below "
                               "2^40", stride, d));
      strides[d - 1] = uint64_t(stride * 2);
    }
    if (base % 16) throw fail(fmt::format("its base address {:#x} is not 16-byte aligned", base));
    for (int p : s.assumed) {
      if (p < 0 || size_t(p) >= args.size() || args[size_t(p)].kind != KernelArg::Kind::Int)
        throw fail(fmt::format("parameter {} it takes to be ≥ 0 is not an integer argument", name(p)));
      if (args[size_t(p)].i < 0)
        throw fail(fmt::format("parameter {} is {}, and its copies' coordinates take it to be ≥ 0", name(p),
                               args[size_t(p)].i));
    }
    // cuda.h: CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6, BFLOAT16 = 9; SWIZZLE_NONE/32B/64B/128B = 0..3;
    // L2_PROMOTION_L2_128B = 2; INTERLEAVE_NONE and FLOAT_OOB_FILL_NONE (zeros) = 0.
    const int dtype = s.dtype == DType::f16 ? 6 : 9;
    const int swizzle = s.swizzle_bytes == 128 ? 3 : s.swizzle_bytes == 64 ? 2 : s.swizzle_bytes == 32 ? 1 : 0;
    check(driver().cuTensorMapEncodeTiled(out[i].words, dtype, unsigned(rank), reinterpret_cast<void *>(base), dims,
                                          strides, box, unit, 0, swizzle, 2, 0),
          "cuTensorMapEncodeTiled", kernel,
          fmt::format("tensor map {} ({}) of extents {} at {:#x}", i, maps.texts[i], extents, base));
  }
}

}  // namespace tilejit::runtime
