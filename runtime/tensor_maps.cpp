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

void encode_tensor_maps(const TensorMaps &maps, const std::vector<KernelArg> &args, const std::string &kernel,
                        std::vector<EncodedTensorMap> &out) {
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
    const int64_t rows = value(s.rows, "row extent"), cols = value(s.cols, "column extent");
    const int64_t stride = value(s.row_stride, "row stride");
    const int64_t elem = 2;
    // An extent ≤ 0 masks every element: the kernel moves its coordinates past an extent of 1 (codegen/tma.h).
    const uint64_t dims[2] = {uint64_t(std::max<int64_t>(cols, 1)), uint64_t(std::max<int64_t>(rows, 1))};
    if (base % 16) throw fail(fmt::format("its base address {:#x} is not 16-byte aligned", base));
    if (dims[0] > (uint64_t(1) << 32) || dims[1] > (uint64_t(1) << 32))
      throw fail(fmt::format("its extent {}x{} exceeds 2^32 elements in a dimension", rows, cols));
    if (stride <= 0 || (stride * elem) % 16 || stride * elem >= (int64_t(1) << 40))
      throw fail(fmt::format("its row stride of {} elements is not a positive multiple of 16 bytes below 2^40",
                             stride));
    const uint64_t strides[1] = {uint64_t(stride * elem)};
    const unsigned box[2] = {unsigned(s.box_cols), unsigned(s.box_rows)};
    const unsigned unit[2] = {1, 1};
    // cuda.h: CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6, BFLOAT16 = 9; SWIZZLE_NONE/32B/64B/128B = 0..3;
    // L2_PROMOTION_L2_128B = 2; INTERLEAVE_NONE and FLOAT_OOB_FILL_NONE (zeros) = 0.
    const int dtype = s.dtype == DType::f16 ? 6 : 9;
    const int swizzle = s.swizzle_bytes == 128 ? 3 : s.swizzle_bytes == 64 ? 2 : s.swizzle_bytes == 32 ? 1 : 0;
    check(driver().cuTensorMapEncodeTiled(out[i].words, dtype, 2, reinterpret_cast<void *>(base), dims, strides, box,
                                          unit, 0, swizzle, 2, 0),
          "cuTensorMapEncodeTiled", kernel,
          fmt::format("tensor map {} ({}) of {}x{} elements, row stride {} B at {:#x}", i, maps.texts[i], rows, cols,
                      strides[0], base));
  }
}

}  // namespace tilejit::runtime
