// canonicalize: local rewrites that keep the exact semantics (no fast-math):
//  - identities: x+0, 0+x, x-0, x*1, 1*x, x/1, x<<0, x>>0, x|0, x^0, x&-1, min(x,x), max(x,x), x&x, x|x;
//    for floats only where exact: x + (-0.0) and x - (+0.0) (x + (+0.0) turns -0 into +0);
//  - integer-only annihilators: x*0 → 0, x-x → 0, x^x → 0, x&0 → 0;
//  - neg(neg x) → x, not(not x) → x; select with a constant condition or equal arms;
//  - casts, broadcasts, reshapes and splats to the operand's own type → the operand;
//    shape ops of a splat → one splat; broadcast∘broadcast, reshape∘reshape, reshape∘expand_dims and
//    trans∘trans → one op (or the source when the composed permutation is the identity);
//  - ptr_add of a zero offset → the pointer;
//  - a load/store/atomic_add mask that is constant true is dropped; a load with a constant false mask is
//    its `other` (or zero); a store with a constant false mask is erased;
//  - an if with a constant condition is replaced by the chosen region's ops; a for loop with constant
//    bounds that runs zero times is replaced by its initial values.
#include <algorithm>
#include <numeric>

#include "ir/passes.h"
#include "ir/passes/pass_utils.h"

namespace tilejit::ir {
namespace {

using passes::constant_of;
using passes::is_float_const;
using passes::is_int_const;

class Canonicalizer {
 public:
  explicit Canonicalizer(Function &fn) : fn_(fn) {}
  void run() { visit(*fn_.body); }

 private:
  void visit(Block &b) {
    for (size_t i = 0; i < b.ops.size();) {
      for (auto &r : b.ops[i]->regions) visit(*r);
      // After a rewrite, position i holds the rewritten op, the next op (the op was erased) or the ops of
      // an inlined region: look at it again so that chains of rewrites finish in one run. Every rewrite
      // makes the IR strictly smaller or simpler, so this terminates.
      changed_ = false;
      rewrite(b, i);
      if (!changed_) ++i;
    }
  }

  /// Replaces every use of op's results by `to` and erases the op.
  size_t replace(Block &b, size_t i, std::vector<Value *> to) {
    passes::replace_results(fn_, *b.ops[i], to);
    passes::erase_op(b, i);
    changed_ = true;
    return 0;
  }
  size_t replace(Block &b, size_t i, Value *to) { return replace(b, i, std::vector<Value *>{to}); }
  size_t to_int_constant(Op &op, int64_t v) {
    passes::make_constant(op, passes::ConstValue{false, 0.0, v});
    changed_ = true;
    return 1;
  }
  size_t mutated() { changed_ = true; return 1; }

  static bool is_int_typed(const Value *v) { return !v->type.is_ptr() && is_int(v->type.dtype()); }
  static bool is_i1_true(const Value *v) { auto c = constant_of(v); return c && !c->is_float && c->i != 0; }
  static bool is_i1_false(const Value *v) { return is_int_const(v, 0); }
  static bool is_all_ones(const Value *v) {
    return v->type.dtype() == DType::i1 ? is_int_const(v, 1) : is_int_const(v, -1);
  }
  /// x is the additive identity "0" for `v`'s type (ints: 0; floats: -0.0 for add, +0.0 for sub).
  static bool is_zero(const Value *v, bool negative_zero_for_float) {
    if (is_int_typed(v)) return is_int_const(v, 0);
    return is_float_const(v, negative_zero_for_float ? -0.0 : 0.0);
  }
  static bool is_one(const Value *v) {
    return is_int_typed(v) ? is_int_const(v, 1) : is_float_const(v, 1.0);
  }

  size_t rewrite(Block &b, size_t i) {
    Op &op = *b.ops[i];
    if (op.num_results() == 1 && op.regions.empty()) {
      Value *x = op.num_operands() > 0 ? op.operand(0) : nullptr;
      Value *y = op.num_operands() > 1 ? op.operand(1) : nullptr;
      const bool ints = x && is_int_typed(x);
      switch (op.kind) {
        case OpKind::Add:
          if (is_zero(y, true)) return replace(b, i, x);
          if (is_zero(x, true)) return replace(b, i, y);
          break;
        case OpKind::Sub:
          if (is_zero(y, false)) return replace(b, i, x);
          if (ints && x == y) return to_int_constant(op, 0);
          break;
        case OpKind::Mul:
          if (is_one(y)) return replace(b, i, x);
          if (is_one(x)) return replace(b, i, y);
          if (ints && (is_int_const(x, 0) || is_int_const(y, 0))) return to_int_constant(op, 0);
          break;
        case OpKind::Div:
          if (is_one(y)) return replace(b, i, x);
          break;
        case OpKind::Shl:
        case OpKind::Shr:
          if (is_int_const(y, 0)) return replace(b, i, x);
          break;
        case OpKind::Or:
        case OpKind::Xor:
          if (is_int_const(y, 0)) return replace(b, i, x);
          if (is_int_const(x, 0)) return replace(b, i, y);
          if (x == y) return op.kind == OpKind::Or ? replace(b, i, x) : to_int_constant(op, 0);
          break;
        case OpKind::And:
          if (is_all_ones(y)) return replace(b, i, x);
          if (is_all_ones(x)) return replace(b, i, y);
          if (is_int_const(x, 0) || is_int_const(y, 0)) return to_int_constant(op, 0);
          if (x == y) return replace(b, i, x);
          break;
        case OpKind::Minimum:
        case OpKind::Maximum:
          if (x == y) return replace(b, i, x);
          break;
        case OpKind::Neg:
        case OpKind::Not:
          if (x->def && x->def->kind == op.kind) return replace(b, i, x->def->operand(0));
          break;
        case OpKind::Select:
          if (is_i1_true(x)) return replace(b, i, y);
          if (is_i1_false(x)) return replace(b, i, op.operand(2));
          if (y == op.operand(2)) return replace(b, i, y);
          break;
        case OpKind::PtrAdd:
          if (is_int_const(y, 0)) return replace(b, i, x);
          break;
        case OpKind::Cast:
        case OpKind::Broadcast:
        case OpKind::Reshape:
        case OpKind::Splat:
          if (x->type == op.result()->type) return replace(b, i, x);
          return rewrite_shape_op(op);
        case OpKind::ExpandDims:
          return rewrite_shape_op(op);
        case OpKind::Trans:
          return rewrite_trans(b, i);
        case OpKind::Load:
          return rewrite_load(op);
        case OpKind::AtomicAdd:
          if (op.num_operands() == 3 && is_i1_true(op.operand(2))) { op.operands.pop_back(); return mutated(); }
          break;
        default: break;
      }
      return 1;
    }
    switch (op.kind) {
      case OpKind::Store:
        if (op.num_operands() == 3 && is_i1_true(op.operand(2))) { op.operands.pop_back(); return mutated(); }
        if (op.num_operands() == 3 && is_i1_false(op.operand(2))) { passes::erase_op(b, i); changed_ = true; return 0; }
        return 1;
      case OpKind::If: return rewrite_if(b, i);
      case OpKind::For: return rewrite_for(b, i);
      default: return 1;
    }
  }

  /// Shape ops of a splat become one splat; broadcast∘broadcast, reshape∘reshape, reshape∘expand_dims
  /// become one op on the original source.
  size_t rewrite_shape_op(Op &op) {
    Value *x = op.operand(0);
    if (op.kind == OpKind::Cast || !x->def) return 1;
    Op &src = *x->def;
    if (src.kind == OpKind::Splat && op.kind != OpKind::Splat) {
      op.kind = OpKind::Splat;
      op.operands = {src.operand(0)};
      op.attrs = Attrs{};
      return mutated();
    }
    if ((op.kind == OpKind::Broadcast && src.kind == OpKind::Broadcast) ||
        (op.kind == OpKind::Reshape && (src.kind == OpKind::Reshape || src.kind == OpKind::ExpandDims))) {
      op.operands = {src.operand(0)};
      return mutated();
    }
    return 1;
  }

  size_t rewrite_trans(Block &b, size_t i) {
    Op &op = *b.ops[i];
    Value *x = op.operand(0);
    auto is_identity = [](const std::vector<int64_t> &p) {
      for (size_t k = 0; k < p.size(); ++k)
        if (p[k] != int64_t(k)) return false;
      return true;
    };
    if (is_identity(op.attrs.ints)) return replace(b, i, x);
    if (x->def && x->def->kind == OpKind::Splat) return rewrite_shape_op(op);
    if (x->def && x->def->kind == OpKind::Trans) {
      // result dim k = mid dim outer[k] = source dim inner[outer[k]]
      const auto &inner = x->def->attrs.ints, &outer = op.attrs.ints;
      std::vector<int64_t> perm;
      for (int64_t d : outer) perm.push_back(inner[size_t(d)]);
      Value *src = x->def->operand(0);
      if (is_identity(perm)) return replace(b, i, src);
      op.operands = {src};
      op.attrs.ints = perm;
      return mutated();
    }
    return 1;
  }

  size_t rewrite_load(Op &op) {
    if (op.num_operands() < 2) return 1;
    Value *mask = op.operand(1);
    if (is_i1_true(mask)) {
      op.operands.resize(1);
      return mutated();
    }
    if (is_i1_false(mask)) {
      if (op.num_operands() == 3 && op.operand(2)->def && op.operand(2)->def->kind == OpKind::Constant) {
        Attrs a = op.operand(2)->def->attrs;
        op.kind = OpKind::Constant;
        op.operands.clear();
        op.attrs = a;
        return mutated();
      }
      if (op.num_operands() == 2) {
        op.kind = OpKind::Constant;
        op.operands.clear();
        op.attrs = Attrs{};  // zero of either kind
        return mutated();
      }
    }
    return 1;
  }

  /// Moves the ops of `region` (but its final yield) to position i of b; returns the yield's operands.
  std::vector<Value *> inline_region(Block &b, size_t i, Block &region) {
    std::vector<Value *> yielded = region.ops.back()->operands;
    region.ops.pop_back();
    for (auto &o : region.ops) o->parent = &b;
    size_t n = region.ops.size();
    b.ops.insert(b.ops.begin() + long(i), std::make_move_iterator(region.ops.begin()),
                 std::make_move_iterator(region.ops.end()));
    region.ops.clear();
    inlined_ = n;
    return yielded;
  }

  size_t rewrite_if(Block &b, size_t i) {
    Op &op = *b.ops[i];
    auto c = constant_of(op.operand(0));
    if (!c) return 1;
    Block &chosen = *op.region(c->i ? 0 : 1);
    std::vector<Value *> yielded = inline_region(b, i, chosen);
    size_t n = inlined_;
    replace(b, i + n, yielded);
    return n;
  }

  size_t rewrite_for(Block &b, size_t i) {
    Op &op = *b.ops[i];
    auto lb = constant_of(op.operand(0)), ub = constant_of(op.operand(1)), step = constant_of(op.operand(2));
    if (!lb || !ub || !step || step->i <= 0 || lb->i < ub->i) return 1;
    std::vector<Value *> inits(op.operands.begin() + 3, op.operands.end());
    return replace(b, i, inits);
  }

  Function &fn_;
  bool changed_ = false;
  size_t inlined_ = 0;
};

}  // namespace

void canonicalize(Function &fn) { Canonicalizer(fn).run(); }

}  // namespace tilejit::ir
