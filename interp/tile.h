// Runtime storage of one IR value in the interpreter: a flat row-major array of the tile's elements.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/ir.h"

namespace tilejit::interp {

/// Float dtypes live in `f` (already rounded to their dtype); integers and i1 live in `i` (wrapped to
/// their bit width; i1 is 0 or 1); pointers live in `i` as the bit pattern of the uint64 byte address.
/// Only one of the two vectors is used for a given value; both keep their capacity across programs and
/// loop iterations so steady-state execution does not allocate.
///
/// Pointer tiles also carry their provenance in `prov`: per element, the index of the kernel argument the
/// address was derived from (kNoProvenance for addresses cast from integers or pointer constants). Memory
/// ops check an address against its own argument's range, so running past one buffer into the next one
/// is caught. `prov` holds either one entry (the same for every element: the common case, kept cheap) or
/// one per element.
struct Tile {
  std::vector<double> f;
  std::vector<int64_t> i;
  std::vector<int32_t> prov;
};

inline constexpr int32_t kNoProvenance = -1;

/// True when values of type t are stored in Tile::f.
inline bool stores_float(const ir::Type &t) { return !t.is_ptr() && is_float(t.dtype()); }

}  // namespace tilejit::interp
