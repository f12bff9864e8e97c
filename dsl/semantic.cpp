#include "dsl/semantic.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "tilejit/error.h"
#include "tilejit/numerics.h"

namespace tilejit::dsl {

void fail(const SrcLoc &loc, std::string_view msg) {
  throw TraceError(fmt::format("{} at {}:{}", msg, loc.file_name(), loc.line()));
}

ir::SourceLoc ir_loc(const SrcLoc &loc) { return {loc.file_name(), loc.line(), loc.column()}; }

std::string describe(const ir::Type &t) {
  return fmt::format("{} ({})", ir::shape_str(t.shape), elem_type_name(t.elem));
}

std::string describe(const Tile &t) {
  if (auto *v = TileAccess::value(t)) return describe(v->type);
  if (TileAccess::is_int_literal(t)) return fmt::format("literal {}", TileAccess::int_literal(t));
  if (TileAccess::is_float_literal(t)) return fmt::format("literal {}", TileAccess::float_literal(t));
  if (TileAccess::is_bool_literal(t)) return TileAccess::int_literal(t) ? "literal true" : "literal false";
  return "empty";
}

void check_pow2_shape(const Shape &shape, const char *op, const char *what, const SrcLoc &loc) {
  for (int64_t d : shape)
    if (!is_pow2(d))
      fail(loc, fmt::format("{}: {} {} has a dimension of {}; every tile dimension must be a power of two",
                            op, what, ir::shape_str(shape), d));
}

int normalize_axis(int axis, int rank, const char *op, const ir::Type &t, const SrcLoc &loc) {
  int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    fail(loc, fmt::format("{}: axis {} is out of range for a tile of shape {}", op, axis, describe(t)));
  return a;
}

ir::Value *emit(TraceContext &ctx, ir::OpKind kind, std::vector<ir::Value *> operands, ir::Type type,
                const SrcLoc &loc, ir::Attrs attrs) {
  // Every tile lives in registers spread over one program's threads (ir::kMaxTileElements). A larger one would
  // only fail later (hours of codegen for a huge dot, or an allocation failure).
  using ir::kMaxTileElements;
  if (!type.is_scalar() && type.numel() > kMaxTileElements)
    fail(loc, fmt::format("{}: a {} tile has {} elements; a tile holds at most 2^20 = {}", ir::op_name(kind),
                          type.str(), type.numel(), kMaxTileElements));
  return ctx.builder.create1(kind, std::move(operands), std::move(type), std::move(attrs), ir_loc(loc));
}

ir::Value *make_constant(TraceContext &ctx, const ir::Type &type, double f, int64_t i, const SrcLoc &loc) {
  // A constant holds exactly what its dtype can represent, so folding, the interpreter and the GPU agree:
  // floats are rounded to the dtype; an integer must fit (as a signed value, or as an unsigned bit pattern
  // of the width, which is then stored two's-complement), otherwise it is the user's error.
  ir::Attrs a;
  DType dt = type.dtype();
  if (is_float(dt)) {
    a.fvalue = dt == DType::f64 ? f
               : dt == DType::f32 ? double(float(f))
               : dt == DType::bf16 ? double(round_bf16(float(f)))
                                   : double(round_f16(float(f)));
  } else if (dt == DType::i1) {
    a.ivalue = i != 0 ? 1 : 0;
  } else {
    int bits = dtype_bits(dt);
    if (bits < 64) {
      int64_t lo = -(int64_t(1) << (bits - 1)), hi_unsigned = (int64_t(1) << bits) - 1;
      if (i < lo || i > hi_unsigned)
        fail(loc, fmt::format("constant {} does not fit {} (range [{}, {}])", i, dtype_name(dt), lo,
                              (int64_t(1) << (bits - 1)) - 1));
      if (i > (int64_t(1) << (bits - 1)) - 1) i -= int64_t(1) << bits;  // unsigned bit pattern → signed
    }
    a.ivalue = i;
  }
  return emit(ctx, ir::OpKind::Constant, {}, type, loc, a);
}

ir::Value *cast_value(TraceContext &ctx, ir::Value *v, DType to, const SrcLoc &loc) {
  if (v->type.dtype() == to) return v;
  ir::Type t = v->type;
  t.elem.dtype = to;
  return emit(ctx, ir::OpKind::Cast, {v}, t, loc);
}

bool broadcast_shapes(const Shape &a, const Shape &b, Shape &out) {
  size_t n = std::max(a.size(), b.size());
  out.assign(n, 1);
  for (size_t k = 0; k < n; ++k) {
    int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1) return false;
    out[n - 1 - k] = da == 1 ? db : da;
  }
  return true;
}

ir::Value *broadcast_value(TraceContext &ctx, ir::Value *v, const Shape &shape, const char *op,
                           const SrcLoc &loc) {
  const Shape &src = v->type.shape;
  if (src == shape) return v;
  Shape common;
  if (src.size() > shape.size() || !broadcast_shapes(src, shape, common) || common != shape)
    fail(loc, fmt::format("{}: cannot broadcast {} to shape {}", op, describe(v->type), ir::shape_str(shape)));
  ir::Type t = v->type;
  if (src.empty()) {
    t.shape = shape;
    return emit(ctx, ir::OpKind::Splat, {v}, t, loc);
  }
  // Missing leading dims become size-1 dims, then size-1 dims stretch.
  while (t.shape.size() < shape.size()) {
    t.shape.insert(t.shape.begin(), 1);
    ir::Attrs a;
    a.axis = 0;
    v = emit(ctx, ir::OpKind::ExpandDims, {v}, t, loc, a);
  }
  if (t.shape != shape) {
    t.shape = shape;
    v = emit(ctx, ir::OpKind::Broadcast, {v}, t, loc);
  }
  return v;
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  bool fa = is_float(a), fb = is_float(b);
  if (fa && fb) {
    if ((a == DType::bf16 && b == DType::f16) || (a == DType::f16 && b == DType::bf16)) return DType::f32;
    return dtype_bits(a) >= dtype_bits(b) ? a : b;
  }
  if (fa) return a;
  if (fb) return b;
  return dtype_bits(a) >= dtype_bits(b) ? a : b;  // i1 with an int → the int
}

DType literal_dtype(const Tile &t) {
  if (TileAccess::is_float_literal(t)) return DType::f32;
  if (TileAccess::is_bool_literal(t)) return DType::i1;
  int64_t v = TileAccess::int_literal(t);
  bool fits = v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
  return fits ? DType::i32 : DType::i64;
}

void require_valid(const Tile &t, const char *op, const char *what, const SrcLoc &loc) {
  if (!t.valid()) fail(loc, fmt::format("{}: {} is an empty Tile (no value was assigned to it)", op, what));
}

void check_value_dtype(const Tile &value, DType pointee, const ir::Type &ptr_type, const char *op, const char *what,
                       const SrcLoc &loc) {
  require_valid(value, op, what, loc);
  if (value.is_literal()) return;
  if (value.is_ptr() || value.dtype() != pointee)
    fail(loc, fmt::format("{}: {} is {} but the pointer {} holds {}; cast it with .to(DType::{})", op, what,
                          describe(value), describe(ptr_type), dtype_name(pointee), dtype_name(pointee)));
}

namespace {
ir::Value *literal_constant(TraceContext &ctx, const Tile &t, const ir::Type &type, const SrcLoc &loc) {
  if (TileAccess::is_float_literal(t)) {
    double f = TileAccess::float_literal(t);
    int64_t i = std::isfinite(f) ? int64_t(f) : 0;  // float literal → int dtype truncates toward zero
    return make_constant(ctx, type, f, i, loc);
  }
  int64_t i = TileAccess::int_literal(t);
  return make_constant(ctx, type, double(i), i, loc);
}
}  // namespace

ir::Value *to_value(TraceContext &ctx, const Tile &t, const char *op, const char *what, const SrcLoc &loc) {
  require_valid(t, op, what, loc);
  if (auto *v = TileAccess::value(t)) return v;
  ir::Type type;
  type.elem.dtype = literal_dtype(t);
  return literal_constant(ctx, t, type, loc);
}

ir::Value *materialize(TraceContext &ctx, const Tile &t, DType dt, const Shape &shape, const char *op,
                       const SrcLoc &loc) {
  require_valid(t, op, "an operand", loc);
  if (t.is_literal()) {
    ir::Type type;
    type.shape = shape;
    type.elem.dtype = dt;
    return literal_constant(ctx, t, type, loc);
  }
  ir::Value *v = TileAccess::value(t);
  if (v->type.is_ptr()) fail(loc, fmt::format("{}: a pointer tile {} cannot be used here", op, describe(v->type)));
  return broadcast_value(ctx, cast_value(ctx, v, dt, loc), shape, op, loc);
}

Unified unify(TraceContext &ctx, const std::vector<const Tile *> &operands, const char *op, const SrcLoc &loc) {
  bool have_strong = false, weak_float = false, weak_int = false;
  DType strong = DType::i1;
  Shape shape;
  std::string all;  // every operand, for error messages
  for (const Tile *t : operands) {
    require_valid(*t, op, "an operand", loc);
    all += (all.empty() ? "" : ", ") + describe(*t);
  }
  for (const Tile *t : operands) {
    if (auto *v = TileAccess::value(*t)) {
      if (v->type.is_ptr())
        fail(loc, fmt::format("{}: pointer operands are not supported (operands: {})", op, all));
      strong = have_strong ? promote(strong, v->type.dtype()) : v->type.dtype();
      have_strong = true;
      Shape out;
      if (!broadcast_shapes(shape, v->type.shape, out))
        fail(loc, fmt::format("{}: cannot broadcast shapes {} and {} (operands: {})", op, ir::shape_str(shape),
                              ir::shape_str(v->type.shape), all));
      shape = out;
    } else if (TileAccess::is_float_literal(*t)) {
      weak_float = true;
    } else if (TileAccess::is_int_literal(*t)) {
      weak_int = true;
    }
  }
  DType dt;
  if (have_strong) {
    dt = strong;
    if (weak_float && !is_float(dt)) dt = DType::f32;
    else if (weak_int && dt == DType::i1) dt = DType::i32;
    // An int literal beyond i32 widens an i32 (or narrower) operation to i64, as in Triton.
    if (weak_int && is_int(dt) && dt != DType::i64)
      for (const Tile *t : operands)
        if (TileAccess::is_int_literal(*t) && literal_dtype(*t) == DType::i64) dt = DType::i64;
  } else {
    dt = weak_float ? DType::f32 : DType::i1;
    for (const Tile *t : operands)
      if (TileAccess::is_int_literal(*t) && !weak_float) dt = promote(dt, literal_dtype(*t));
  }
  Unified u;
  u.type.shape = shape;
  u.type.elem.dtype = dt;
  for (const Tile *t : operands) u.values.push_back(materialize(ctx, *t, dt, shape, op, loc));
  return u;
}

}  // namespace tilejit::dsl
