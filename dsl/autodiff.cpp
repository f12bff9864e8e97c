// vjp (tilejit/autodiff.h): the reverse sweep over the traced ops between wrt and out.
//
// 1. The path: the ops of out's block whose results depend on wrt and on which out depends, in trace order
//    (a definition precedes its uses in a block, so trace order is a topological order).
// 2. The adjoint of out is dout; walking the path backwards, each op adds its operands' adjoints (f32) from
//    its own. Only float operands that depend on wrt receive one.
#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "dsl/semantic.h"
#include "dsl/trace_context.h"
#include "tilejit/autodiff.h"

namespace tilejit {

using dsl::TileAccess;
using dsl::TraceContext;

namespace {

constexpr double kLn2 = 0.693147180559945309417232121458176568;

class ReverseSweep {
 public:
  ReverseSweep(TraceContext &ctx, ir::Value *wrt, CaptureGrads captures, const SrcLoc &loc)
      : ctx_(ctx), wrt_(wrt), captures_(captures), loc_(loc) {}

  /// Whether v depends on wrt or (unless CaptureGrads::Ignore) on a load from a learnable capture, through any ops:
  /// the values whose adjoints the sweep computes (memoized). An op with regions depends on what any op inside
  /// uses; a region's arguments (loop-carried values) on their op's operands.
  bool depends(const ir::Value *v) {
    if (v == wrt_) return true;
    auto [it, fresh] = depends_.try_emplace(v, false);
    if (!fresh) return it->second;
    bool d = false;
    if (!v->def) {
      const ir::Op *owner = v->block ? v->block->parent : nullptr;
      if (owner)
        for (const ir::Value *o : owner->operands) d = depends(o) || d;
    } else {
      d = learnable_load(*v->def);
      for (const ir::Value *o : v->def->operands) d = depends(o) || d;
      for (const auto &region : v->def->regions)
        ir::walk(*region, [&](ir::Op &inner) {
          for (const ir::Value *o : inner.operands) d = depends(o) || d;
        });
    }
    depends_[v] = d;
    return d;
  }

  /// The learnable capture (made with a gradient buffer) among the parameters `ptr`'s address is computed
  /// from, or null.
  std::shared_ptr<detail::CaptureState> learnable(const ir::Value *ptr) const {
    std::vector<const ir::Value *> todo{ptr};
    while (!todo.empty()) {
      const ir::Value *v = todo.back();
      todo.pop_back();
      if (!v->type.is_ptr()) continue;  // offsets are not the address's base
      if (!v->def) {
        for (const TraceContext::CapturedParam &c : ctx_.captures)
          if (c.value == v && c.state->grad) return c.state;
        continue;
      }
      for (const ir::Value *o : v->def->operands) todo.push_back(o);
    }
    return nullptr;
  }
  bool learnable_load(const ir::Op &op) const {
    return captures_ != CaptureGrads::Ignore && op.kind == ir::OpKind::Load && is_float(op.result()->type.dtype()) &&
           learnable(op.operand(0)) != nullptr;
  }
  /// Adds g into the fixed-point accumulator of a learnable capture (CaptureGrads::ScatterFixedPoint): four i64
  /// per gradient element at acc + 4·offset. Slot 0 sums round(g·2^20), slot 1 the rounded remainders in units
  /// of 2^-52 (below 2^31 each), slots 2 and 3 count +inf and −inf terms (a NaN counts in both, so that the sum
  /// comes out NaN); non-finite terms, and terms too large for the sum (|g| ≥ 2^41, which count as ±inf, an
  /// overflow), add 0 to slots 0 and 1. Rounding is half away from zero, in f64, where every step is exact.
  void add_fixed_point(const ir::Value *ptr, ir::Value *acc, const Tile &g, const Tile &mask) {
    const Tile at = rebase(ptr, acc, kFixedPointSlots);
    auto round_to_i64 = [&](const Tile &t) {
      const double limit = 0x1p62;  // float-to-integer conversion is undefined out of range
      Tile r = t + where(t >= 0.0, 0.5, -0.5, loc_);
      return minimum(maximum(r, -limit, loc_), limit, loc_).to(DType::i64, loc_);
    };
    const float too_large = 0x1p41f;
    const Tile fits = abs(g, loc_) < too_large;  // false for NaN and ±inf too
    const Tile g64 = where(fits, g, 0.f, loc_).to(DType::f64, loc_);
    const Tile hi = round_to_i64(g64 * std::ldexp(1.0, kFixedPointHighBits));
    const Tile rest = g64 - hi.to(DType::f64, loc_) * std::ldexp(1.0, -kFixedPointHighBits);
    const Tile lo = round_to_i64(rest * std::ldexp(1.0, kFixedPointLowBits));
    const Tile nan = g != g, large = (!fits) & (!nan);
    atomic_add(at, hi, mask, MemOrder::Relaxed, loc_);
    atomic_add(at + 1, lo, mask, MemOrder::Relaxed, loc_);
    const Tile one = full(at.shape(), 1, DType::i64, loc_);
    auto masked = [&](const Tile &m) { return mask.valid() ? mask & m : m; };
    atomic_add(at + 2, one, masked((large & (g > 0.f)) | nan), MemOrder::Relaxed, loc_);
    atomic_add(at + 3, one, masked((large & (g < 0.f)) | nan), MemOrder::Relaxed, loc_);
  }
  /// ptr's address expression with the capture's parameter replaced by `base` (its gradient buffer's, or its
  /// accumulator's) and the element offsets multiplied by `stride`.
  Tile rebase(const ir::Value *ptr, ir::Value *base, int stride = 1) {
    using K = ir::OpKind;
    if (!ptr->def) return TileAccess::from_value(base);
    const ir::Op &d = *ptr->def;
    Tile inner = rebase(d.operand(0), base, stride);
    switch (d.kind) {
      case K::PtrAdd: {
        Tile offset = TileAccess::from_value(d.operand(1));
        return inner + (stride == 1 ? offset : offset.to(DType::i64, loc_) * int64_t(stride));
      }
      case K::Splat:
      case K::Broadcast: return broadcast_to(inner, ptr->type.shape, loc_);
      case K::ExpandDims: return expand_dims(inner, int(d.attrs.axis), loc_);
      case K::Reshape: return reshape(inner, ptr->type.shape, loc_);
      default: reject(d, "a learnable capture's address must be the capture plus offsets");
    }
  }

  Tile run(ir::Value *out, const Tile &dout) {
    // While a loop body is traced, a value from outside the loop is one of its block arguments, and how the
    // others relate to it is not known yet: wrt must be computed where the sweep can see it.
    if (!wrt_->def && wrt_->block && wrt_->block->parent)
      dsl::fail(loc_, "vjp: wrt comes from outside the loop being traced (or is carried by it); compute out from a "
                      "wrt computed in the same loop body");
    const ir::Block *block = out->def ? out->def->parent : nullptr;
    if (out == wrt_) return broadcast_to(dout.to(DType::f32, loc_), out->type.shape, loc_);
    if (!depends(out)) return zeros(wrt_->type.shape, DType::f32, loc_);
    if (!block)
      dsl::fail(loc_, "vjp: out is a loop-carried value or a kernel argument computed from wrt: differentiate the "
                      "ops that compute it inside the loop instead");
    // Inside a loop body being traced, a value from outside the loop is a block argument whose origin is not
    // known yet: the sweep could not tell whether it depends on wrt. With wrt in out's block, none can.
    const ir::Block *wrt_block = wrt_->def ? wrt_->def->parent : wrt_->block;
    if (wrt_block != block)
      dsl::fail(loc_, "vjp: wrt and out must be computed in the same block (the same loop body or branch, or both "
                      "outside every loop)");
    // The path, in reverse trace order: ops of the block whose result depends on wrt and that out depends on.
    std::unordered_set<const ir::Value *> needed{out};
    std::vector<ir::Op *> path;
    for (auto it = block->ops.rbegin(); it != block->ops.rend(); ++it) {
      ir::Op *op = it->get();
      bool on_path = false;
      for (int i = 0; i < op->num_results(); ++i) on_path = on_path || needed.count(op->result(i));
      if (!on_path) continue;
      path.push_back(op);
      for (ir::Value *o : op->operands)
        if (depends(o)) needed.insert(o);
    }
    adjoint_[out] = broadcast_to(dout.to(DType::f32, loc_), out->type.shape, loc_);
    for (ir::Op *op : path) backward(*op);
    auto it = adjoint_.find(wrt_);
    return it == adjoint_.end() ? zeros(wrt_->type.shape, DType::f32, loc_) : it->second;
  }

 private:
  Tile primal(ir::Value *v) const { return TileAccess::from_value(v).to(DType::f32, loc_); }

  // Adds g to v's adjoint. (run() has made sure that every value depending on wrt is computed in out's block.)
  void add(ir::Value *v, const Tile &g) {
    if (!is_float(v->type.dtype()) || v->type.is_ptr() || !depends(v)) return;
    auto it = adjoint_.find(v);
    if (it == adjoint_.end()) adjoint_.emplace(v, g);
    else it->second = it->second + g;
  }

  [[noreturn]] void reject(const ir::Op &op, const char *why) const {
    dsl::fail(loc_, fmt::format("vjp: cannot differentiate {} (at {}): {}", ir::op_name(op.kind), op.loc.str(), why));
  }

  void backward(const ir::Op &op) {
    using K = ir::OpKind;
    for (int i = 1; i < op.num_results(); ++i)
      if (adjoint_.count(op.result(i))) reject(op, "control flow on the path from wrt to out is not differentiated");
    const ir::Value *res = op.num_results() ? op.result() : nullptr;
    auto it = res ? adjoint_.find(res) : adjoint_.end();
    if (it == adjoint_.end()) return;  // nothing flows back through this op (an integer result, or unused)
    const Tile g = it->second;
    auto x = [&](int i) { return op.operand(i); };
    auto P = [&](int i) { return primal(x(i)); };
    Tile r = is_float(res->type.dtype()) ? primal(const_cast<ir::Value *>(res)) : Tile();
    switch (op.kind) {
      case K::Add: add(x(0), g); add(x(1), g); return;
      case K::Sub: add(x(0), g); add(x(1), -g); return;
      case K::Mul: add(x(0), g * P(1)); add(x(1), g * P(0)); return;
      case K::Div: {
        Tile q = g / P(1);
        add(x(0), q);
        add(x(1), -(q * r));  // d(a/b)/db = −(a/b)/b
        return;
      }
      case K::Fma: add(x(0), g * P(1)); add(x(1), g * P(0)); add(x(2), g); return;
      case K::Neg: add(x(0), -g); return;
      case K::Exp: add(x(0), g * r); return;
      case K::Exp2: add(x(0), g * r * float(kLn2)); return;
      case K::Log: add(x(0), g / P(0)); return;
      case K::Log2: add(x(0), g / (P(0) * float(kLn2))); return;
      case K::Sqrt: add(x(0), g * 0.5f / r); return;
      case K::Rsqrt: add(x(0), g * -0.5f * r * r * r); return;  // d(a^-1/2) = −a^-3/2 / 2
      case K::Tanh: add(x(0), g * (1.f - r * r)); return;
      case K::Sigmoid: add(x(0), g * r * (1.f - r)); return;
      case K::Abs: {
        Tile a = P(0);
        add(x(0), where(a > 0.f, g, where(a < 0.f, -g, 0.f, loc_), loc_));
        return;
      }
      case K::Minimum:
      case K::Maximum: {
        // The first operand takes a tie.
        Tile first = op.kind == K::Minimum ? P(0) <= P(1) : P(0) >= P(1);
        add(x(0), where(first, g, 0.f, loc_));
        add(x(1), where(first, 0.f, g, loc_));
        return;
      }
      case K::Select: {
        Tile c = TileAccess::from_value(x(0));
        add(x(1), where(c, g, 0.f, loc_));
        add(x(2), where(c, 0.f, g, loc_));
        return;
      }
      case K::Cast:
        if (is_float(x(0)->type.dtype())) add(x(0), g);  // float → float; from an int: no gradient
        return;
      case K::Splat: {
        Tile s = g;
        while (!s.shape().empty()) s = sum(s, 0, loc_);
        add(x(0), s);
        return;
      }
      case K::Broadcast: {
        Tile s = g;
        const auto &from = x(0)->type.shape;
        for (int d = 0; d < int(from.size()); ++d)
          if (from[size_t(d)] == 1 && res->type.shape[size_t(d)] != 1) s = expand_dims(sum(s, d, loc_), d, loc_);
        add(x(0), s);
        return;
      }
      case K::ExpandDims:
      case K::Reshape: add(x(0), reshape(g, x(0)->type.shape, loc_)); return;
      case K::Trans: {
        const auto &perm = op.attrs.ints;
        std::vector<int64_t> inverse(perm.size());
        for (size_t i = 0; i < perm.size(); ++i) inverse[size_t(perm[i])] = int64_t(i);
        add(x(0), trans(g, inverse, loc_));
        return;
      }
      case K::Reduce:
        if (op.attrs.reduce != ir::ReduceKind::sum) reject(op, "only sum reductions have a derivative here");
        add(x(0), broadcast_to(expand_dims(g, int(op.attrs.axis), loc_), x(0)->type.shape, loc_));
        return;
      case K::Load: {
        // Masked-off lanes take `other`: its gradient there.
        if (op.num_operands() > 2) add(x(2), where(TileAccess::from_value(x(1)), 0.f, g, loc_));
        // The loaded value is a constant of the differentiation, except a learnable capture's element: its
        // gradient is added in.
        if (!learnable_load(op)) return;
        Tile mask = op.num_operands() > 1 ? TileAccess::from_value(x(1)) : Tile();
        const auto &capture = learnable(x(0));
        if (captures_ == CaptureGrads::Scatter) {
          atomic_add(rebase(x(0), ctx_.capture_param(capture->grad)), g, mask, MemOrder::Relaxed, loc_);
          return;
        }
        // Integer additions commute and associate: the sums come out the same whatever the order.
        add_fixed_point(x(0), ctx_.capture_param(capture->grad_fixed_point), g, mask);
        return;
      }
      case K::Rem: reject(op, "fmod has no derivative here");
      case K::Dot: reject(op, "dot has no derivative here");
      case K::AtomicAdd: reject(op, "it writes memory");
      case K::For:
      case K::If: reject(op, "control flow on the path from wrt to out is not differentiated");
      default: reject(op, "no derivative is defined for it");
    }
  }

  TraceContext &ctx_;
  ir::Value *wrt_;
  CaptureGrads captures_;
  SrcLoc loc_;
  std::unordered_map<const ir::Value *, bool> depends_;
  std::unordered_map<const ir::Value *, Tile> adjoint_;
};

}  // namespace

Tile vjp(const Tile &out, const Tile &wrt, const Tile &dout, CaptureGrads captures, SrcLoc loc) {
  auto &ctx = TraceContext::require("vjp", loc);
  ir::Value *o = dsl::to_value(ctx, out, "vjp", "out", loc);
  ir::Value *w = dsl::to_value(ctx, wrt, "vjp", "wrt", loc);
  for (auto [v, what] : {std::pair{o, "out"}, std::pair{w, "wrt"}})
    if (v->type.is_ptr() || !is_float(v->type.dtype()))
      dsl::fail(loc, fmt::format("vjp: {} must be a float tile, got {}", what, dsl::describe(v->type)));
  ir::Value *d = dsl::to_value(ctx, dout, "vjp", "dout", loc);
  if (d->type.is_ptr() || !is_float(d->type.dtype()))
    dsl::fail(loc, fmt::format("vjp: dout must be a float tile, got {}", dsl::describe(d->type)));
  return ReverseSweep(ctx, w, captures, loc).run(o, TileAccess::from_value(d));
}

}  // namespace tilejit
