// The softmax frame of a launch, chosen on the host from the score_mod's own traced and optimized IR and the
// values its captured scalars hold at this launch. The mod is traced alone into a probe kernel (never launched):
// its score is an f32 tile loaded from a parameter, its positions and lengths opaque runtime parameters, and
// the result stored. The range analysis (ir/value_range.h) then bounds the result, taking the score to lie in the
// ordinary frame's range and each captured scalar to be its current value. A capture's value is an argument,
// not part of the trace, so the trace is kept per mod and only the walk over its IR runs per launch. The probe is
// optimized with exact floats: the reassociations' clamps (ir/passes.h) would otherwise hide products' ranges.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "dsl/trace_context.h"
#include "ir/ir.h"
#include "kernels/flex/flex_internal.h"
#include "kernels/flex/kernel_lru.h"
#include "kernels/flex/score_range.h"
#include "kernels/log2_units.h"
#include "kernels/online_softmax.h"
#include "tilejit/error.h"
#include "tilejit/ops.h"

namespace tilejit::attention::flex {
namespace {

enum ProbeParam : int { pOut, pScore, pB, pH, pQ0, pK0, pSeqlenQ, pSeqlenK, kNumProbeParams };
constexpr int kProbeRows = 16;

struct ModProbe {
  std::unique_ptr<KernelBase> kernel;  // owns the traced function
  const ir::Value *score = nullptr, *out = nullptr;  // out null: the mod did not trace alone (range unknown)
  /// The scalar captures' parameters with their states, in the order the trace met them.
  std::vector<std::pair<const ir::Value *, std::shared_ptr<detail::CaptureState>>> captures;
  ScoreMod mod;  // kept so that its identity stays unique while the probe is cached
};

/// Whether pointer `p` is param + offsets (the probe's score load).
bool based_on(const ir::Value *p, const ir::Value *param) {
  while (p != param && p->def && (p->def->kind == ir::OpKind::PtrAdd || p->def->kind == ir::OpKind::Splat ||
                                  p->def->kind == ir::OpKind::Broadcast))
    p = p->def->operand(0);
  return p == param;
}

std::shared_ptr<const ModProbe> trace_probe(const ScoreMod &mod) {
  using K = detail::ParamKind;
  ParamTable t;
  for (const char *n : {"OUT", "SCORE"}) t.add(n, K::Ptr, DType::f32);
  // Not specialized: the probe assumes nothing of these.
  for (const char *n : {"b", "h", "q0", "k0", "seqlen_q", "seqlen_k"}) t.add(n, K::I32, DType::i32, false);
  auto probe = std::make_shared<ModProbe>();
  probe->mod = mod;
  probe->kernel = std::make_unique<KernelBase>(
      "flex_score_mod_probe", std::move(t.decls), std::move(t.names), [mod](std::span<const detail::ArgValue>) {
        auto P = [](int i) { return detail::param_tile(i); };
        Tile b = P(pB), h = P(pH);
        ModScope scope(P(pSeqlenQ), P(pSeqlenK), b * P(pSeqlenQ), b * P(pSeqlenK));
        Tile r = arange(0, kProbeRows);
        Tile offs = r(_, None) * kProbeRows + r(None, _);
        Tile s = load(P(pScore) + offs);
        Tile out = traced_score_mod("flex attention", mod, s, b, h, (P(pQ0) + r)(_, None), (P(pK0) + r)(None, _));
        store(P(pOut) + offs, out);
      },
      KernelOptions{.do_not_specialize = {}, .exact_floats = true});
  std::vector<detail::ArgValue> args(kNumProbeParams);
  const DevicePtr fake{256, 0};
  for (int i : {pOut, pScore}) args[size_t(i)] = ptr_arg(fake);
  for (int i : {pB, pH, pQ0, pK0, pSeqlenQ, pSeqlenK}) args[size_t(i)] = int_arg(17);
  // A mod that traces in the kernel but not alone on the probe's 16x16 tile (one written for a fixed tile shape)
  // gets an unknown range, the safe frame; an error of its own then comes from the kernel's trace.
  const ir::Function *traced_fn = nullptr;
  try {
    traced_fn = &probe->kernel->function(args);
  } catch (const TraceError &) {
    return probe;
  }
  const ir::Function &f = *traced_fn;
  ir::walk(*f.body, [&](ir::Op &op) {
    if (op.kind == ir::OpKind::Store) probe->out = op.operand(1);
    if (op.kind == ir::OpKind::Load && based_on(op.operand(0), f.param(pScore))) probe->score = op.result();
  });
  // Captures follow the declared parameters, in order.
  const std::vector<std::shared_ptr<detail::CaptureState>> traced = probe->kernel->captures(args);
  for (size_t i = 0; i < traced.size(); ++i)
    if (traced[i]->kind != detail::CaptureState::Kind::Ptr)
      probe->captures.emplace_back(f.param(kNumProbeParams + int(i)), traced[i]);
  return probe;
}

std::shared_ptr<const ModProbe> mod_probe(const ScoreMod &mod) {
  static KernelLru<const void *, const ModProbe> cache(kMaxCachedModKernels);
  return cache.get(mod.identity(), [&] { return trace_probe(mod); });
}

}  // namespace

Interval score_mod_range(const ScoreMod &mod, Interval score, bool capture_values) {
  std::shared_ptr<const ModProbe> probe = mod_probe(mod);
  if (!probe->out) return {-INFINITY, INFINITY};
  ir::KnownRanges known;
  if (probe->score) known[probe->score] = score;  // absent when the mod ignores its score
  using Kind = detail::CaptureState::Kind;
  for (const auto &[param, state] : probe->captures) {
    if (!capture_values) break;
    // The value the launch passes: f32 captures are rounded to f32.
    const double v = state->kind == Kind::F32 ? double(float(state->f)) : double(state->i);
    known[param] = Interval{v, v};
  }
  return ir::value_range(probe->out, known);
}

ScoreFrame score_frame(const FlexOptions &opt, bool mods_as_functions, bool capture_values) {
  if (!opt.score_mod || (opt.score_mod.builtin() && !mods_as_functions)) return {};  // q·k's own bound
  // The score a mod receives lies in the ordinary frame's range (natural units: c = log2e after a mod).
  const double bound = OnlineSoftmax::ordinary_bound(opt.dtype) / kernels::kLog2e;
  const Interval r = score_mod_range(opt.score_mod, {-bound, bound}, capture_values);
  // Scores are finite or −inf (masked): a mod whose every result is +inf or NaN at this launch is an error, not
  // a softmax of NaNs.
  const bool nan = std::isnan(r.lo) || std::isnan(r.hi);
  if (nan || r.lo == INFINITY)
    throw TraceError(fmt::format("flex attention: the score_mod returns {} for every score (its traced range is [{}, "
                                 "{}] with the captured values of this launch); a score_mod returns finite scores, or "
                                 "−inf where a key is masked",
                                 nan ? "NaN" : "+inf", r.lo, r.hi));
  const double lo = r.lo * kernels::kLog2e, hi = r.hi * kernels::kLog2e;  // log2 units
  ScoreFrame f;
  if (opt.dtype == DType::bf16 && std::max(std::fabs(lo), std::fabs(hi)) <= kMaxFixedReferenceMagnitude &&
      hi - lo <= kMaxFixedReferenceSpan) {
    f.kind = ScoreFrame::FixedReference;
    f.reference = float(std::min(hi, lo + kFixedReferenceWindow));
  } else if (std::max(std::fabs(r.lo), std::fabs(r.hi)) > bound) {
    f.kind = ScoreFrame::AnyFinite;
  }
  return f;
}

}  // namespace tilejit::attention::flex
