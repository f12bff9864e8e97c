// The band a mask function implies, read from its own traced and optimized IR, so that a sliding window or a
// causal mask written as a lambda skips the key blocks (and a paged cache's pages) outside it as the built-in
// band does. The function is traced on scalar positions q and kv (every other input an opaque parameter);
// its result is split at its logical ANDs, and each conjunct that compares two integer expressions affine in
// q and kv, whose difference is ±(kv − q) + c with c a constant plus at most one captured integer, bounds
// kv − q on one side (or both). A visible entry satisfies every conjunct, so the band holds every visible
// entry; the kernels still evaluate the function, so adding the band changes which blocks are visited, never
// a value. Conjuncts of any other form are left to the function. The kernels compute in i32 with wraparound:
// a conjunct counts only where none of its intermediate values can leave the i32 range, for positions below
// 2^30 and the captures' values at the call (else it could be true outside the band).
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "dsl/trace_context.h"
#include "ir/ir.h"
#include "kernels/flex/flex_internal.h"
#include "kernels/flex/kernel_lru.h"
#include "tilejit/error.h"
#include "tilejit/ops.h"

namespace tilejit::attention::flex {

// How large the expressions behind a bound may get (so that i32 wraparound cannot make it wrong): positions in
// units of 2^30, the largest |constant|, and per captured integer the largest |coefficient|.
struct Guard {
  int64_t units = 0, c = 0;
  std::vector<std::pair<int, int64_t>> caps;
  void touch(int cap, int64_t coef) {
    for (auto &[i, k] : caps)
      if (i == cap) {
        k = std::max(k, coef);
        return;
      }
    caps.emplace_back(cap, coef);
  }
  void merge(const Guard &g) {
    units = std::max(units, g.units);
    c = std::max(c, g.c);
    for (const auto &[i, k] : g.caps) touch(i, k);
  }
};
// One bound of a side: c, plus the current value of captured integer `cap` (an index into captures; its
// coefficient is 1) when cap ≥ 0. The tightest bound of a side applies.
struct BandSide {
  int64_t c = 0;
  int cap = -1;
  int64_t cap_coef = 0;
  Guard guard;
};
struct ImpliedBand {
  std::vector<BandSide> left, right;  // left: kv − q ≥ −value; right: kv − q ≤ value
  std::vector<std::shared_ptr<detail::CaptureState>> captures;  // the probe's captures in order (null: not an integer)
  MaskFn fn;  // kept so that the function's identity stays unique while the analysis is cached
};

namespace {

enum BandProbeParam : int { pOut, pB, pH, pQ, pK, pSeqlenQ, pSeqlenK, pQStart, pKStart, kNumBandProbeParams };

ParamTable band_probe_params() {
  using K = detail::ParamKind;
  ParamTable t;
  t.add("OUT", K::Ptr, DType::i32);
  // Not specialized: nothing may be assumed about these values.
  for (const char *n : {"b", "h", "q", "kv", "seqlen_q", "seqlen_k", "q_start", "k_start"})
    t.add(n, K::I32, DType::i32, false);
  return t;
}

void trace_band_probe(const MaskFn &fn, std::vector<std::shared_ptr<detail::CaptureState>> &captures) {
  auto P = [](int i) { return detail::param_tile(i); };
  // The sequences' token offsets (mod_q_token, mod_k_token) are opaque too: a position plus an offset is not
  // a position.
  ModScope scope(P(pSeqlenQ), P(pSeqlenK), P(pQStart), P(pKStart));
  Tile vis = fn(P(pB), P(pH), P(pQ), P(pK));
  if (vis.dtype() != DType::i1 || vis.rank() != 0) throw TraceError("not a scalar mask");
  store(P(pOut), vis.to(DType::i32));
  for (const auto &c : dsl::TraceContext::current()->captures) captures.push_back(c.state);
}

// c + (cap ≥ 0 ? cap_coef · capture[cap] : 0) + q_coef · q + kv_coef · kv; and, over the expression and every
// intermediate value of it, how large it may get: `units` (of 2^30, the positions' bound), the largest |c|, and
// the largest |coefficient| of each capture it touched (the one left in the form or not).
struct Affine {
  int64_t q = 0, kv = 0, c = 0;
  int cap = -1;
  int64_t cap_coef = 0;
  Guard guard;
};
constexpr int64_t kLimit = int64_t(1) << 30;  // constants and coefficients beyond this are not analyzed

// Folds the form's own magnitude into its guard.
Affine guarded(Affine a) {
  const int64_t pos = (a.q > 0 ? a.q : 0) + (a.kv > 0 ? a.kv : 0), neg = (a.q < 0 ? -a.q : 0) + (a.kv < 0 ? -a.kv : 0);
  a.guard.units = std::max({a.guard.units, pos, neg});
  a.guard.c = std::max<int64_t>(a.guard.c, std::llabs(a.c));
  if (a.cap >= 0) a.guard.touch(a.cap, int64_t(std::llabs(a.cap_coef)));
  return a;
}

std::optional<Affine> combine(const Affine &a, const Affine &b, int64_t sign) {
  if (a.cap >= 0 && b.cap >= 0 && a.cap != b.cap) return std::nullopt;
  Affine r{a.q + sign * b.q, a.kv + sign * b.kv, a.c + sign * b.c, a.cap >= 0 ? a.cap : b.cap,
           a.cap_coef + sign * b.cap_coef, a.guard};
  r.guard.merge(b.guard);
  if (r.cap_coef == 0) r.cap = -1;
  if (std::llabs(r.c) > kLimit || std::llabs(r.q) > 2 || std::llabs(r.kv) > 2) return std::nullopt;
  return guarded(r);
}

struct Walker {
  const ir::Function &f;
  int num_captures;

  std::optional<Affine> affine(const ir::Value *v) const {
    if (!v->type.is_scalar() || v->type.is_ptr() || !is_int(v->type.dtype()) || v->type.dtype() == DType::i1)
      return std::nullopt;
    if (!v->def) {  // a block argument: a parameter of the probe
      for (int i = 0; i < int(f.params.size()); ++i)
        if (f.param(i) == v) {
          if (i == pQ) return guarded(Affine{.q = 1, .guard = {}});
          if (i == pK) return guarded(Affine{.kv = 1, .guard = {}});
          const int cap = i - kNumBandProbeParams;
          if (cap >= 0 && cap < num_captures) return guarded(Affine{.cap = cap, .cap_coef = 1, .guard = {}});
        }
      return std::nullopt;
    }
    const ir::Op &op = *v->def;
    switch (op.kind) {
      case ir::OpKind::Constant:
        if (std::llabs(op.attrs.ivalue) > kLimit) return std::nullopt;
        return guarded(Affine{.c = op.attrs.ivalue, .guard = {}});
      case ir::OpKind::Cast: {  // a widening integer cast keeps the value
        const ir::Value *src = op.operand(0);
        if (!is_int(src->type.dtype()) || src->type.dtype() == DType::i1 ||
            dtype_bytes(v->type.dtype()) < dtype_bytes(src->type.dtype()))
          return std::nullopt;
        return affine(src);
      }
      case ir::OpKind::Neg: {
        auto a = affine(op.operand(0));
        return a ? combine(Affine{}, *a, -1) : std::nullopt;
      }
      case ir::OpKind::Add:
      case ir::OpKind::Sub: {
        auto a = affine(op.operand(0)), b = affine(op.operand(1));
        if (!a || !b) return std::nullopt;
        return combine(*a, *b, op.kind == ir::OpKind::Add ? 1 : -1);
      }
      case ir::OpKind::Mul: {  // by a constant
        auto a = affine(op.operand(0)), b = affine(op.operand(1));
        if (!a || !b) return std::nullopt;
        const bool a_const = a->q == 0 && a->kv == 0 && a->cap < 0, b_const = b->q == 0 && b->kv == 0 && b->cap < 0;
        if (!a_const && !b_const) return std::nullopt;
        const Affine &x = a_const ? *b : *a;
        const int64_t k = a_const ? a->c : b->c;
        if (std::llabs(k) > 2) return std::nullopt;
        Affine r{x.q * k, x.kv * k, x.c * k, x.cap, x.cap_coef * k, x.guard};
        r.guard.merge(a_const ? a->guard : b->guard);
        if (r.cap_coef == 0) r.cap = -1;
        if (std::llabs(r.c) > kLimit) return std::nullopt;
        return guarded(r);
      }
      default:
        return std::nullopt;
    }
  }

  // Tightens `band` with the conjuncts of the i1 value v.
  void conjuncts(const ir::Value *v, ImpliedBand &band) const {
    if (!v->def) return;
    const ir::Op &op = *v->def;
    if (op.kind == ir::OpKind::And && v->type.dtype() == DType::i1) {
      conjuncts(op.operand(0), band);
      conjuncts(op.operand(1), band);
      return;
    }
    if (op.kind != ir::OpKind::Cmp) return;
    auto a = affine(op.operand(0)), b = affine(op.operand(1));
    if (!a || !b) return;
    auto d = combine(*a, *b, -1);  // d PRED 0 (the comparison itself is of a and b: both are in d's guard)
    if (!d || d->kv == 0 || d->q != -d->kv || std::llabs(d->kv) != 1) return;
    ir::CmpPred pred = op.attrs.pred;
    if (d->kv < 0) {  // −(kv − q) + c PRED 0  ⇔  (kv − q) − c PRED' 0
      d = combine(Affine{}, *d, -1);
      switch (pred) {
        case ir::CmpPred::lt: pred = ir::CmpPred::gt; break;
        case ir::CmpPred::le: pred = ir::CmpPred::ge; break;
        case ir::CmpPred::gt: pred = ir::CmpPred::lt; break;
        case ir::CmpPred::ge: pred = ir::CmpPred::le; break;
        default: break;
      }
    }
    // Now (kv − q) + e PRED 0 with e = c + cap_coef · capture: kv − q PRED −e.
    const BandSide e{d->c, d->cap, d->cap_coef, d->guard};
    auto upper = [&](int64_t adjust) { band.right.push_back(BandSide{-e.c + adjust, e.cap, -e.cap_coef, e.guard}); };
    auto lower = [&](int64_t adjust) { band.left.push_back(BandSide{e.c + adjust, e.cap, e.cap_coef, e.guard}); };
    switch (pred) {
      case ir::CmpPred::lt: upper(-1); break;  // kv − q ≤ −e − 1: right = −e − 1
      case ir::CmpPred::le: upper(0); break;
      case ir::CmpPred::gt: lower(-1); break;  // kv − q ≥ −e + 1: left = e − 1
      case ir::CmpPred::ge: lower(0); break;
      case ir::CmpPred::eq: upper(0), lower(0); break;
      case ir::CmpPred::ne: break;
    }
  }
};

ImpliedBand analyze(const MaskFn &fn) {
  ImpliedBand r;
  r.fn = fn;
  ParamTable t = band_probe_params();
  std::vector<std::shared_ptr<detail::CaptureState>> traced;
  KernelBase probe("flex_mask_band_probe", std::move(t.decls), std::move(t.names),
                   [&](std::span<const detail::ArgValue> a) { trace_band_probe(fn, traced); });
  std::vector<detail::ArgValue> args(kNumBandProbeParams);
  args[pOut] = ptr_arg(DevicePtr{256, 0});
  for (int i = pB; i < kNumBandProbeParams; ++i) args[size_t(i)] = int_arg(17);
  const ir::Function *f = nullptr;
  try {
    f = &probe.function(args);
  } catch (const std::exception &) {
    return r;  // not traceable on scalar positions (a tile-shaped op, say): no band
  }
  const ir::Op *st = nullptr;
  ir::walk(*f->body, [&](ir::Op &op) {
    if (op.kind == ir::OpKind::Store) st = &op;
  });
  if (!st) return r;
  const ir::Value *v = st->operand(1);
  if (v->def && v->def->kind == ir::OpKind::Cast) v = v->def->operand(0);  // the i1 → i32 cast of the store
  // Only scalar integer captures can bound a side.
  for (const auto &c : traced)
    r.captures.push_back(c->kind == detail::CaptureState::Kind::I32 || c->kind == detail::CaptureState::Kind::I64
                             ? c
                             : nullptr);
  Walker w{*f, int(traced.size())};
  w.conjuncts(v, r);
  auto drop_unusable = [&](std::vector<BandSide> &sides) {
    std::erase_if(sides, [&](const BandSide &s) {
      if (s.cap >= 0 && (s.cap_coef != 1 || !r.captures[size_t(s.cap)])) return true;
      for (const auto &[cap, coef] : s.guard.caps)
        if (!r.captures[size_t(cap)]) return true;  // a float capture cannot be bounded here
      return false;
    });
  };
  drop_unusable(r.left);
  drop_unusable(r.right);
  return r;
}

// The tightest of a side's bounds at the captures' current values (−1: unbounded).
int64_t side_value(const std::vector<BandSide> &sides, const ImpliedBand &band) {
  int64_t best = -1;
  for (const BandSide &s : sides) {
    // No intermediate value may wrap in i32: positions below 2^30, the captures at their values now.
    int64_t worst = s.guard.units * kLimit + s.guard.c;
    bool bounded = true;
    for (const auto &[cap, coef] : s.guard.caps) {
      const int64_t x = band.captures[size_t(cap)]->i;
      if (std::llabs(x) > kLimit) bounded = false;
      else worst += coef * std::llabs(x);
    }
    if (!bounded || worst > std::numeric_limits<int32_t>::max()) continue;
    int64_t v = s.c;
    if (s.cap >= 0) v += band.captures[size_t(s.cap)]->i;
    if (v < 0) continue;  // a band side cannot say "beyond the diagonal": unbounded is the sound superset
    if (best < 0 || v < best) best = v;
  }
  return best;
}

}  // namespace

std::shared_ptr<const ImpliedBand> implied_band(const MaskFn &fn) {
  static KernelLru<const void *, const ImpliedBand> cache(kMaxCachedModKernels);
  return cache.get(fn.identity(), [&] { return std::make_shared<const ImpliedBand>(analyze(fn)); });
}

std::optional<Band> band_at_call(const ImpliedBand &band) {
  const int64_t left = side_value(band.left, band), right = side_value(band.right, band);
  if (left < 0 && right < 0) return std::nullopt;
  return Band{left, right, Align::TopLeft};
}

FlexOptions with_implied_band(const FlexOptions &opt) {
  // A block mask the caller made is checked against the mask as given (its band among the rest).
  if (opt.block_mask) return opt;
  FlexOptions o = opt;
  o.mask = with_implied_band(opt.mask);
  return o;
}

Mask with_implied_band(const Mask &mask) {
  if (!mask.fn || mask.band) return mask;
  std::optional<Band> b = band_at_call(*implied_band(mask.fn));
  if (!b) return mask;
  Mask m = mask;
  m.band = b;
  return m;
}

}  // namespace tilejit::attention::flex
