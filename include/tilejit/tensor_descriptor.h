// Tensor descriptors: a tensor in global memory described once by its base pointer, shape and strides, then read
// and written in blocks at element offsets — the form of Triton's tl.make_tensor_descriptor and of Hopper's TMA
// tensor maps (CUDA Driver API cuTensorMapEncodeTiled; PTX ISA 9.7.9.25, cp.async.bulk.tensor).
//
// A descriptor records nothing by itself: each load or store traces the block's pointer tile and its bounds mask,
// exactly the affine load a kernel could write by hand, so every backend runs it and the compiler's passes see it
// as any other load. On sm_90a with LaunchConfig::tma, a 2-D f16/bf16 block loaded inside a software-pipelined loop
// is copied by TMA when its base is 16-byte aligned and its row stride a multiple of 16 bytes at launch (the last
// stride 1); otherwise by cp.async or plain loads, with the same values.
#pragma once
#include <cstdint>
#include <source_location>
#include <vector>

#include "tilejit/tile.h"

namespace tilejit {

/// A tensor of rank 1 to 5 in global memory: element (i_0, …, i_{r−1}) lies at base + Σ_d i_d·strides[d] (strides in
/// elements) and exists where i_d < shape[d] for every d. Read and written in blocks of block_shape() elements.
/// Made by make_tensor_descriptor while a kernel is traced; copies describe the same tensor. The offsets i_d·stride
/// are computed in the integer type of the offsets, shape and strides (i32 for I32 arguments and literals): a
/// tensor whose elements lie 2^31 or more apart needs I64 strides, as load() with i32 offsets would. A
/// default-constructed descriptor describes nothing: its load and store throw TraceError saying so.
class TensorDescriptor {
 public:
  /// The block whose first element is at `offsets` (one scalar integer per dim, in elements, each ≥ 0): a tile of
  /// block_shape() in the tensor's dtype, 0 where an element's index reaches shape[d] along some dim. An offset
  /// below 0 addresses memory before the tensor, as load() with a negative index would (the interpreter reports
  /// it). Throws TraceError naming the op, the values and the caller's line when `offsets` does not hold one
  /// scalar integer per dim.
  Tile load(const std::vector<Tile> &offsets, std::source_location loc = std::source_location::current()) const;
  /// Writes `value` (the tensor's dtype, or a literal; broadcast to block_shape()) to the block at `offsets` (as
  /// load, each ≥ 0: a block starting below 0 writes memory before the tensor), skipping the elements past the
  /// shape. Throws TraceError as load, and (naming TensorDescriptor::store) when value's dtype is not the
  /// tensor's; a shape that does not broadcast to the block's is store()'s error.
  void store(const std::vector<Tile> &offsets, const Tile &value,
             std::source_location loc = std::source_location::current()) const;
  /// The block's extent along each dim (powers of two).
  const std::vector<int64_t> &block_shape() const { return block_; }
  int rank() const { return int(block_.size()); }

 private:
  friend TensorDescriptor make_tensor_descriptor(const Tile &, std::vector<Tile>, std::vector<Tile>,
                                                 std::vector<int64_t>, std::source_location);
  Tile pointers(const std::vector<Tile> &offsets, Tile &in_bounds, const char *op, std::source_location loc) const;
  Tile base_;
  std::vector<Tile> shape_, strides_;
  std::vector<int64_t> block_;
};

/// The tensor at `base` (a scalar pointer: a kernel's Ptr parameter plus any scalar offset) of the given `shape` and
/// `strides` (scalar integers or literals, in elements; any values ≥ 0), read and written in blocks of
/// `block_shape` (powers of two, each a tile dim). Throws TraceError naming the op, the values and the caller's line
/// when base is not a scalar pointer, the ranks differ or are outside 1..5 (TMA's limit), a shape or stride is not
/// a scalar integer, or a block dim is not a power of two.
TensorDescriptor make_tensor_descriptor(const Tile &base, std::vector<Tile> shape, std::vector<Tile> strides,
                                        std::vector<int64_t> block_shape,
                                        std::source_location loc = std::source_location::current());

}  // namespace tilejit
