// The last element a strided tensor addresses, computed exactly: the kernels index with 64-bit offsets, so a
// tensor whose strides reach 2^62 elements or more is refused before it could wrap.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>

namespace tilejit::kernels {

/// A dim of a strided tensor: `count` indices (≥ 1) `stride` elements apart (≥ 0).
struct StridedDim {
  int64_t count = 1, stride = 0;
};

/// Σ (count − 1)·stride over `dims`, computed in 128 bits: the offset of the tensor's last element; nullopt when it
/// reaches 2^62 elements.
inline std::optional<int64_t> last_offset(std::initializer_list<StridedDim> dims) {
  __int128 last = 0;
  for (const StridedDim &d : dims) last += __int128(d.count - 1) * d.stride;
  if (last >= (__int128(1) << 62)) return std::nullopt;
  return int64_t(last);
}

}  // namespace tilejit::kernels
