// Shape manipulation ops: reshape, trans, expand_dims, broadcast_to.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "dsl/semantic.h"
#include "tilejit/ops.h"

namespace tilejit {

using dsl::TileAccess;
using dsl::TraceContext;

Tile reshape(const Tile &t, std::vector<int64_t> shape, SrcLoc loc) {
  auto &ctx = TraceContext::require("reshape", loc);
  ir::Value *v = dsl::to_value(ctx, t, "reshape", "the source", loc);
  dsl::check_pow2_shape(shape, "reshape", "result shape", loc);
  ir::Type rt = v->type;
  rt.shape = std::move(shape);
  if (rt.numel() != v->type.numel())
    dsl::fail(loc, fmt::format("reshape: cannot reshape {} ({} elements) to {} ({} elements)", dsl::describe(v->type),
                               v->type.numel(), ir::shape_str(rt.shape), rt.numel()));
  if (rt.shape == v->type.shape) return TileAccess::from_value(v);
  return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::Reshape, {v}, rt, loc));
}

Tile trans(const Tile &t, SrcLoc loc) {
  auto &ctx = TraceContext::require("trans", loc);
  ir::Value *v = dsl::to_value(ctx, t, "trans", "the source", loc);
  if (v->type.rank() != 2)
    dsl::fail(loc, fmt::format("trans: without a permutation the tile must be 2-D, got {}", dsl::describe(v->type)));
  return trans(t, {1, 0}, loc);
}

Tile trans(const Tile &t, std::vector<int64_t> perm, SrcLoc loc) {
  auto &ctx = TraceContext::require("trans", loc);
  ir::Value *v = dsl::to_value(ctx, t, "trans", "the source", loc);
  int r = v->type.rank();
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool ok = int(perm.size()) == r;
  for (int i = 0; ok && i < r; ++i) ok = sorted[i] == i;
  if (!ok)
    dsl::fail(loc, fmt::format("trans: [{}] is not a permutation of the {} dims of {}", fmt::join(perm, ", "), r,
                               dsl::describe(v->type)));
  ir::Type rt = v->type;
  for (int i = 0; i < r; ++i) rt.shape[i] = v->type.shape[perm[i]];
  ir::Attrs a;
  a.ints = std::move(perm);
  return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::Trans, {v}, rt, loc, a));
}

Tile expand_dims(const Tile &t, int axis, SrcLoc loc) {
  auto &ctx = TraceContext::require("expand_dims", loc);
  ir::Value *v = dsl::to_value(ctx, t, "expand_dims", "the source", loc);
  int r = v->type.rank();
  int a = axis < 0 ? axis + r + 1 : axis;
  if (a < 0 || a > r)
    dsl::fail(loc, fmt::format("expand_dims: axis {} is out of range for {} (valid: {}..{})", axis,
                               dsl::describe(v->type), -r - 1, r));
  ir::Type rt = v->type;
  rt.shape.insert(rt.shape.begin() + a, 1);
  ir::Attrs attrs;
  attrs.axis = a;
  return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::ExpandDims, {v}, rt, loc, attrs));
}

Tile broadcast_to(const Tile &t, std::vector<int64_t> shape, SrcLoc loc) {
  auto &ctx = TraceContext::require("broadcast_to", loc);
  ir::Value *v = dsl::to_value(ctx, t, "broadcast_to", "the source", loc);
  dsl::check_pow2_shape(shape, "broadcast_to", "target shape", loc);
  return TileAccess::from_value(dsl::broadcast_value(ctx, v, shape, "broadcast_to", loc));
}

}  // namespace tilejit
