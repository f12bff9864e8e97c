// Elementwise math ops: where, minimum/maximum, float unary math, fma, cast, cdiv.
#include <fmt/format.h>

#include "dsl/semantic.h"
#include "tilejit/ops.h"

namespace tilejit {

using dsl::TileAccess;
using dsl::TraceContext;

Tile where(const Tile &cond, const Tile &a, const Tile &b, SrcLoc loc) {
  auto &ctx = TraceContext::require("where", loc);
  dsl::require_valid(cond, "where", "the condition", loc);
  if (TileAccess::is_int_literal(cond) || TileAccess::is_float_literal(cond) ||
      (TileAccess::value(cond) && (cond.is_ptr() || cond.dtype() != DType::i1)))
    dsl::fail(loc, fmt::format("where: the condition must be i1, got {}", dsl::describe(cond)));
  auto u = dsl::unify(ctx, {&a, &b}, "where", loc);
  ir::Value *c = dsl::to_value(ctx, cond, "where", "the condition", loc);
  dsl::Shape shape;
  if (!dsl::broadcast_shapes(c->type.shape, u.type.shape, shape))
    dsl::fail(loc, fmt::format("where: cannot broadcast the condition {} with the values {}", dsl::describe(c->type),
                               dsl::describe(u.type)));
  c = dsl::broadcast_value(ctx, c, shape, "where", loc);
  ir::Value *x = dsl::broadcast_value(ctx, u.values[0], shape, "where", loc);
  ir::Value *y = dsl::broadcast_value(ctx, u.values[1], shape, "where", loc);
  return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::Select, {c, x, y}, x->type, loc));
}

namespace {
Tile binary(ir::OpKind kind, const char *name, const Tile &a, const Tile &b, const SrcLoc &loc) {
  auto &ctx = TraceContext::require(name, loc);
  auto u = dsl::unify(ctx, {&a, &b}, name, loc);
  return TileAccess::from_value(dsl::emit(ctx, kind, u.values, u.type, loc));
}

/// Float unary math; ints are cast to f32 first (except abs, which keeps ints).
Tile unary(ir::OpKind kind, const char *name, const Tile &x, const SrcLoc &loc, bool ints_ok = false) {
  auto &ctx = TraceContext::require(name, loc);
  ir::Value *v;
  if (TileAccess::is_float_literal(x) || (!ints_ok && x.is_literal()))
    v = dsl::materialize(ctx, x, DType::f32, {}, name, loc);
  else
    v = dsl::to_value(ctx, x, name, "the operand", loc);
  if (v->type.is_ptr() || (ints_ok && v->type.dtype() == DType::i1))
    dsl::fail(loc, fmt::format("{}: needs a numeric tile, got {}", name, dsl::describe(v->type)));
  if (!ints_ok && !is_float(v->type.dtype())) v = dsl::cast_value(ctx, v, DType::f32, loc);
  return TileAccess::from_value(dsl::emit(ctx, kind, {v}, v->type, loc));
}
}  // namespace

Tile minimum(const Tile &a, const Tile &b, SrcLoc loc) { return binary(ir::OpKind::Minimum, "minimum", a, b, loc); }
Tile maximum(const Tile &a, const Tile &b, SrcLoc loc) { return binary(ir::OpKind::Maximum, "maximum", a, b, loc); }

Tile exp(const Tile &x, SrcLoc loc) { return unary(ir::OpKind::Exp, "exp", x, loc); }
Tile exp2(const Tile &x, SrcLoc loc) { return unary(ir::OpKind::Exp2, "exp2", x, loc); }
Tile log(const Tile &x, SrcLoc loc) { return unary(ir::OpKind::Log, "log", x, loc); }
Tile log2(const Tile &x, SrcLoc loc) { return unary(ir::OpKind::Log2, "log2", x, loc); }
Tile sqrt(const Tile &x, SrcLoc loc) { return unary(ir::OpKind::Sqrt, "sqrt", x, loc); }
Tile rsqrt(const Tile &x, SrcLoc loc) { return unary(ir::OpKind::Rsqrt, "rsqrt", x, loc); }
Tile tanh(const Tile &x, SrcLoc loc) { return unary(ir::OpKind::Tanh, "tanh", x, loc); }
Tile sigmoid(const Tile &x, SrcLoc loc) { return unary(ir::OpKind::Sigmoid, "sigmoid", x, loc); }
Tile abs(const Tile &x, SrcLoc loc) { return unary(ir::OpKind::Abs, "abs", x, loc, /*ints_ok=*/true); }

Tile fma(const Tile &a, const Tile &b, const Tile &c, SrcLoc loc) {
  auto &ctx = TraceContext::require("fma", loc);
  auto u = dsl::unify(ctx, {&a, &b, &c}, "fma", loc);
  if (!is_float(u.type.dtype())) {
    for (auto &v : u.values) v = dsl::cast_value(ctx, v, DType::f32, loc);
    u.type.elem.dtype = DType::f32;
  }
  return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::Fma, u.values, u.type, loc));
}

Tile cast(const Tile &t, DType dtype, SrcLoc loc) {
  auto &ctx = TraceContext::require("cast", loc);
  dsl::require_valid(t, "cast", "the source", loc);
  if (t.is_literal()) return TileAccess::from_value(dsl::materialize(ctx, t, dtype, {}, "cast", loc));
  ir::Value *v = TileAccess::value(t);
  if (v->type.is_ptr())
    dsl::fail(loc, fmt::format("cast: cannot cast the pointer tile {} to {}", dsl::describe(v->type), dtype_name(dtype)));
  return TileAccess::from_value(dsl::cast_value(ctx, v, dtype, loc));
}

Tile index_to_f32(const Tile &t, SrcLoc loc) {
  auto &ctx = TraceContext::require("index_to_f32", loc);
  dsl::require_valid(t, "index_to_f32", "the source", loc);
  if (t.is_literal()) {
    if (dsl::literal_dtype(t) != DType::i32)
      dsl::fail(loc, fmt::format("index_to_f32: the source must be an i32 position, got a {} literal",
                                 dtype_name(dsl::literal_dtype(t))));
    return TileAccess::from_value(dsl::materialize(ctx, t, DType::f32, {}, "index_to_f32", loc));
  }
  ir::Value *v = TileAccess::value(t);
  if (v->type.is_ptr() || v->type.dtype() != DType::i32)
    dsl::fail(loc, fmt::format("index_to_f32: the source must be an i32 tile of positions, got {}",
                               dsl::describe(v->type)));
  ir::Type rt = v->type;
  rt.elem.dtype = DType::f32;
  ir::Attrs a;
  a.flag = true;  // the index form: see codegen/lower_index_to_f32.cpp
  return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::Cast, {v}, rt, loc, a));
}

Tile fma_index(const Tile &index, const Tile &a, const Tile &c, SrcLoc loc) {
  auto &ctx = TraceContext::require("fma_index", loc);
  dsl::require_valid(index, "fma_index", "the index", loc);
  if (index.is_ptr() || index.dtype() != DType::i32)  // checked here so that the error names fma_index
    dsl::fail(loc, fmt::format("fma_index: the index must be an i32 tile of positions (as for index_to_f32), got {}",
                               dsl::describe(index)));
  dsl::require_valid(a, "fma_index", "the factor", loc);
  dsl::require_valid(c, "fma_index", "the addend", loc);
  for (const Tile *t : {&a, &c})
    if (t->is_ptr() || (!t->is_literal() && !is_float(t->dtype())) || (t->is_literal() && t->dtype() == DType::i1))
      dsl::fail(loc, fmt::format("fma_index: the factor and the addend must be floats (f32, f16, bf16) or numbers, "
                                 "got {}",
                                 dsl::describe(*t)));
  if (index.is_literal()) return fma(index_to_f32(index, loc), a, c, loc);  // a constant: nothing to split
  Tile f = index_to_f32(index, loc);
  // The cast is made at the broadcast shape, so that it is the fma's operand itself (codegen and the
  // verifier look for it there).
  dsl::Shape shape = f.shape(), s2;
  for (const Tile *t : {&a, &c}) {
    if (!dsl::broadcast_shapes(shape, t->shape(), s2))
      dsl::fail(loc, fmt::format("fma_index: the shapes {} and {} do not broadcast", dsl::describe(f),
                                 dsl::describe(*t)));
    shape = s2;
  }
  if (shape != f.shape()) {
    ir::Value *wide = dsl::broadcast_value(ctx, TileAccess::value(index), shape, "fma_index", loc);
    f = index_to_f32(TileAccess::from_value(wide), loc);
  }
  auto u = dsl::unify(ctx, {&f, &a, &c}, "fma_index", loc);
  if (u.type.dtype() != DType::f32)
    dsl::fail(loc, fmt::format("fma_index: computes in f32; got a factor {} and an addend {}", dsl::describe(a),
                               dsl::describe(c)));
  if (u.values[0] != TileAccess::value(f)) dsl::fail(loc, "fma_index: internal: the index cast was rewritten");
  ir::Attrs attrs;
  attrs.flag = true;  // the split form: see ops.h and codegen/lower_index_to_f32.cpp
  return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::Fma, u.values, u.type, loc, attrs));
}

namespace {
/// A float binary op marked to stay correctly rounded on its own (the passes' float rewrites leave it).
Tile rounded_on_its_own(ir::OpKind kind, const char *name, const Tile &a, const Tile &b, SrcLoc loc) {
  auto &ctx = TraceContext::require(name, loc);
  auto u = dsl::unify(ctx, {&a, &b}, name, loc);
  if (!is_float(u.type.dtype()))
    dsl::fail(loc, fmt::format("{}: needs float operands, got {} and {}", name, dsl::describe(a), dsl::describe(b)));
  ir::Attrs rn;
  rn.flag = true;
  return TileAccess::from_value(dsl::emit(ctx, kind, u.values, u.type, loc, rn));
}
}  // namespace

Tile div_rn(const Tile &a, const Tile &b, SrcLoc loc) { return rounded_on_its_own(ir::OpKind::Div, "div_rn", a, b, loc); }

Tile mul_rn(const Tile &a, const Tile &b, SrcLoc loc) { return rounded_on_its_own(ir::OpKind::Mul, "mul_rn", a, b, loc); }

Tile cdiv(const Tile &a, const Tile &b, SrcLoc loc) {
  auto &ctx = TraceContext::require("cdiv", loc);
  auto u = dsl::unify(ctx, {&a, &b}, "cdiv", loc);
  if (!is_int(u.type.dtype()) || u.type.dtype() == DType::i1)
    dsl::fail(loc, fmt::format("cdiv: needs integer operands, got {} and {}", dsl::describe(a), dsl::describe(b)));
  ir::Value *one = dsl::make_constant(ctx, u.type, 1.0, 1, loc);
  ir::Value *sum = dsl::emit(ctx, ir::OpKind::Add, {u.values[0], u.values[1]}, u.type, loc);
  ir::Value *num = dsl::emit(ctx, ir::OpKind::Sub, {sum, one}, u.type, loc);
  return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::Div, {num, u.values[1]}, u.type, loc));
}

}  // namespace tilejit
