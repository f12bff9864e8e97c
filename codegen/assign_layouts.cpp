#include "codegen/assign_layouts.h"

#include <fmt/format.h>

#include "tilejit/error.h"

namespace tilejit::codegen {

bool is_elementwise(ir::OpKind k) {
  using K = ir::OpKind;
  switch (k) {
    case K::Add: case K::Sub: case K::Mul: case K::Div: case K::Rem: case K::Minimum: case K::Maximum:
    case K::And: case K::Or: case K::Xor: case K::Shl: case K::Shr: case K::Cmp: case K::Neg: case K::Not:
    case K::Exp: case K::Exp2: case K::Log: case K::Log2: case K::Sqrt: case K::Rsqrt: case K::Abs:
    case K::Tanh: case K::Sigmoid: case K::Fma: case K::Select: case K::Cast: case K::PtrAdd:
      return true;
    default:
      return false;
  }
}

const Layout &LayoutPlan::of(const ir::Value *v) const {
  auto it = layouts.find(v);
  if (it == layouts.end())
    throw CompileError(fmt::format("codegen: no layout was assigned to a value of type {}", v->type.str()));
  return it->second;
}

namespace {

class Assigner {
 public:
  Assigner(LayoutPlan &plan, int num_warps) : plan_(plan), num_warps_(num_warps) {}

  void block(const ir::Block &b) {
    for (auto &op : b.ops) this->op(*op);
  }

  // Records the single user of every value whose only use is a Broadcast (the ExpandDims hint).
  void collect_uses(const ir::Block &b) {
    ir::walk(const_cast<ir::Block &>(b), [&](ir::Op &op) {
      for (auto *o : op.operands) {
        ++use_count_[o];
        user_[o] = &op;
      }
    });
  }

 private:
  LayoutPlan &plan_;
  int num_warps_;
  std::unordered_map<const ir::Value *, int> use_count_;
  std::unordered_map<const ir::Value *, const ir::Op *> user_;
  std::unordered_set<const ir::Value *> tentative_;  // loop args whose init is rematerializable

  bool free(const ir::Value *v) const {
    return plan_.rematerializable.count(v) || tentative_.count(v);
  }
  void set(const ir::Value *v, Layout l) {
    if (!v->type.is_scalar()) plan_.layouts[v] = std::move(l);
  }
  Layout dflt(const ir::Value *v) const { return default_layout(v->type.shape, num_warps_); }

  void op(const ir::Op &op) {
    using K = ir::OpKind;
    const ir::Value *res = op.num_results() ? op.result() : nullptr;
    bool tile = res && !res->type.is_scalar();
    switch (op.kind) {
      case K::Constant: case K::Arange: case K::Splat:
        if (tile) {
          set(res, dflt(res));
          plan_.rematerializable.insert(res);
        }
        return;
      case K::Trans: case K::Reshape:
        set(res, dflt(res));
        return;
      case K::Load: case K::AtomicAdd:
        if (tile) set(res, plan_.of(op.operand(0)));
        return;
      case K::Reduce: case K::ArgReduce:
        if (tile) set(res, slice_layout(plan_.of(op.operand(0)), int(op.attrs.axis)));
        return;
      case K::ExpandDims: {
        const ir::Value *src = op.operand(0);
        int axis = int(op.attrs.axis);
        if (!src->type.is_scalar() && !free(src)) {
          const Layout &l = plan_.of(src);
          int missing = 0;
          for (int k = 0; k < l.parent.rank(); ++k) missing += l.tile_dim_of(k) < 0;
          if (missing == 1) {
            set(res, expand_layout(l, axis));
            return;
          }
        }
        std::vector<int64_t> hint = res->type.shape;
        if (use_count_[res] == 1 && user_[res]->kind == K::Broadcast) hint = user_[res]->result()->type.shape;
        set(res, reshape_same_params(default_layout(hint, num_warps_), res->type.shape));
        if (src->type.is_scalar() || free(src)) plan_.rematerializable.insert(res);
        return;
      }
      case K::Broadcast:
        set(res, reshape_same_params(plan_.of(op.operand(0)), res->type.shape));
        return;
      case K::Dot:
        set(res, free(op.operand(2)) ? dflt(res) : plan_.of(op.operand(2)));
        return;
      case K::For:
        for_op(op);
        return;
      case K::If: {
        block(*op.region(0));
        block(*op.region(1));
        const ir::Block &then = *op.region(0);
        for (int i = 0; i < op.num_results(); ++i) {
          const ir::Value *r = op.result(i);
          if (r->type.is_scalar()) continue;
          if (!then.ops.empty() && then.ops.back()->kind == K::Yield) set(r, plan_.of(then.ops.back()->operand(i)));
          else set(r, dflt(r));
        }
        return;
      }
      default:
        break;
    }
    if (is_elementwise(op.kind) && tile) {
      const ir::Value *pick = nullptr;
      bool all_free = true;
      for (auto *o : op.operands) {
        if (o->type.is_scalar()) continue;
        if (!free(o)) {
          all_free = false;
          if (!pick) pick = o;
        }
      }
      if (!pick)
        for (auto *o : op.operands)
          if (!o->type.is_scalar()) { pick = o; break; }
      set(res, pick ? plan_.of(pick) : dflt(res));
      if (all_free) plan_.rematerializable.insert(res);
    }
  }

  void for_op(const ir::Op &op) {
    const ir::Block &body = *op.region(0);
    int n = op.num_operands() - 3;
    for (int i = 0; i < n; ++i) {
      const ir::Value *init = op.operand(3 + i), *arg = body.arg(1 + i);
      if (init->type.is_scalar()) continue;
      set(arg, plan_.of(init));
      if (free(init)) tentative_.insert(arg);
    }
    for (int iter = 0;; ++iter) {
      block(body);
      if (iter == 4) break;  // stop iterating; the lowering converts whatever still differs
      const ir::Op &y = *body.ops.back();
      bool changed = false;
      for (int i = 0; i < n && i < y.num_operands(); ++i) {
        const ir::Value *arg = body.arg(1 + i), *yv = y.operand(i);
        if (arg->type.is_scalar()) continue;
        const Layout &yl = plan_.of(yv);
        tentative_.erase(arg);
        if (!same_distribution(plan_.of(arg), yl)) {
          set(arg, yl);
          changed = true;
        }
      }
      if (!changed) break;
    }
    for (int i = 0; i < n; ++i) {
      const ir::Value *arg = body.arg(1 + i);
      tentative_.erase(arg);
      if (!arg->type.is_scalar()) set(op.result(i), plan_.of(arg));
    }
  }
};

}  // namespace

LayoutPlan assign_layouts(const ir::Function &fn, int num_warps) {
  LayoutPlan plan;
  Assigner a(plan, num_warps);
  a.collect_uses(*fn.body);
  a.block(*fn.body);
  return plan;
}

}  // namespace tilejit::codegen
