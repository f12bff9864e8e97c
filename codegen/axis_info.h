// A small contiguity analysis ("axis info") along the last dim of integer and pointer tiles, used to decide
// when a thread's consecutive registers can be loaded/stored as one vector. Pure; no LLVM.
//
// For a value x (tile of rank ≥ 1) along its last dim, splitting the last dim into aligned groups:
//   contig    – x increases by exactly 1 element inside aligned groups of this many coordinates;
//   constancy – x is the same inside aligned groups of this many coordinates;
//   div       – the value at the start of every `contig` group is divisible by div (for pointers: a byte
//               address divisible by div); with contig == 1 it holds for every element.
// For scalars only div matters. All numbers are powers of two, capped at 2^30.
#pragma once
#include <cstdint>
#include <unordered_map>

#include "ir/ir.h"
#include "tilejit/export.h"

namespace tilejit::codegen {

struct AxisInfo {
  int64_t contig = 1;
  int64_t constancy = 1;
  int64_t div = 1;
  friend bool operator==(const AxisInfo &, const AxisInfo &) = default;
};

using AxisInfoMap = std::unordered_map<const ir::Value *, AxisInfo>;

/// Analyzes every value of fn (loop-carried values reach a fixed point by meeting init and yield).
TILEJIT_EXPORT AxisInfoMap analyze_axis_info(const ir::Function &fn);

/// Largest power of two dividing v (2^30 for 0).
TILEJIT_EXPORT int64_t pow2_divisor(int64_t v);

}  // namespace tilejit::codegen
