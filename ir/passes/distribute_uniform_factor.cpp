// distribute_uniform_factor: a uniform factor k times a difference of two integer-valued f32 tiles, each replicated
// from fewer elements, is distributed over the difference, so that its products run once per distinct element of
// each side instead of once per element of the tile (Triton moves elementwise work in front of broadcasts alike):
//
//   c + k·(a − b), k·(a − b) + c, fma(k, a − b, c)   → (c − k·(b − t)) + k·(a − t)
//   c − k·(a − b)                                      → (c + k·(b − t)) − k·(a − t)
//   k·(a − b) otherwise                                → k·(a − t) − k·(b − t)
//
// with k a constant or a broadcast scalar and t a scalar bound of b at this point (ir/passes/tile_bounds.h; any t
// gives the same value, t near b keeps its precision). An
// ALiBi bias slope·(q_idx − kv_idx) on a key block with one sign (ir/passes/specialize_uniform_sign.cpp) becomes a
// row term and a column term, and fold_axis_terms then moves the row term out of the per-element work. The
// offset t keeps the difference's precision: a and b are integers within ±2^24 (they come from integer
// conversions; ir/value_range.h), so b − t is exact and small across a block of keys, and a − t is exact up to
// 2^24; the two products and the sum round three times instead of once, an error of a few ulp of |k·(a − b)| plus
// 2^-24·|k|·(the span of b). Without a bound for b the product is left as written. f32 only, mul_rn's products
// left alone.
#include <iterator>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ir/builder.h"
#include "ir/passes.h"
#include "ir/passes/pass_utils.h"
#include "ir/passes/tile_bounds.h"
#include "ir/value_range.h"

namespace tilejit::ir {
namespace {

constexpr double kExactInF32 = 16777216.0;  // 2^24

/// k, when v is a constant or a scalar replicated over the tile: the scalar (or constant) to multiply sources by.
struct Uniform {
  const Value *scalar = nullptr;  // replicated scalar, or null for a constant
  double constant = 0;
};
std::optional<Uniform> uniform_of(const Value *v) {
  if (auto c = passes::constant_of(v)) return Uniform{nullptr, c->f};
  const Value *source = nullptr;
  passes::replication_chain(v, source);
  if (source == v || !source->type.is_scalar()) return std::nullopt;
  if (auto c = passes::constant_of(source)) return Uniform{nullptr, c->f};
  return Uniform{source, 0};
}

/// Whether v is an f32 tile replicated from fewer elements whose source is an integer converted to f32 within ±2^24.
bool replicated_integer(const Value *v) {
  const Value *source = nullptr;
  auto chain = passes::replication_chain(v, source);
  if (chain.empty() || source->type.numel() >= v->type.numel()) return false;
  const Op *cast = source->def;
  if (!cast || cast->kind != OpKind::Cast || cast->attrs.flag || cast->operand(0)->type.is_ptr() ||
      !is_int(cast->operand(0)->type.dtype()) || cast->operand(0)->type.dtype() == DType::i1)
    return false;
  const Interval r = value_range(cast->operand(0));
  return r.lo >= -kExactInF32 && r.hi <= kExactInF32;
}

/// k·(v's source − t), replicated as v was, built at b's insertion point.
Value *scaled_term(Builder &b, const Value *v, const Uniform &k, Value *t, SourceLoc loc) {
  const Value *source = nullptr;
  auto chain = passes::replication_chain(v, source);
  const Type &st = source->type;
  auto spread = [&](Value *scalar) {
    return st.is_scalar() ? scalar : b.create1(OpKind::Splat, {scalar}, st, {}, loc);
  };
  Value *shifted = b.create1(OpKind::Sub, {const_cast<Value *>(source), spread(t)}, st, {}, loc);
  Value *factor;
  if (k.scalar) {
    factor = spread(const_cast<Value *>(k.scalar));
  } else {
    Attrs a;
    a.fvalue = k.constant;
    factor = b.create1(OpKind::Constant, {}, st, a, loc);
  }
  Value *r = b.create1(OpKind::Mul, {shifted, factor}, st, {}, loc);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    r = b.create1((*it)->kind, {r}, (*it)->result()->type, (*it)->attrs, loc);
  return r;
}

bool is_f32_tile(const Value *v) { return !v->type.is_ptr() && v->type.dtype() == DType::f32 && v->type.numel() > 1; }

}  // namespace

void distribute_uniform_factor(Function &fn) {
  std::vector<Op *> candidates;
  std::unordered_map<const Value *, Op *> user_of;  // a value's user, where it has one
  walk(*fn.body, [&](Op &op) {
    if (((op.kind == OpKind::Mul && !op.attrs.flag) || op.kind == OpKind::Fma) && is_f32_tile(op.result()))
      candidates.push_back(&op);
    for (const Value *v : op.operands) user_of[v] = &op;
  });
  auto uses = passes::live_use_counts(*fn.body);
  for (Op *prod : candidates) {
    if (uses[prod->result()] == 0) continue;  // dead (DCE's)
    for (int i = 0; i < 2; ++i) {
      Value *d = prod->operand(i);
      auto k = uniform_of(prod->operand(1 - i));
      if (!k || uses[d] != 1 || !d->def || d->def->kind != OpKind::Sub) continue;
      Value *a = d->def->operand(0), *bv = d->def->operand(1);
      if (!replicated_integer(a) || !replicated_integer(bv)) continue;
      // The sum the product feeds, rewritten in its place: the fma itself, or an add or subtract that is the
      // product's only use (c + p, p + c, c − p); otherwise the product alone.
      Op *sum = prod;
      Value *c = prod->kind == OpKind::Fma ? prod->operand(2) : nullptr;
      bool subtract = false;
      if (!c && uses[prod->result()] == 1) {
        Op *u = user_of[prod->result()];
        if (u->parent == prod->parent && (u->kind == OpKind::Add || (u->kind == OpKind::Sub && u->operand(1) == prod->result())) &&
            u->operand(0) != u->operand(1)) {
          sum = u;
          c = u->operand(0) == prod->result() ? u->operand(1) : u->operand(0);
          subtract = u->kind == OpKind::Sub;
        }
      }
      Block scratch;
      Builder b(&scratch);
      passes::TileBounds bounds(b, prod->loc);
      auto t = bounds.of(bv);
      if (!t) continue;
      Value *ka = scaled_term(b, a, *k, t->lo, prod->loc);
      Value *kb = scaled_term(b, bv, *k, t->lo, prod->loc);
      const Type &type = sum->result()->type;
      Value *left = c ? b.create1(subtract ? OpKind::Add : OpKind::Sub, {c, kb}, type, {}, prod->loc) : nullptr;
      // The sum becomes the last operation, keeping its result Value and its uses.
      Block &block = *sum->parent;
      const size_t at = passes::index_of(sum);
      for (auto &op : scratch.ops) op->parent = &block;
      block.ops.insert(block.ops.begin() + long(at), std::make_move_iterator(scratch.ops.begin()),
                       std::make_move_iterator(scratch.ops.end()));
      sum->kind = c && !subtract ? OpKind::Add : OpKind::Sub;
      sum->operands = c ? std::vector<Value *>{left, ka} : std::vector<Value *>{ka, kb};
      sum->attrs = Attrs{};
      uses[d] = 0;
      break;
    }
  }
}

}  // namespace tilejit::ir
