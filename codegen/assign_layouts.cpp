#include "codegen/assign_layouts.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>

#include "codegen/codegen.h"
#include "codegen/mma.h"
#include "ir/passes.h"
#include "tilejit/error.h"

namespace tilejit::codegen {


namespace {

class Assigner {
 public:
  Assigner(LoweringPlan &plan, int num_warps) : plan_(plan), num_warps_(num_warps) {}

  void block(const ir::Block &b) {
    for (auto &op : b.ops) this->op(*op);
  }

  // Records the users of every value (for the ExpandDims hint and resolve_open).
  void collect_uses(const ir::Block &b) {
    ir::walk(const_cast<ir::Block &>(b), [&](ir::Op &op) {
      for (auto *o : op.operands) users_[o].push_back(&op);
    });
  }

  // After picking: gives every open value the layout its first user that cares needs, users before
  // definitions (reverse program order), so a gather follows its broadcast and comparison to the layout of
  // the tile they meet (e.g. the scores' MMA layout) and nothing is converted. Values whose users take any
  // layout keep the one they were planned in.
  void resolve_open(const ir::Block &b) {
    std::vector<const ir::Value *> order;
    ir::walk(const_cast<ir::Block &>(b), [&](ir::Op &op) {
      for (auto &r : op.results)
        if (open(r.get())) order.push_back(r.get());
    });
    for (auto it = order.rbegin(); it != order.rend(); ++it)
      for (const ir::Op *u : users_[*it])
        if (std::optional<Layout> want = wanted_by(*u, *it)) {
          set(*it, std::move(*want));
          break;
        }
  }

 private:
  LoweringPlan &plan_;
  int num_warps_;
  std::unordered_map<const ir::Value *, std::vector<const ir::Op *>> users_;
  std::unordered_set<const ir::Value *> tentative_;  // loop args whose init is rematerializable
  // Gathers (see is_gather) and the broadcasts, expansions and elementwise ops computed from them and
  // rematerializable values only: computed once, but in whatever layout their users need (resolve_open).
  std::unordered_set<const ir::Value *> open_;

  // free: may take any layout without cost for the purpose of picking layouts (includes loop args and
  // gathered values whose layout is still open); remat: really recomputable at any use.
  bool free(const ir::Value *v) const { return remat(v) || tentative_.count(v) || open(v); }
  bool remat(const ir::Value *v) const { return plan_.rematerializable.count(v) != 0; }
  bool open(const ir::Value *v) const { return open_.count(v) != 0; }
  // movable: computable in any layout at its definition (a scalar operand is splatted in any layout).
  bool movable(const ir::Value *v) const { return v->type.is_scalar() || remat(v) || open(v); }
  void mark_remat(const ir::Value *v, bool yes) {
    if (yes) plan_.rematerializable.insert(v);
    else plan_.rematerializable.erase(v);
  }
  void mark_open(const ir::Value *v, bool yes) {
    if (yes) open_.insert(v);
    else open_.erase(v);
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
      if (depth < 8 && ir::is_elementwise(u->kind) && u->result()->type.shape == v->type.shape) {
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
      case K::Load:
        if (tile) {
          set(res, plan_.of(op.operand(0)));
          mark_open(res, is_gather(op));
        }
        return;
      case K::AtomicAdd:
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
            mark_open(res, false);
            return;
          }
        }
        std::vector<int64_t> hint = broadcast_target(res);
        set(res, reshape_same_params(default_layout(hint, num_warps_), res->type.shape));
        mark_remat(res, src->type.is_scalar() || remat(src));
        mark_open(res, !src->type.is_scalar() && open(src));
        return;
      }
      case K::Broadcast:
        if (free(op.operand(0))) {  // recomputed in whatever layout a user needs: plan the default
          set(res, dflt(res));
          mark_remat(res, remat(op.operand(0)));
          mark_open(res, open(op.operand(0)));
        } else {
          set(res, reshape_same_params(plan_.of(op.operand(0)), res->type.shape));
          mark_open(res, false);
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
    if (ir::is_elementwise(op.kind) && tile) {
      const ir::Value *pick = nullptr;
      bool all_free = true, all_remat = true, all_movable = true;
      for (auto *o : op.operands) {
        if (o->type.is_scalar()) continue;
        all_remat = all_remat && remat(o);
        all_movable = all_movable && movable(o);
        if (!free(o)) {
          all_free = false;
          if (!pick || (in_mma_layout(o) && !in_mma_layout(pick))) pick = o;
        }
      }
      // Results computed only from rematerializable values are themselves rematerializable: plan them in
      // the default layout (the one loads and stores vectorize best in), not their operands' layouts. Those
      // computed from gathers too stay open: resolve_open moves them to their users' layout.
      set(res, all_free ? dflt(res) : plan_.of(pick));
      mark_remat(res, all_remat);
      mark_open(res, all_movable && !all_remat);
    }
  }

  // The layout `user` reads its operand v in, or nullopt when it reads v in any layout (Reduce, Dot, Trans,
  // Reshape work from v's layout, whatever it is; a Reduce planned on v's earlier layout converts only its
  // smaller result).
  std::optional<Layout> wanted_by(const ir::Op &user, const ir::Value *v) const {
    using K = ir::OpKind;
    switch (user.kind) {
      case K::Broadcast:
        return reshape_same_params(plan_.of(user.result()), v->type.shape);
      case K::ExpandDims:
        return slice_layout(plan_.of(user.result()), int(user.attrs.axis));
      case K::Load:
        return plan_.of(user.result());
      case K::Store: case K::AtomicAdd:  // both work in their pointer's layout
        if (user.operand(0) == v) return std::nullopt;
        return plan_.of(user.operand(0));
      case K::Yield:
        return carried_layout(*user.parent->parent, operand_index(user, v));
      case K::For:  // operands (lb, ub, step, inits...), region args (iv, carried...): v enters as its arg
        return plan_.of(user.region(0)->arg(operand_index(user, v) - 2));
      default:
        if (ir::is_elementwise(user.kind) && !user.result()->type.is_scalar()) return plan_.of(user.result());
        return std::nullopt;
    }
  }

  static int operand_index(const ir::Op &op, const ir::Value *v) {
    for (int i = 0; i < op.num_operands(); ++i)
      if (op.operand(i) == v) return i;
    return -1;
  }

  // The layout in which the For or If `parent` carries the value its region yields at position i.
  const Layout &carried_layout(const ir::Op &parent, int i) const {
    if (parent.kind == ir::OpKind::For) return plan_.of(parent.region(0)->arg(1 + i));
    return plan_.of(parent.result(i));
  }

  // When non-free operands disagree, the MMA accumulator layout wins: converting the other operand (often a
  // small i1 mask) is cheaper than converting the scores and then converting p back for the next dot.
  bool in_mma_layout(const ir::Value *v) const {
    const Layout &l = plan_.of(v);
    std::optional<Layout> mma = mma_layout(l.shape, num_warps_);
    return mma && *mma == l;
  }

  // A load of a row or column vector (at most one dim above 1, e.g. a table lookup at q_idx [BM, 1] or
  // kv_idx [1, BN]) whose pointers, mask and `other` are movable: issued in any layout at the cost of a few
  // loads of the same addresses by several threads, so it is planned in its users' layout instead of
  // converting the tile it is combined with. Wider loads keep their pointers' (vectorizing) layout.
  bool is_gather(const ir::Op &load) const {
    int wide = 0;
    for (int64_t d : load.result()->type.shape) wide += d > 1;
    if (wide > 1) return false;
    for (auto *o : load.operands)
      if (!movable(o)) return false;
    return true;
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

LoweringPlan assign_layouts(const ir::Function &fn, int num_warps) {
  LoweringPlan plan;
  Assigner a(plan, num_warps);
  a.collect_uses(*fn.body);
  a.block(*fn.body);
  a.resolve_open(*fn.body);
  return plan;
}


}  // namespace tilejit::codegen
