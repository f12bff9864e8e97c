// Tile handle bookkeeping, accessors, indexing and the C++ operators.
#include <fmt/format.h>

#include "dsl/semantic.h"
#include "tilejit/error.h"
#include "tilejit/ops.h"
#include "tilejit/tile.h"

namespace tilejit {

using dsl::TileAccess;
using dsl::TraceContext;

// ---- handle bookkeeping: every handle constructed during a trace is registered (see trace_context.h) ----
Tile::Tile() { TileAccess::register_handle(*this); }
Tile::Tile(const Tile &o) {
  copy_from(o);
  TileAccess::register_handle(*this);
}
Tile::Tile(Tile &&o) noexcept {
  copy_from(o);
  TileAccess::register_handle(*this);
}
Tile &Tile::operator=(const Tile &o) {
  copy_from(o);
  return *this;
}
Tile &Tile::operator=(Tile &&o) noexcept {
  copy_from(o);
  return *this;
}
Tile::~Tile() { TileAccess::unregister_handle(*this); }

std::vector<int64_t> Tile::shape() const {
  if (auto *v = TileAccess::value(*this)) return v->type.shape;
  return {};
}

DType Tile::dtype() const {
  if (auto *v = TileAccess::value(*this)) return v->type.dtype();
  if (!valid()) throw TraceError("Tile::dtype: the handle is empty (no value was assigned to it)");
  return dsl::literal_dtype(*this);
}

bool Tile::is_ptr() const {
  auto *v = TileAccess::value(*this);
  return v && v->type.is_ptr();
}

Tile Tile::to(DType t, std::source_location loc) const { return cast(*this, t, loc); }

namespace {
Tile index_tile(const Tile &t, std::initializer_list<Index> idx, const std::source_location &loc) {
  auto &ctx = TraceContext::require("index", loc);
  ir::Value *v = dsl::to_value(ctx, t, "index", "the indexed tile", loc);
  int keeps = 0;
  for (auto i : idx) keeps += !i.new_axis;
  if (keeps != v->type.rank())
    dsl::fail(loc, fmt::format("index: a tile of shape {} needs {} '_' indices, got {} (with {} None)",
                               dsl::describe(v->type), v->type.rank(), keeps, int(idx.size()) - keeps));
  int pos = 0;
  for (auto i : idx) {
    if (i.new_axis) {
      ir::Type rt = v->type;
      rt.shape.insert(rt.shape.begin() + pos, 1);
      ir::Attrs a;
      a.axis = pos;
      v = dsl::emit(ctx, ir::OpKind::ExpandDims, {v}, rt, loc, a);
    }
    ++pos;
  }
  return TileAccess::from_value(v);
}
}  // namespace

Tile Tile::operator()(Index a, std::source_location loc) const { return index_tile(*this, {a}, loc); }
Tile Tile::operator()(Index a, Index b, std::source_location loc) const {
  return index_tile(*this, {a, b}, loc);
}
Tile Tile::operator()(Index a, Index b, Index c, std::source_location loc) const {
  return index_tile(*this, {a, b, c}, loc);
}
Tile Tile::operator()(Index a, Index b, Index c, Index d, std::source_location loc) const {
  return index_tile(*this, {a, b, c, d}, loc);
}

Tile &Tile::operator+=(const TileOperand &b) { return *this = TileOperand(*this, b.loc) + b; }
Tile &Tile::operator-=(const TileOperand &b) { return *this = TileOperand(*this, b.loc) - b; }
Tile &Tile::operator*=(const TileOperand &b) { return *this = TileOperand(*this, b.loc) * b; }
Tile &Tile::operator/=(const TileOperand &b) { return *this = TileOperand(*this, b.loc) / b; }

// ---- operators ----
namespace {

enum class Allowed { Any, Int, Bool };

Tile elementwise(ir::OpKind kind, const char *name, const TileOperand &a, const TileOperand &b,
                 Allowed allowed = Allowed::Any) {
  auto &ctx = TraceContext::require(name, a.loc);
  auto u = dsl::unify(ctx, {&a.tile, &b.tile}, name, a.loc);
  DType dt = u.type.dtype();
  if (allowed == Allowed::Int && !is_int(dt))
    dsl::fail(a.loc, fmt::format("{}: needs integer or i1 operands, got {} and {}", name, dsl::describe(a.tile),
                                 dsl::describe(b.tile)));
  if (allowed == Allowed::Bool && dt != DType::i1)
    dsl::fail(a.loc, fmt::format("{}: needs i1 operands (masks or comparisons), got {} and {}", name,
                                 dsl::describe(a.tile), dsl::describe(b.tile)));
  return TileAccess::from_value(dsl::emit(ctx, kind, u.values, u.type, a.loc));
}

Tile compare(ir::CmpPred pred, const char *name, const TileOperand &a, const TileOperand &b) {
  auto &ctx = TraceContext::require(name, a.loc);
  auto u = dsl::unify(ctx, {&a.tile, &b.tile}, name, a.loc);
  ir::Type rt = u.type;
  rt.elem.dtype = DType::i1;
  ir::Attrs attrs;
  attrs.pred = pred;
  return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::Cmp, u.values, rt, a.loc, attrs));
}

/// ptr + offsets (or ptr - offsets when negate): offsets are an int tile or literal, counted in elements.
Tile pointer_offset(const char *name, const Tile &ptr, const Tile &off, bool negate, const std::source_location &loc) {
  auto &ctx = TraceContext::require(name, loc);
  ir::Value *p = TileAccess::value(ptr);
  dsl::require_valid(off, name, "the offset", loc);
  if (TileAccess::is_float_literal(off) || TileAccess::is_bool_literal(off) ||
      (TileAccess::value(off) && (TileAccess::value(off)->type.is_ptr() ||
                                  !is_int(off.dtype()) || off.dtype() == DType::i1)))
    dsl::fail(loc, fmt::format("{}: a pointer {} can only be offset by integers, got {}", name,
                               dsl::describe(p->type), dsl::describe(off)));
  ir::Value *o = dsl::to_value(ctx, off, name, "the offset", loc);
  dsl::Shape shape;
  if (!dsl::broadcast_shapes(p->type.shape, o->type.shape, shape))
    dsl::fail(loc, fmt::format("{}: cannot broadcast pointer {} with offsets {}", name, dsl::describe(p->type),
                               dsl::describe(o->type)));
  p = dsl::broadcast_value(ctx, p, shape, name, loc);
  o = dsl::broadcast_value(ctx, o, shape, name, loc);
  if (negate) o = dsl::emit(ctx, ir::OpKind::Neg, {o}, o->type, loc);
  ir::Type rt = p->type;
  return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::PtrAdd, {p, o}, rt, loc));
}

}  // namespace

Tile operator+(const TileOperand &a, const TileOperand &b) {
  if (a.tile.is_ptr()) return pointer_offset("add", a.tile, b.tile, false, a.loc);
  if (b.tile.is_ptr()) return pointer_offset("add", b.tile, a.tile, false, a.loc);
  return elementwise(ir::OpKind::Add, "add", a, b);
}
Tile operator-(const TileOperand &a, const TileOperand &b) {
  if (a.tile.is_ptr() && !b.tile.is_ptr()) return pointer_offset("sub", a.tile, b.tile, true, a.loc);
  return elementwise(ir::OpKind::Sub, "sub", a, b);
}
Tile operator*(const TileOperand &a, const TileOperand &b) { return elementwise(ir::OpKind::Mul, "mul", a, b); }
Tile operator/(const TileOperand &a, const TileOperand &b) { return elementwise(ir::OpKind::Div, "div", a, b); }
Tile operator%(const TileOperand &a, const TileOperand &b) { return elementwise(ir::OpKind::Rem, "rem", a, b); }
Tile operator<(const TileOperand &a, const TileOperand &b) { return compare(ir::CmpPred::lt, "lt", a, b); }
Tile operator<=(const TileOperand &a, const TileOperand &b) { return compare(ir::CmpPred::le, "le", a, b); }
Tile operator>(const TileOperand &a, const TileOperand &b) { return compare(ir::CmpPred::gt, "gt", a, b); }
Tile operator>=(const TileOperand &a, const TileOperand &b) { return compare(ir::CmpPred::ge, "ge", a, b); }
Tile operator==(const TileOperand &a, const TileOperand &b) { return compare(ir::CmpPred::eq, "eq", a, b); }
Tile operator!=(const TileOperand &a, const TileOperand &b) { return compare(ir::CmpPred::ne, "ne", a, b); }
Tile operator&(const TileOperand &a, const TileOperand &b) {
  return elementwise(ir::OpKind::And, "and", a, b, Allowed::Int);
}
Tile operator|(const TileOperand &a, const TileOperand &b) {
  return elementwise(ir::OpKind::Or, "or", a, b, Allowed::Int);
}
Tile operator^(const TileOperand &a, const TileOperand &b) {
  return elementwise(ir::OpKind::Xor, "xor", a, b, Allowed::Int);
}
Tile operator&&(const TileOperand &a, const TileOperand &b) {
  return elementwise(ir::OpKind::And, "logical_and", a, b, Allowed::Bool);
}
Tile operator||(const TileOperand &a, const TileOperand &b) {
  return elementwise(ir::OpKind::Or, "logical_or", a, b, Allowed::Bool);
}
Tile operator<<(const TileOperand &a, const TileOperand &b) {
  return elementwise(ir::OpKind::Shl, "shl", a, b, Allowed::Int);
}
Tile operator>>(const TileOperand &a, const TileOperand &b) {
  return elementwise(ir::OpKind::Shr, "shr", a, b, Allowed::Int);
}

Tile operator-(const TileOperand &a) {
  auto &ctx = TraceContext::require("neg", a.loc);
  ir::Value *v = dsl::to_value(ctx, a.tile, "neg", "the operand", a.loc);
  if (v->type.is_ptr() || v->type.dtype() == DType::i1)
    dsl::fail(a.loc, fmt::format("neg: cannot negate {}", dsl::describe(v->type)));
  return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::Neg, {v}, v->type, a.loc));
}
Tile operator~(const TileOperand &a) {
  auto &ctx = TraceContext::require("not", a.loc);
  ir::Value *v = dsl::to_value(ctx, a.tile, "not", "the operand", a.loc);
  if (v->type.is_ptr() || !is_int(v->type.dtype()))
    dsl::fail(a.loc, fmt::format("not: bitwise not needs an integer or i1 tile, got {}", dsl::describe(v->type)));
  return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::Not, {v}, v->type, a.loc));
}
Tile operator!(const TileOperand &a) {
  auto &ctx = TraceContext::require("logical_not", a.loc);
  ir::Value *v = dsl::to_value(ctx, a.tile, "logical_not", "the operand", a.loc);
  if (v->type.is_ptr() || !is_int(v->type.dtype()))
    dsl::fail(a.loc, fmt::format("logical_not: needs an i1 or integer tile, got {}", dsl::describe(v->type)));
  if (v->type.dtype() == DType::i1)
    return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::Not, {v}, v->type, a.loc));
  return TileAccess::from_value(v) == TileOperand(0, a.loc);  // !x on ints is x == 0
}

}  // namespace tilejit
