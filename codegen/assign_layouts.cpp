#include "codegen/assign_layouts.h"

#include <fmt/format.h>

#include <optional>

#include "codegen/mma.h"
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

  // Records the users of every value (for the ExpandDims hint).
  void collect_uses(const ir::Block &b) {
    ir::walk(const_cast<ir::Block &>(b), [&](ir::Op &op) {
      for (auto *o : op.operands) users_[o].push_back(&op);
    });
  }

 private:
  LayoutPlan &plan_;
  int num_warps_;
  std::unordered_map<const ir::Value *, std::vector<const ir::Op *>> users_;
  std::unordered_set<const ir::Value *> tentative_;  // loop args whose init is rematerializable

  // free: may take any layout without cost for the purpose of picking layouts (includes loop args whose
  // layout is still open); remat: really recomputable at any use.
  bool free(const ir::Value *v) const { return remat(v) || tentative_.count(v); }
  bool remat(const ir::Value *v) const { return plan_.rematerializable.count(v) != 0; }
  void mark_remat(const ir::Value *v, bool yes) {
    if (yes) plan_.rematerializable.insert(v);
    else plan_.rematerializable.erase(v);
  }
  void set(const ir::Value *v, Layout l) {
    if (!v->type.is_scalar()) plan_.layouts[v] = std::move(l);
  }
  Layout dflt(const ir::Value *v) const { return default_layout(v->type.shape, num_warps_); }

  // The shape v is eventually broadcast to, following elementwise users (e.g. x[:, None] * stride + ptr,
  // broadcast afterwards); v's own shape when no broadcast is found.
  std::vector<int64_t> broadcast_target(const ir::Value *v, int depth = 0) {
    for (const ir::Op *u : users_[v]) {
      if (u->kind == ir::OpKind::Broadcast) return u->result()->type.shape;
      if (depth < 8 && is_elementwise(u->kind) && u->result()->type.shape == v->type.shape) {
        auto s = broadcast_target(u->result(), depth + 1);
        if (s != v->type.shape) return s;
      }
    }
    return v->type.shape;
  }

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
        std::vector<int64_t> hint = broadcast_target(res);
        set(res, reshape_same_params(default_layout(hint, num_warps_), res->type.shape));
        mark_remat(res, src->type.is_scalar() || remat(src));
        return;
      }
      case K::Broadcast:
        if (free(op.operand(0))) {  // recomputed in whatever layout a user needs: plan the default
          set(res, dflt(res));
          mark_remat(res, remat(op.operand(0)));
        } else {
          set(res, reshape_same_params(plan_.of(op.operand(0)), res->type.shape));
        }
        return;
      case K::Dot:
        if (dot_uses_mma(op, num_warps_)) {  // tensor cores: the accumulator layout of mma.sync
          set(res, *mma_layout(res->type.shape, num_warps_));
          return;
        }
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
      bool all_free = true, all_remat = true;
      for (auto *o : op.operands) {
        if (o->type.is_scalar()) continue;
        all_remat = all_remat && remat(o);
        if (!free(o)) {
          all_free = false;
          if (!pick || (in_mma_layout(o) && !in_mma_layout(pick))) pick = o;
        }
      }
      // Results computed only from rematerializable values are themselves rematerializable: plan them in
      // the default layout (the one loads and stores vectorize best in), not their operands' layouts.
      set(res, all_free ? dflt(res) : plan_.of(pick));
      mark_remat(res, all_remat);
    }
  }

  // When non-free operands disagree, the MMA accumulator layout wins: converting the other operand (often a
  // small i1 mask) is cheaper than converting the scores and then converting p back for the next dot.
  bool in_mma_layout(const ir::Value *v) const {
    const Layout &l = plan_.of(v);
    std::optional<Layout> mma = mma_layout(l.shape, num_warps_);
    return mma && *mma == l;
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
