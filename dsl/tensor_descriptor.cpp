// Tensor descriptors (tilejit/tensor_descriptor.h): each block access traces the pointer tile and the bounds mask a
// kernel would write by hand — base + Σ index_d·stride_d over the block, and index_d < shape_d — so the
// interpreter, the passes and TMA's recognition (codegen/tma.h) treat it as any affine load.
#include "tilejit/tensor_descriptor.h"

#include <bit>

#include <fmt/format.h>

#include "dsl/semantic.h"
#include "dsl/trace_context.h"
#include "tilejit/ops.h"

namespace tilejit {

using dsl::TileAccess;
using dsl::TraceContext;

namespace {

constexpr int kMaxRank = 5;  // a TMA tensor map's most dims (cuTensorMapEncodeTiled)

/// A scalar integer (an IR scalar of an integer dtype, or an integer literal); fails naming `what` otherwise.
void require_scalar_int(const Tile &t, const char *op, const std::string &what, const SrcLoc &loc) {
  dsl::require_valid(t, op, what.c_str(), loc);
  if (TileAccess::is_int_literal(t)) return;
  if (t.is_literal() || t.is_ptr() || !t.shape().empty() || !is_int(t.dtype()) || t.dtype() == DType::i1)
    dsl::fail(loc, fmt::format("{}: {} must be a scalar integer, got {}", op, what, dsl::describe(t)));
}

}  // namespace

TensorDescriptor make_tensor_descriptor(const Tile &base, std::vector<Tile> shape, std::vector<Tile> strides,
                                        std::vector<int64_t> block_shape, SrcLoc loc) {
  const char *op = "make_tensor_descriptor";
  TraceContext::require(op, loc);
  dsl::require_valid(base, op, "the base", loc);
  if (!base.is_ptr() || !base.shape().empty())
    dsl::fail(loc, fmt::format("{}: the base must be a scalar pointer (a Ptr parameter plus scalar offsets), got {}", op,
                               dsl::describe(base)));
  const size_t rank = block_shape.size();
  if (rank < 1 || rank > size_t(kMaxRank) || shape.size() != rank || strides.size() != rank)
    dsl::fail(loc, fmt::format("{}: shape, strides and block_shape must have one entry per dim, 1 to {} dims; got {}, {} "
                               "and {}", op, kMaxRank, shape.size(), strides.size(), rank));
  for (size_t d = 0; d < rank; ++d) {
    require_scalar_int(shape[d], op, fmt::format("shape[{}]", d), loc);
    require_scalar_int(strides[d], op, fmt::format("strides[{}]", d), loc);
    if (block_shape[d] < 1 || !std::has_single_bit(uint64_t(block_shape[d])))
      dsl::fail(loc, fmt::format("{}: block_shape[{}] = {} must be a power of two (a tile dim)", op, d, block_shape[d]));
  }
  TensorDescriptor desc;
  desc.base_ = base;
  desc.shape_ = std::move(shape);
  desc.strides_ = std::move(strides);
  desc.block_ = std::move(block_shape);
  return desc;
}

Tile TensorDescriptor::pointers(const std::vector<Tile> &offsets, Tile &in_bounds, const char *op, SrcLoc loc) const {
  TraceContext::require(op, loc);
  if (block_.empty()) dsl::fail(loc, fmt::format("{}: the descriptor was not made by make_tensor_descriptor", op));
  if (offsets.size() != block_.size())
    dsl::fail(loc, fmt::format("{}: {} offsets for a descriptor of {} dims", op, offsets.size(), block_.size()));
  for (size_t d = 0; d < offsets.size(); ++d) require_scalar_int(offsets[d], op, fmt::format("offsets[{}]", d), loc);
  const int rank = int(block_.size());
  Tile ptr = base_;
  in_bounds = Tile();
  for (int d = 0; d < rank; ++d) {
    // The block's indices along d, [offset, offset + block), as a rank-`rank` tile that is 1 along the other dims.
    Tile index = TileOperand(offsets[size_t(d)], loc) + TileOperand(arange(0, block_[size_t(d)], loc), loc);
    for (int e = 0; e < rank; ++e)
      if (e != d) index = expand_dims(index, e, loc);
    const Tile &stride = strides_[size_t(d)];
    const bool unit = TileAccess::is_int_literal(stride) && TileAccess::int_literal(stride) == 1;
    ptr = TileOperand(ptr, loc) + (unit ? TileOperand(index, loc) : TileOperand(TileOperand(index, loc) * TileOperand(stride, loc), loc));
    Tile inside = TileOperand(index, loc) < TileOperand(shape_[size_t(d)], loc);
    in_bounds = in_bounds.valid() ? TileOperand(in_bounds, loc) & TileOperand(inside, loc) : inside;
  }
  return ptr;
}

Tile TensorDescriptor::load(const std::vector<Tile> &offsets, SrcLoc loc) const {
  Tile mask;
  Tile ptr = pointers(offsets, mask, "TensorDescriptor::load", loc);
  return tilejit::load(ptr, mask, 0, loc);
}

void TensorDescriptor::store(const std::vector<Tile> &offsets, const Tile &value, SrcLoc loc) const {
  const char *op = "TensorDescriptor::store";
  Tile mask;
  Tile ptr = pointers(offsets, mask, op, loc);
  const ir::Type &base = TileAccess::value(base_)->type;
  dsl::check_value_dtype(value, base.dtype(), base, op, "the value", loc);  // named as this op, before store's check
  tilejit::store(ptr, value, mask, loc);
}

}  // namespace tilejit
