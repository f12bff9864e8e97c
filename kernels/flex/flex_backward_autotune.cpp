// Autotuning of the flex backward's configuration (FlexOptions::autotune in attention::flex_backward).
//
// Candidates: the tilings measured valid and competitive for the backward (bench/results/LEARNED.md, "Attention
// backward"), each with every copy method of the arch (kernels/launch_options.h). Unlike the forward's there are
// no register-capped twins: at three programs per SM the dK/dV kernel spilled and lost. A candidate compiles
// all three kernels, the delta, dK/dV and dQ kernels, and reports the dK/dV kernel's registers and spills (the
// register-heavy one: it holds dK and dV as accumulators). The prior (kernels/autotune_prior.h) keeps the
// measured winner and its copy-method twins. A launch runs the whole backward with the config; its outputs,
// and the gradient buffers of learnable captures, which the backward adds into, are restored after timing.
#include <map>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "kernels/autotune_prior.h"
#include "kernels/flex/flex_backward.h"
#include "kernels/launch_options.h"
#include "runtime/autotune_device.h"
#include "runtime/runtime.h"
#include "tilejit/autotune.h"

namespace tilejit::attention::flex {
namespace {

// BLOCK_M x BLOCK_N, num_warps, num_stages. 64x128 on 8 warps gives each warpgroup of either kernel 64 owned
// rows (FlashAttention-2's blocking, flex_backward.cpp); 32x64 steps through fewer rows per iteration.
constexpr const char *kTilings[] = {
    "BLOCK_M=64 BLOCK_N=64 num_warps=4 num_stages=2",  "BLOCK_M=64 BLOCK_N=64 num_warps=4 num_stages=3",
    "BLOCK_M=32 BLOCK_N=64 num_warps=4 num_stages=2",  "BLOCK_M=64 BLOCK_N=128 num_warps=8 num_stages=2",
    "BLOCK_M=64 BLOCK_N=128 num_warps=8 num_stages=3",
};

// The tilings of a call with a given block mask: those made at its block sizes, else its sizes on 4 or 8 warps
// with 2 or 3 stages (compile failures and spills then decide, as for any candidate).
std::vector<autotune::Config> tilings(const BlockMask *bm) {
  std::vector<autotune::Config> configs;
  for (const char *t : kTilings) configs.push_back(kernels::parse_config(t));
  if (!bm) return configs;
  std::erase_if(configs, [&](const autotune::Config &c) {
    return c.get("BLOCK_M") != bm->block_m || c.get("BLOCK_N") != bm->block_n;
  });
  if (configs.empty())
    configs = autotune::cartesian({{"BLOCK_M", {bm->block_m}}, {"BLOCK_N", {bm->block_n}}}, {4, 8}, {2, 3});
  return configs;
}

// The device ranges a launch writes: dq, dk, dv and each learnable capture's gradient buffer (its size as
// given; the caller checked that every one is known).
std::vector<autotune::DeviceSnapshot::Range> written_ranges(
    const Plan &p, DevicePtr dq, DevicePtr dk, DevicePtr dv,
    const std::vector<std::shared_ptr<detail::CaptureState>> &learnable) {
  std::vector<autotune::DeviceSnapshot::Range> ranges;
  for (auto [ptr, last] : {std::pair{dq, p.last_q}, std::pair{dk, p.last_k}, std::pair{dv, p.last_v}})
    if (last >= 0) ranges.push_back({ptr.address, size_t(last + 1) * 2});
  for (const auto &c : learnable) ranges.push_back({c->grad->address, c->grad->bytes});
  return ranges;
}

// Compiles and loads a config's three kernels; the dK/dV kernel's report. Tracing runs the user's mods, which
// must not run on two threads at once (the tuner compiles on several): `trace_mu` orders the traces, and
// codegen and the driver's link run outside it.
autotune::Compiled compile_backward(const FlexShape &s, const FlexOptions &o, std::mutex &trace_mu) {
  const BackwardArgs a = placeholder_backward_args(s, o);
  const BackwardKernel order[] = {BackwardKernel::Delta, BackwardKernel::Dq, BackwardKernel::DkDv};
  std::shared_ptr<KernelBase> kernels[3];  // held while their traced functions are compiled
  const ir::Function *fns[3];
  {
    std::lock_guard lock(trace_mu);
    for (int i = 0; i < 3; ++i) {
      kernels[i] = backward_kernel(order[i], o.dtype, o.score_mod, o.mask);
      fns[i] = &kernels[i]->function(order[i] == BackwardKernel::Dq ? a.dq : a.main);
    }
  }
  const LaunchConfig cfg = launch_config(o);
  runtime::get_kernel(*fns[0], cfg);
  runtime::get_kernel(*fns[1], cfg);
  return autotune::compiled_of(runtime::get_kernel(*fns[2], cfg));
}

autotune::WinnerMemo g_winners;

}  // namespace

std::vector<autotune::Config> backward_candidates(const FlexOptions &opt) {
  return kernels::with_copy_methods_of(opt, tilings(opt.block_mask));
}

std::string backward_tuning_key(const FlexShape &s, const FlexOptions &opt, const Plan &p, bool learnable) {
  return fmt::format("bwd {} atomics={} learnable={}", flex_shape_key(s, opt, p), int(opt.atomics),
                     int(learnable));
}

FlexOptions tuned_flex_backward_options(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse,
                                        DevicePtr dout, DevicePtr dq, DevicePtr dk, DevicePtr dv, const FlexShape &s,
                                        const FlexOptions &opt_in,
                                        const std::vector<std::shared_ptr<detail::CaptureState>> &learnable) {
  // The band a mask function implies is in the key (and the plan) whichever entry point calls.
  FlexOptions opt = with_implied_band(opt_in);
  opt.autotune = false;
  if (opt.arch.empty()) opt.arch = runtime::device_arch();
  const Plan p = plan(s, opt, "attention::flex_backward");
  if (!p.work) return opt;  // without queries the call only zeroes dk and dv: nothing to tune
  // A gradient buffer of unknown size could not be restored after the tuning launches added into it: such a call
  // runs opt's config, whether or not another call tuned the key.
  for (const auto &c : learnable)
    if (c->grad->bytes == 0) return opt;
  const std::string key = backward_tuning_key(s, opt, p, !learnable.empty());
  const std::string fast_key = autotune::memo_key(key, opt.arch, {});
  if (auto known = g_winners.find(fast_key)) return kernels::with_tuned_config(opt, *known);

  autotune::Tunable t;
  t.kernel = "flex_attention_bwd";
  t.key = key;
  t.arch = opt.arch;
  t.configs = backward_candidates(opt);
  t.stream = opt.stream;
  std::mutex trace_mu;
  t.compile = [&](const autotune::Config &c) {
    return compile_backward(s, kernels::with_tuned_config(opt, c), trace_mu);
  };
  t.prior = kernels::flex_backward_prior(opt.arch, next_pow2_at_least_16(s.head_dim_qk),
                                         next_pow2_at_least_16(p.dim_v), autotune::pow2_bucket(s.seqlen_k),
                                         band_class(opt), opt.atomics);
  CandidateBlockMasks masks(opt, s);
  autotune::DeviceSnapshot written;
  t.snapshot = [&](Stream *stream) { written.take(written_ranges(p, dq, dk, dv, learnable), stream); };
  t.restore = [&](Stream *stream) { written.restore(stream); };
  t.launch = [&](const autotune::Config &c, Stream *, int) {
    flex_backward(q, k, v, out, lse, dout, dq, dk, dv, s, masks.with_mask(kernels::with_tuned_config(opt, c)));
  };
  autotune::Result r = autotune::tune(t, {});
  g_winners.remember(fast_key, r.best);
  return kernels::with_tuned_config(opt, r.best);
}

}  // namespace tilejit::attention::flex
