// specialize_uniform_sign: inside a loop, a tile whose sign is the same in every element at an iteration (a key
// block wholly on one side of the attention diagonal, for q_idx − kv_idx) needs no per-element abs or sign test
// there. For each such x — one with an abs(x) in a loop — the pass builds, at run time and per iteration, scalar
// bounds of x over the tile, and splits the ops that depend on x's sign into the two arms of an if (as Halide's
// loop partitioning splits a loop where a condition is uniform, here without solving for the loop's range):
//
//   then (lo(x) > 0 or hi(x) < 0):  abs(x) → x·s and cmp(x, 0) → cmp(s, 0), with s = ±1 the uniform sign
//   else:                            the ops as written (their abs marked so that no pass splits them again)
//
// A later pass then treats x·s like any product with a uniform factor (a slope·|q − kv| becomes (slope·s)·(q − kv),
// and the distance's row and column parts can be separated). Bit for bit the same results: x has no zero in the
// then arm, so x·s is |x| exactly.
//
// The bounds come from ir/passes/tile_bounds.h; a float bound that is NaN fails both tests.
//
// What moves into the if: the ops after the first sign-dependent use that depend on it, are pure, hold no region
// and are not dots, up to the first op that depends on them but cannot move (a dot: the p·v of attention stays in
// the loop's body, where the pipeliner sees it); their values used later become the if's results.
#include <cmath>
#include <cstdint>
#include <iterator>
#include <memory>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/builder.h"
#include "ir/passes.h"
#include "ir/passes/pass_utils.h"
#include "ir/passes/tile_bounds.h"

namespace tilejit::ir {
namespace {

Type scalar_of(DType dt) { return Type{{}, ElemType{dt}}; }

bool inside_loop(const Op *op) {
  for (const Block *b = op->parent; b && b->parent; b = b->parent->parent)
    if (b->parent->kind == OpKind::For) return true;
  return false;
}

bool is_zero_constant(const Value *v) {
  const Value *source = nullptr;
  passes::replication_chain(v, source);
  auto c = passes::constant_of(source);
  return c && (c->is_float ? c->f == 0.0 : c->i == 0);
}

bool uses_any(Op &op, const std::unordered_set<const Value *> &vals) {
  bool found = false;
  auto check = [&](Op &o) {
    for (const Value *v : o.operands) found |= vals.count(v) > 0;
  };
  check(op);
  for (auto &r : op.regions) walk(*r, check);
  return found;
}

bool movable(const Op &op) { return is_pure(op.kind) && op.regions.empty() && op.kind != OpKind::Dot; }

/// A use of x whose result follows from x's sign alone: abs(x), or a comparison of x with 0.
bool sign_use(const Op &op, const Value *x) {
  if (op.kind == OpKind::Abs) return op.operand(0) == x && !op.attrs.flag;
  if (op.kind != OpKind::Cmp) return false;
  return (op.operand(0) == x && is_zero_constant(op.operand(1))) ||
         (op.operand(1) == x && is_zero_constant(op.operand(0)));
}

bool reads(Block &b, const Value *v) {
  bool found = false;
  walk(b, [&](Op &op) {
    for (const Value *o : op.operands) found |= o == v;
  });
  return found;
}

/// The movable ops in front of `branch` whose results only its arms read (x itself, now read by the else arm only)
/// move into those arms — copied into the then arm, moved into the else arm — so that an iteration computes only
/// what its arm needs. Walked backwards, so that an op's operands are considered after it.
void sink_into_arms(Block &block, Op *branch) {
  for (size_t i = passes::index_of(branch); i-- > 0;) {
    Op *op = block.ops[i].get();
    if (!movable(*op) || op->num_results() != 1) continue;
    const Value *v = op->result();
    bool outside = false;
    for (size_t j = i + 1; j < block.ops.size() && !outside; ++j) {
      Op &other = *block.ops[j];
      if (&other == branch) {
        for (const Value *o : other.operands) outside |= o == v;
        continue;
      }
      for (const Value *o : other.operands) outside |= o == v;
      for (auto &r : other.regions) outside |= reads(*r, v);
    }
    if (outside) continue;
    Block *then_arm = branch->region(0), *else_arm = branch->region(1);
    const bool in_then = reads(*then_arm, v), in_else = reads(*else_arm, v);
    if (!in_then && !in_else) continue;  // unused: DCE's
    if (in_then) {
      Builder tb(then_arm);
      tb.set_insertion_point(then_arm, 0);
      std::vector<Type> types{op->result()->type};
      Op *copy = tb.create(op->kind, op->operands, types, op->attrs, op->loc);
      replace_all_uses(*then_arm, op->result(), copy->result());
    }
    std::unique_ptr<Op> owned = std::move(block.ops[i]);
    block.ops.erase(block.ops.begin() + long(i));
    if (in_else) {
      owned->parent = else_arm;
      else_arm->ops.insert(else_arm->ops.begin(), std::move(owned));
    }
  }
}

/// Splits the sign-dependent work on abs's operand in abs's block; returns false where it cannot.
bool specialize(Op *abs) {
  Block &block = *abs->parent;
  Value *x = abs->operand(0);
  const size_t first = passes::index_of(abs);

  // The ops that move: the sign uses from abs on and what depends on them, up to the first op that cannot move.
  std::vector<Op *> moved;
  std::unordered_set<const Value *> moved_vals;
  std::unordered_set<const Op *> moved_set;
  size_t at = block.ops.size();
  for (size_t i = first; i < block.ops.size(); ++i) {
    Op &op = *block.ops[i];
    const bool root = sign_use(op, x);
    if (!root && !uses_any(op, moved_vals)) continue;
    if (!root && !movable(op)) {
      at = i;
      break;
    }
    moved.push_back(&op);
    moved_set.insert(&op);
    for (auto &r : op.results) moved_vals.insert(r.get());
  }
  if (at == block.ops.size()) return false;  // a block ends in its yield, which cannot move; the body has none

  // The values the rest of the function reads from the moved ops.
  std::vector<Value *> outs;
  std::unordered_set<const Value *> out_set;
  for (size_t i = at; i < block.ops.size(); ++i) {
    Op &op = *block.ops[i];
    auto collect = [&](Op &o) {
      for (Value *v : o.operands)
        if (moved_vals.count(v) && out_set.insert(v).second) outs.push_back(v);
    };
    collect(op);
    for (auto &r : op.regions) walk(*r, collect);
  }
  if (outs.empty()) return false;

  // The test and the sign, built aside and put in front of the moved ops' place only when x can be bounded.
  Block scratch;
  Builder b(&scratch);
  passes::TileBounds bounds(b, abs->loc);
  auto r = bounds.of(x);
  if (!r) return false;
  const DType dt = x->type.dtype();
  auto cmp = [&](Value *a, Value *c, CmpPred p) {
    Attrs attrs;
    attrs.pred = p;
    return b.create1(OpKind::Cmp, {a, c}, scalar_of(DType::i1), attrs, abs->loc);
  };
  auto constant = [&](DType t, double v) {
    Attrs a;
    if (is_float(t)) a.fvalue = v;
    else a.ivalue = int64_t(v);
    return b.create1(OpKind::Constant, {}, scalar_of(t), a, abs->loc);
  };
  const DType bdt = r->lo->type.dtype();
  Value *positive = cmp(r->lo, constant(bdt, 0), CmpPred::gt);
  Value *negative = cmp(r->hi, constant(bdt, 0), CmpPred::lt);
  Value *uniform = b.create1(OpKind::Or, {positive, negative}, scalar_of(DType::i1), {}, abs->loc);
  if (Value *ok = bounds.no_wrap()) uniform = b.create1(OpKind::And, {uniform, ok}, scalar_of(DType::i1), {}, abs->loc);
  Value *sign = b.create1(OpKind::Select, {positive, constant(dt, 1), constant(dt, -1)}, scalar_of(dt), {}, abs->loc);
  for (auto &op : scratch.ops) op->parent = &block;
  const size_t built = scratch.ops.size();
  block.ops.insert(block.ops.begin() + long(at), std::make_move_iterator(scratch.ops.begin()),
                   std::make_move_iterator(scratch.ops.end()));
  b.set_insertion_point(&block, at + built);

  std::vector<Type> types;
  for (Value *v : outs) types.push_back(v->type);
  Op *branch = b.create(OpKind::If, {uniform}, types, {}, abs->loc);

  // then: the moved ops with the sign uses specialized.
  std::unordered_map<const Value *, Value *> map;
  Builder tb(branch->region(0));
  for (Op *op : moved) {
    auto mapped = [&](Value *v) {
      auto it = map.find(v);
      return it == map.end() ? v : it->second;
    };
    Value *result = nullptr;
    if (sign_use(*op, x) && op->kind == OpKind::Abs) {
      Value *s = tb.create1(OpKind::Splat, {sign}, x->type, {}, op->loc);
      result = tb.create1(OpKind::Mul, {x, s}, x->type, {}, op->loc);
    } else if (sign_use(*op, x)) {
      const bool x_first = op->operand(0) == x;
      Value *zero = tb.create1(OpKind::Constant, {}, scalar_of(dt), {}, op->loc);
      Value *c = tb.create1(OpKind::Cmp, {x_first ? sign : zero, x_first ? zero : sign}, scalar_of(DType::i1),
                            op->attrs, op->loc);
      result = tb.create1(OpKind::Splat, {c}, op->result()->type, {}, op->loc);
    }
    if (result) {
      map[op->result()] = result;
      continue;
    }
    std::vector<Value *> operands;
    for (Value *v : op->operands) operands.push_back(mapped(v));
    std::vector<Type> rtypes;
    for (auto &res : op->results) rtypes.push_back(res->type);
    Op *copy = tb.create(op->kind, operands, rtypes, op->attrs, op->loc);
    for (int i = 0; i < op->num_results(); ++i) map[op->result(i)] = copy->result(i);
  }
  std::vector<Value *> then_yield;
  for (Value *v : outs) then_yield.push_back(map.count(v) ? map[v] : v);
  tb.create(OpKind::Yield, then_yield, {}, {}, abs->loc);

  // else: the moved ops themselves, in order, their abs marked.
  Block *else_block = branch->region(1);
  for (size_t i = 0; i < block.ops.size();) {
    if (!moved_set.count(block.ops[i].get())) {
      ++i;
      continue;
    }
    std::unique_ptr<Op> op = std::move(block.ops[i]);
    block.ops.erase(block.ops.begin() + long(i));
    if (sign_use(*op, x) && op->kind == OpKind::Abs) op->attrs.flag = true;
    op->parent = else_block;
    else_block->ops.push_back(std::move(op));
  }
  Builder eb(else_block);
  eb.create(OpKind::Yield, outs, {}, {}, abs->loc);

  // The rest of the block reads the if's results.
  const size_t now_at = passes::index_of(branch);
  for (size_t i = now_at + 1; i < block.ops.size(); ++i) {
    Op &op = *block.ops[i];
    for (size_t k = 0; k < outs.size(); ++k) {
      for (auto &o : op.operands)
        if (o == outs[k]) o = branch->result(int(k));
      for (auto &reg : op.regions) replace_all_uses(*reg, outs[k], branch->result(int(k)));
    }
  }
  sink_into_arms(block, branch);
  return true;
}

}  // namespace

void specialize_uniform_sign(Function &fn) {
  std::vector<Op *> candidates;
  auto uses = use_counts(*fn.body);
  walk(*fn.body, [&](Op &op) {
    if (op.kind == OpKind::Abs && uses.count(op.result()) && !op.attrs.flag && op.result()->type.numel() > 1 && !op.result()->type.is_ptr() &&
        inside_loop(&op))
      candidates.push_back(&op);
  });
  // One per pass: each split moves ops between blocks (optimize's fixed point takes the next).
  for (Op *abs : candidates)
    if (specialize(abs)) return;
}

}  // namespace tilejit::ir
