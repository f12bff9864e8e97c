// Copies by Hopper's Tensor Memory Accelerator (TMA): which pipelined loads a tensor map can copy, and the map.
//
// A load qualifies (tma_tile) when its tile is an affine 2-D block of one tensor: pointers
//   root + (row0 + i)·stride + (col0 + j)       i < rows, j < cols (the tile's shape)
// with `root` a 16-byte aligned pointer parameter, `stride` a value known at launch (a constant times integer
// parameters) whose bytes are a multiple of 16, row0 and col0 i32 sums of scalars the kernel computes (program
// ids, a loop's induction variable, ...) that cannot be negative, and the mask exactly `row < R & col < C` with R
// and C known at launch — `other` zero. The tensor map (cuTensorMapEncodeTiled; CUDA Driver API, "Tensor Map
// Object Management") then describes an R×C tensor of that stride, and the copy
// `cp.async.bulk.tensor.2d` (PTX ISA 9.7.9.25.5.1) reads a box at (col0, row0), filling elements outside the
// tensor with zeros as the masked load reads `other`. The copy writes the box with the 128-, 64- or 32-byte
// swizzle that the stage buffer's swizzled staging has (lower_dot_mma.cpp's swizzled_chunk is that pattern
// for a 1024-byte aligned buffer), one box per 64-column panel, and per 8 rows when wgmma reads A in its own
// row order (wgmma_a_row). It assumes the kernel's i32 index arithmetic does not wrap, as the addresses do.
//
// The runtime encodes each map at launch from the arguments (launch_value) and passes it as a 128-byte
// `.param` aligned to 64 bytes after the kernel's own parameters, read in place (`nvvm.grid_constant`).
// Pure; no LLVM.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/ir.h"
#include "tilejit/export.h"
#include "tilejit/launch.h"

namespace tilejit::codegen {

/// A value known at launch: factor · Π (the integer arguments of the kernel parameters `params`).
struct LaunchValue {
  int64_t factor = 1;
  std::vector<int> params;  // sorted parameter indices
  bool operator==(const LaunchValue &) const = default;
  /// Its value for a launch's arguments (nullopt when it overflows int64).
  std::optional<int64_t> at(const std::vector<KernelArg> &args) const;
};

/// What the runtime encodes into one tensor map (cuTensorMapEncodeTiled, rank 2, no interleave, zero fill).
struct TensorMapSpec {
  int base_param = 0;             // the pointer parameter: the tensor's first element
  DType dtype = DType::bf16;      // element type (16-bit: f16, bf16)
  LaunchValue rows, cols;         // the tensor's extent (the mask's bounds); a value ≤ 0 is encoded as 1 and the
                                  // kernel moves its copies' coordinates past it (everything masked reads zeros)
  LaunchValue row_stride;         // elements between rows
  int64_t box_rows = 0, box_cols = 0;  // one copy's box, elements
  int swizzle_bytes = 128;        // 0 (none), 32, 64 or 128
  bool operator==(const TensorMapSpec &) const = default;
};

/// "base=p0 rows=p3 cols=p5 stride=p6 box=128x64 swizzle=128 bf16" (p<i>: parameter i; a factor other than 1 is
/// written first: "2*p3"); parse_tensor_map reads it back (nullopt when malformed).
TILEJIT_EXPORT std::string tensor_map_text(const TensorMapSpec &s);
TILEJIT_EXPORT std::optional<TensorMapSpec> parse_tensor_map(const std::string &text);

/// A scalar sum Σ value·multiplier + constant: a copy's coordinate.
struct ScalarSum {
  std::vector<std::pair<const ir::Value *, int64_t>> terms;
  int64_t constant = 0;
};

/// How a pipelined load is copied by TMA: its map (less the box, which the pipeline chooses) and where the tile
/// starts in it.
struct TmaTile {
  TensorMapSpec map;
  ScalarSum row0, col0;
};

/// The TMA form of `load` in fn (nullopt, with the reason in `why` when given, when it does not qualify).
/// `loop`: the for op whose body holds the load (its induction variable counts as ≥ 0 when its lower bound is and
/// its step is a positive constant).
std::optional<TmaTile> tma_tile(const ir::Function &fn, const ir::Op &load, const ir::Op &loop,
                                std::string *why = nullptr);

}  // namespace tilejit::codegen
