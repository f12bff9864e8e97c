// Copies by Hopper's Tensor Memory Accelerator (TMA): which pipelined loads a tensor map can copy, and the map.
//
// A load qualifies (tma_tile) when its tile is an affine 2-D block of one tensor: pointers
//   root + Σ_k x_k·S_k + (row0 + i)·stride + (col0 + j)       i < rows, j < cols (the tile's shape)
// with
// - `root` a 16-byte aligned pointer parameter;
// - `stride` and each S_k known at launch (a constant times integer parameters), their bytes multiples of 16;
// - row0, col0 and at most three x_k i32 sums of scalars the kernel computes (program ids, a loop's induction
//   variable, their quotients, ...) that cannot be negative, given that the integer parameters they read are
//   ≥ 0, which each launch checks (TensorMapSpec::assumed);
// - the mask `row < R`, `col < C`, both or none, R and C known at launch, and `other` zero.
// The tensor map (cuTensorMapEncodeTiled; CUDA Driver API, "Tensor Map Object Management") then describes a
// tensor of extents (C, R, unbounded...) and strides (1, stride, S_k...), and the copy `cp.async.bulk.tensor.Nd`
// (PTX ISA 9.7.9.25.5.1) reads a box at (col0, row0, x_k...), filling elements outside the extents with zeros as
// the masked load reads `other`. The copy writes the box with the 128-, 64- or 32-byte swizzle that the stage
// buffer's swizzled staging has (lower_dot_mma.cpp's swizzled_chunk is that pattern for a 1024-byte aligned
// buffer), one box per 64-column panel, and per 8 rows when wgmma reads A in its own row order (wgmma_a_row). It
// assumes the kernel's i32 index arithmetic does not wrap, as the addresses do.
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
struct TILEJIT_EXPORT LaunchValue {
  int64_t factor = 1;
  std::vector<int> params;  // sorted parameter indices
  bool operator==(const LaunchValue &) const = default;
  /// Its value for a launch's arguments (nullopt when it overflows int64).
  std::optional<int64_t> at(const std::vector<KernelArg> &args) const;
};

/// One dimension of a tensor map: its extent (the mask's bound; none where the load is not masked along it, then
/// encoded as kUnboundedExtent) and the elements between its consecutive indices.
struct TensorMapDim {
  std::optional<LaunchValue> extent;
  LaunchValue stride;
  bool operator==(const TensorMapDim &) const = default;
};

/// The extent a dimension the load does not mask is encoded with (cuTensorMapEncodeTiled allows up to 2^32).
inline constexpr int64_t kUnboundedExtent = (int64_t(1) << 31) - 1;

/// What the runtime encodes into one tensor map (cuTensorMapEncodeTiled, no interleave, zero fill): dims[0] the
/// tile's columns (stride 1), dims[1] its rows, further dims one per other offset of the tile's pointers (a batch
/// or head index times its stride; box 1).
struct TensorMapSpec {
  int base_param = 0;             // the pointer parameter: the tensor's first element
  DType dtype = DType::bf16;      // element type (16-bit: f16, bf16)
  std::vector<TensorMapDim> dims; // 2 to 5. An extent ≤ 0 at a launch is encoded as 1 and the kernel moves its
                                  // copies' coordinates past it (everything masked reads zeros)
  int64_t box_rows = 0, box_cols = 0;  // one copy's box, elements (1 along the further dims)
  int swizzle_bytes = 128;        // 0 (none), 32, 64 or 128
  /// Integer parameters the copies' coordinates take to be ≥ 0 (a sequence length, a divisor): the launch checks
  /// them, since TMA reads zeros at a negative coordinate where the load would read memory.
  std::vector<int> assumed;
  bool operator==(const TensorMapSpec &) const = default;
};

/// "base=p0 bf16 box=128x64 swizzle=128 dims=p5:1,p3:p6,*:p9[ assumes=p8,p2]" (each dim extent:stride; p<i>:
/// parameter i, a factor other than 1 written first, "2*p3"; "*": unbounded; assumes: the parameters taken ≥ 0);
/// parse_tensor_map reads it back (nullopt when malformed).
TILEJIT_EXPORT std::string tensor_map_text(const TensorMapSpec &s);
TILEJIT_EXPORT std::optional<TensorMapSpec> parse_tensor_map(const std::string &text);

/// A scalar sum Σ value·multiplier + constant: a copy's coordinate.
struct ScalarSum {
  std::vector<std::pair<const ir::Value *, int64_t>> terms;
  int64_t constant = 0;
};

/// How a pipelined load is copied by TMA: its map (less the box, which the pipeline chooses) and the tile's first
/// index along each of the map's dims.
struct TmaTile {
  TensorMapSpec map;
  std::vector<ScalarSum> start;  // per map dim
};

/// The TMA form of `load` in fn (nullopt, with the reason in `why` when given, when it does not qualify).
/// `loop`: the for op whose body holds the load (its induction variable counts as ≥ 0 when its lower bound is and
/// its step is a positive constant).
TILEJIT_EXPORT std::optional<TmaTile> tma_tile(const ir::Function &fn, const ir::Op &load, const ir::Op &loop,
                                               std::string *why = nullptr);

}  // namespace tilejit::codegen
