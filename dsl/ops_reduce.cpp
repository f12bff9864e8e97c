// Reductions (sum/max/min, argmax/argmin) and the matrix product dot.
#include <fmt/format.h>

#include "dsl/semantic.h"
#include "tilejit/ops.h"

namespace tilejit {

using dsl::TileAccess;
using dsl::TraceContext;

namespace {
Tile reduce(ir::OpKind kind, ir::ReduceKind rk, const char *name, const Tile &t, int axis, const SrcLoc &loc) {
  auto &ctx = TraceContext::require(name, loc);
  ir::Value *v = dsl::to_value(ctx, t, name, "the source", loc);
  if (v->type.is_ptr() || v->type.is_scalar())
    dsl::fail(loc, fmt::format("{}: needs a numeric tile of rank >= 1, got {}", name, dsl::describe(v->type)));
  int a = dsl::normalize_axis(axis, v->type.rank(), name, v->type, loc);
  // Narrow ints (i1 masks, i8, i16) are summed in i32 so counts do not overflow.
  if (kind == ir::OpKind::Reduce && rk == ir::ReduceKind::sum && is_int(v->type.dtype()) &&
      dtype_bits(v->type.dtype()) < 32)
    v = dsl::cast_value(ctx, v, DType::i32, loc);
  ir::Type rt = v->type;
  rt.shape.erase(rt.shape.begin() + a);
  if (kind == ir::OpKind::ArgReduce) rt.elem.dtype = DType::i32;
  ir::Attrs attrs;
  attrs.axis = a;
  attrs.reduce = rk;
  return TileAccess::from_value(dsl::emit(ctx, kind, {v}, rt, loc, attrs));
}
}  // namespace

Tile sum(const Tile &t, int axis, SrcLoc loc) { return reduce(ir::OpKind::Reduce, ir::ReduceKind::sum, "sum", t, axis, loc); }
Tile max(const Tile &t, int axis, SrcLoc loc) { return reduce(ir::OpKind::Reduce, ir::ReduceKind::max, "max", t, axis, loc); }
Tile min(const Tile &t, int axis, SrcLoc loc) { return reduce(ir::OpKind::Reduce, ir::ReduceKind::min, "min", t, axis, loc); }
Tile argmax(const Tile &t, int axis, SrcLoc loc) {
  return reduce(ir::OpKind::ArgReduce, ir::ReduceKind::max, "argmax", t, axis, loc);
}
Tile argmin(const Tile &t, int axis, SrcLoc loc) {
  return reduce(ir::OpKind::ArgReduce, ir::ReduceKind::min, "argmin", t, axis, loc);
}

Tile dot(const Tile &a, const Tile &b, const Tile &acc, bool allow_tf32, SrcLoc loc) {
  auto &ctx = TraceContext::require("dot", loc);
  ir::Value *x = dsl::to_value(ctx, a, "dot", "a", loc);
  ir::Value *y = dsl::to_value(ctx, b, "dot", "b", loc);
  auto shapes = [&] { return fmt::format("a is {}, b is {}", dsl::describe(x->type), dsl::describe(y->type)); };
  if (x->type.rank() != 2 || y->type.rank() != 2 || x->type.is_ptr() || y->type.is_ptr())
    dsl::fail(loc, fmt::format("dot: operands must be 2-D value tiles: {}", shapes()));
  DType dt = x->type.dtype();
  if (dt != DType::f16 && dt != DType::bf16 && dt != DType::f32)
    dsl::fail(loc, fmt::format("dot: operands must be f16, bf16 or f32: {}", shapes()));
  if (y->type.dtype() != dt) dsl::fail(loc, fmt::format("dot: operand dtypes differ: {}", shapes()));
  int64_t m = x->type.shape[0], k = x->type.shape[1], n = y->type.shape[1];
  if (y->type.shape[0] != k) dsl::fail(loc, fmt::format("dot: inner dimensions differ: {}", shapes()));
  if (m < 16 || n < 16 || k < 16)
    dsl::fail(loc, fmt::format("dot: M, N and K must be at least 16 (M={}, N={}, K={}): {}", m, n, k, shapes()));
  ir::Type rt;
  rt.shape = {m, n};
  rt.elem.dtype = DType::f32;
  ir::Value *c;
  if (!acc.valid()) {
    c = dsl::make_constant(ctx, rt, 0.0, 0, loc);
  } else {
    c = acc.is_literal() ? dsl::materialize(ctx, acc, DType::f32, rt.shape, "dot", loc) : TileAccess::value(acc);
    if (c->type != rt)
      dsl::fail(loc, fmt::format("dot: the accumulator must be {}x{} (f32), got {}; {}", m, n, dsl::describe(c->type),
                                 shapes()));
  }
  ir::Attrs attrs;
  attrs.flag = allow_tf32;
  return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::Dot, {x, y, c}, rt, loc, attrs));
}

}  // namespace tilejit
