// convert_before_broadcast: an integer tile converted to f32 is converted before the arithmetic that makes it a
// full tile, where that is exact, so that the conversions run once per row or column instead of once per element
// (Triton reorders elementwise ops around broadcasts alike). A score_mod's distance `abs(q_idx − kv_idx).to(f32)`
// is the case: q_idx is one value per row, kv_idx one per column, and each element then costs an integer
// subtract, an integer abs and a conversion (on a quarter-rate unit). Two rewrites, applied to a fixed point:
//   f32(|x|)   → |f32(x)|            where x cannot be INT_MIN (whose |x| wraps); f32 rounds symmetrically
//   f32(a ± b) → f32(a) ± f32(b)     where a and b are each a constant or replicated from fewer elements, and
//                                    both lie in [−2^24, 2^24] (ir/value_range.h): then both conversions are
//                                    exact, a ± b cannot wrap, and the f32 sum rounds the exact a ± b once, as
//                                    the conversion did. Bit for bit the same results.
#include <vector>

#include "ir/builder.h"
#include "ir/passes.h"
#include "ir/passes/pass_utils.h"
#include "ir/value_range.h"

namespace tilejit::ir {
namespace {

constexpr double kExactInF32 = 16777216.0;  // 2^24: every integer of smaller magnitude is an f32

bool is_f32_conversion_of_int(const Op &op) {
  return op.kind == OpKind::Cast && !op.result()->type.is_ptr() && op.result()->type.dtype() == DType::f32 &&
         !op.operand(0)->type.is_ptr() && is_int(op.operand(0)->type.dtype()) &&
         op.operand(0)->type.dtype() != DType::i1;
}

Type as_f32(Type t) {
  t.elem.dtype = DType::f32;
  return t;
}

/// Whether v is a constant or replicated from fewer elements.
bool narrow(const Value *v) { return passes::constant_of(v) || passes::source_elements(v) < v->type.numel(); }

/// f32(v) where v is narrow(): the conversion of the constant, or of the
/// replicated source followed by the same replication.
Value *convert_narrow(Builder &b, const Value *v, SourceLoc loc) {
  if (auto c = passes::constant_of(v)) {
    Attrs a;
    a.fvalue = double(float(c->i));
    return b.create1(OpKind::Constant, {}, as_f32(v->type), a, loc);
  }
  const Value *source = nullptr;
  std::vector<const Op *> chain = passes::replication_chain(v, source);
  Value *r = b.create1(OpKind::Cast, {const_cast<Value *>(source)}, as_f32(source->type), {}, loc);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    r = b.create1((*it)->kind, {r}, as_f32((*it)->result()->type), (*it)->attrs, loc);
  return r;
}

bool within(const Interval &r, double bound) { return r.lo >= -bound && r.hi <= bound; }

}  // namespace

void convert_before_broadcast(Function &fn) {
  std::vector<Op *> casts;
  walk(*fn.body, [&](Op &op) {
    if (is_f32_conversion_of_int(op) && op.result()->type.numel() > 1) casts.push_back(&op);
  });
  for (Op *cast : casts) {
    const Op *src = cast->operand(0)->def;
    if (!src) continue;
    Builder b(cast->parent);
    b.set_insertion_point(cast->parent, passes::index_of(cast));
    if (src->kind == OpKind::Abs) {
      const Interval x = value_range(src->operand(0));
      if (x.lo <= -2147483648.0) continue;  // INT_MIN's |x| wraps
      Value *converted = b.create1(OpKind::Cast, {src->operand(0)}, cast->result()->type, {}, cast->loc);
      cast->kind = OpKind::Abs;
      cast->operands = {converted};
      continue;
    }
    if (src->kind != OpKind::Add && src->kind != OpKind::Sub) continue;
    if (!narrow(src->operand(0)) || !narrow(src->operand(1))) continue;
    if (!within(value_range(src->operand(0)), kExactInF32) || !within(value_range(src->operand(1)), kExactInF32))
      continue;
    Value *a = convert_narrow(b, src->operand(0), cast->loc);
    Value *c = convert_narrow(b, src->operand(1), cast->loc);
    cast->kind = src->kind;
    cast->operands = {a, c};
  }
}

}  // namespace tilejit::ir
