// The interpreter uses the dtype numerics of ir/numerics.h (bf16/f16/tf32 rounding, integer wrapping)
// under its own namespace.
#pragma once
#include "ir/numerics.h"

namespace tilejit::interp {
using namespace tilejit::numerics;
}  // namespace tilejit::interp
