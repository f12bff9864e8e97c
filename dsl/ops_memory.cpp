// Memory ops: load, store, atomic_add. Pointer, mask and value/other tiles are broadcast together.
#include <fmt/format.h>

#include "dsl/semantic.h"
#include "tilejit/ops.h"

namespace tilejit {

using dsl::TileAccess;
using dsl::TraceContext;

namespace {

ir::Value *pointer_operand(const Tile &ptr, const char *op, const SrcLoc &loc) {
  dsl::require_valid(ptr, op, "the pointer", loc);
  if (!ptr.is_ptr())
    dsl::fail(loc, fmt::format("{}: the first operand must be a pointer tile (e.g. ptr + offsets), got {}", op,
                               dsl::describe(ptr)));
  return TileAccess::value(ptr);
}

void check_mask(const Tile &mask, const char *op, const SrcLoc &loc) {
  if (!mask.valid() || TileAccess::is_bool_literal(mask)) return;
  if (mask.is_literal() || mask.is_ptr() || mask.dtype() != DType::i1)
    dsl::fail(loc, fmt::format("{}: the mask must be i1 (a comparison), got {}", op, dsl::describe(mask)));
}

/// The broadcast shape of the pointer and the given (valid, non-literal) tiles.
dsl::Shape common_shape(const ir::Value *p, std::initializer_list<const Tile *> others, const char *op,
                        const SrcLoc &loc) {
  dsl::Shape shape = p->type.shape;
  for (const Tile *t : others) {
    if (!t->valid() || t->is_literal()) continue;
    dsl::Shape out;
    if (!dsl::broadcast_shapes(shape, t->shape(), out))
      dsl::fail(loc, fmt::format("{}: cannot broadcast the pointer {} with {}", op, dsl::describe(p->type),
                                 dsl::describe(*t)));
    shape = out;
  }
  return shape;
}

/// store and atomic_add: (ptr, value, [mask]).
std::vector<ir::Value *> write_operands(TraceContext &ctx, const Tile &ptr, const Tile &value, const Tile &mask,
                                        const char *op, const SrcLoc &loc) {
  ir::Value *p = pointer_operand(ptr, op, loc);
  DType pointee = p->type.dtype();
  dsl::check_value_dtype(value, pointee, p->type, op, "the value", loc);
  check_mask(mask, op, loc);
  dsl::Shape shape = common_shape(p, {&value, &mask}, op, loc);
  std::vector<ir::Value *> ops = {dsl::broadcast_value(ctx, p, shape, op, loc),
                                  dsl::materialize(ctx, value, pointee, shape, op, loc)};
  if (mask.valid()) ops.push_back(dsl::materialize(ctx, mask, DType::i1, shape, op, loc));
  return ops;
}

}  // namespace

Tile load(const Tile &ptr, const Tile &mask, const Tile &other, SrcLoc loc) {
  auto &ctx = TraceContext::require("load", loc);
  ir::Value *p = pointer_operand(ptr, "load", loc);
  DType pointee = p->type.dtype();
  if (other.valid() && !mask.valid())
    dsl::fail(loc, fmt::format("load: 'other' ({}) is only meaningful with a mask", dsl::describe(other)));
  check_mask(mask, "load", loc);
  if (other.valid()) dsl::check_value_dtype(other, pointee, p->type, "load", "'other'", loc);
  dsl::Shape shape = common_shape(p, {&mask, &other}, "load", loc);
  std::vector<ir::Value *> ops = {dsl::broadcast_value(ctx, p, shape, "load", loc)};
  if (mask.valid()) ops.push_back(dsl::materialize(ctx, mask, DType::i1, shape, "load", loc));
  if (other.valid()) ops.push_back(dsl::materialize(ctx, other, pointee, shape, "load", loc));
  ir::Type rt;
  rt.shape = shape;
  rt.elem.dtype = pointee;
  return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::Load, ops, rt, loc));
}

void store(const Tile &ptr, const Tile &value, const Tile &mask, SrcLoc loc) {
  auto &ctx = TraceContext::require("store", loc);
  auto ops = write_operands(ctx, ptr, value, mask, "store", loc);
  ctx.builder.create(ir::OpKind::Store, ops, {}, {}, dsl::ir_loc(loc));
}

Tile atomic_add(const Tile &ptr, const Tile &value, const Tile &mask, MemOrder order, SrcLoc loc) {
  auto &ctx = TraceContext::require("atomic_add", loc);
  auto ops = write_operands(ctx, ptr, value, mask, "atomic_add", loc);
  ir::Type rt = ops[1]->type;
  ir::Attrs attrs;
  attrs.flag = order == MemOrder::AcqRel;
  return TileAccess::from_value(dsl::emit(ctx, ir::OpKind::AtomicAdd, ops, rt, loc, attrs));
}

}  // namespace tilejit
