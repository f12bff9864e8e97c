// Source ops: program ids, ranges and constant tiles.
#include <fmt/format.h>

#include <limits>

#include "dsl/semantic.h"
#include "tilejit/ops.h"

namespace tilejit {

using dsl::TileAccess;
using dsl::TraceContext;

namespace {
Tile grid_query(ir::OpKind kind, const char *name, int axis, const SrcLoc &loc) {
  auto &ctx = TraceContext::require(name, loc);
  if (axis < 0 || axis > 2) dsl::fail(loc, fmt::format("{}: axis must be 0, 1 or 2, got {}", name, axis));
  ir::Attrs a;
  a.axis = axis;
  ir::Type t;
  t.elem.dtype = DType::i32;
  return TileAccess::from_value(dsl::emit(ctx, kind, {}, t, loc, a));
}
}  // namespace

Tile program_id(int axis, SrcLoc loc) { return grid_query(ir::OpKind::ProgramId, "program_id", axis, loc); }
Tile num_programs(int axis, SrcLoc loc) { return grid_query(ir::OpKind::NumPrograms, "num_programs", axis, loc); }

Tile arange(int64_t start, int64_t end, SrcLoc loc) {
  auto &ctx = TraceContext::require("arange", loc);
  if (end <= start) dsl::fail(loc, fmt::format("arange: end ({}) must be greater than start ({})", end, start));
  if (!dsl::is_pow2(end - start))
    dsl::fail(loc, fmt::format("arange: the length end - start = {} - {} = {} must be a power of two", end, start,
                               end - start));
  if (start < std::numeric_limits<int32_t>::min() || end - 1 > std::numeric_limits<int32_t>::max())
    dsl::fail(loc, fmt::format("arange: values [{}, {}) do not fit i32", start, end));
  ir::Attrs a;
  a.ints = {start, end};
  ir::Type t;
  t.shape = {end - start};
  t.elem.dtype = DType::i32;
  return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::Arange, {}, t, loc, a));
}

Tile full(std::vector<int64_t> shape, double value, DType dtype, SrcLoc loc) {
  auto &ctx = TraceContext::require("full", loc);
  dsl::check_pow2_shape(shape, "full", "shape", loc);
  ir::Type t;
  t.shape = std::move(shape);
  t.elem.dtype = dtype;
  return TileAccess::from_value(dsl::make_constant(ctx, t, value, int64_t(value), loc));
}

Tile zeros(std::vector<int64_t> shape, DType dtype, SrcLoc loc) { return full(std::move(shape), 0.0, dtype, loc); }

namespace {
const ir::Type &like_type(TraceContext &ctx, const Tile &t, const char *op, const SrcLoc &loc) {
  ir::Value *v = dsl::to_value(ctx, t, op, "the template tile", loc);
  if (v->type.is_ptr()) dsl::fail(loc, fmt::format("{}: cannot make a tile like the pointer tile {}", op, dsl::describe(v->type)));
  return v->type;
}
}  // namespace

Tile zeros_like(const Tile &t, SrcLoc loc) {
  auto &ctx = TraceContext::require("zeros_like", loc);
  const ir::Type &type = like_type(ctx, t, "zeros_like", loc);
  return TileAccess::from_value(dsl::make_constant(ctx, type, 0.0, 0, loc));
}

Tile full_like(const Tile &t, double value, SrcLoc loc) {
  auto &ctx = TraceContext::require("full_like", loc);
  const ir::Type &type = like_type(ctx, t, "full_like", loc);
  return TileAccess::from_value(dsl::make_constant(ctx, type, value, int64_t(value), loc));
}

}  // namespace tilejit
