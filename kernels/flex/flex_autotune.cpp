// Autotuning of the flex kernel's configuration (FlexOptions::autotune).
//
// Candidates: BLOCK_M ∈ {64,128} × BLOCK_N ∈ {32,64,128} × num_warps ∈ {4,8} × num_stages ∈ {2,3} (BLOCK_M/N
// fixed to a given block mask's), and the register-capped ones, each with every copy method of the arch
// (kernels/launch_options.h: cp.async; on sm_90a also TMA and a producer warpgroup); the tuner compiles
// only those that fit their register cap and, where measured, won the call's class of mask and head dims
// (kernels/autotune_prior.h: a narrow band, or everything else). Which config wins depends strongly on the
// mods: a narrow sliding window visits few key blocks per program and prefers small tiles, full attention large
// ones — so the key holds the traced IR of the mods (two lambdas that trace alike share a tuning) and the band's
// sides. When the mask has a function, each candidate's block mask is built once before timing (its block sizes
// differ).
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "kernels/autotune_prior.h"
#include "kernels/flex/flex_internal.h"
#include "kernels/launch_options.h"
#include "runtime/autotune_device.h"
#include "runtime/runtime.h"
#include "tilejit/autotune.h"

namespace tilejit::attention::flex {
namespace {

// A stable name for the mods: the hash of the kernel's IR traced at one fixed shape and config (pointer
// identities of the lambdas would differ between processes, and the disk cache must not; the call's own dims,
// band and sizes are in the key separately). Computed once per traced kernel object — printing the IR on
// every autotuned call would cost host time per launch; the weak pointer notices a kernel evicted from the
// cache whose address was reused.
std::string mods_hash(const FlexOptions &opt) {
  std::shared_ptr<KernelBase> kernel = flex_kernel(opt.dtype, opt.score_mod, opt.mask);
  static std::mutex mu;
  static std::map<const KernelBase *, std::pair<std::weak_ptr<KernelBase>, std::string>> memo;
  {
    std::lock_guard lock(mu);
    if (auto it = memo.find(kernel.get()); it != memo.end() && !it->second.first.expired()) return it->second.second;
  }
  const FlexShape canonical{.batch = 1, .heads_q = 1, .seqlen_q = 256, .seqlen_k = 256, .head_dim_qk = 64};
  FlexOptions o;
  o.dtype = opt.dtype;
  o.score_mod = opt.score_mod;
  o.mask = opt.mask;
  o.block_mask_mode = opt.block_mask_mode;
  // Traced in one frame whatever the captures' values now, so the hash does not depend on the first call's
  // (flex_shape_key adds the frame).
  std::vector<detail::ArgValue> args = placeholder_kernel_args(plan(canonical, o), canonical, o);
  args[kScoreFrame] = int_arg(ScoreFrame::AnyFinite);
  std::string ir = kernel->ir(args);
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : ir) h = (h ^ c) * 1099511628211ull;
  std::string name = fmt::format("{:016x}", h);
  std::lock_guard lock(mu);
  if (memo.size() > 4 * kMaxCachedModKernels)  // drop entries of evicted kernels
    std::erase_if(memo, [](const auto &e) { return e.second.first.expired(); });
  memo[kernel.get()] = {kernel, name};
  return name;
}

constexpr int64_t kNarrowKeys = 512;

}  // namespace

CandidateBlockMasks::CandidateBlockMasks(const FlexOptions &opt, const FlexShape &s)
    : own_(!opt.block_mask && opt.mask.fn && opt.block_mask_mode == BlockMaskMode::Auto), shape_(s) {}

FlexOptions CandidateBlockMasks::with_mask(FlexOptions o) {
  if (!own_) return o;
  const auto sizes = std::make_pair(o.block_m, o.block_n);
  auto it = masks_.find(sizes);
  if (it == masks_.end()) it = masks_.emplace(sizes, create_block_mask(o.mask, shape_, o)).first;
  o.block_mask = &it->second;
  return o;
}

kernels::FlexBandClass band_class(const FlexOptions &opt) {
  if (!opt.mask.band) return kernels::FlexBandClass::Dense;
  BandArgs b = band_args(opt.mask.band);
  if (b.left >= kUnbounded || b.right >= kUnbounded) return kernels::FlexBandClass::Dense;
  return b.left + b.right + 1 <= kNarrowKeys ? kernels::FlexBandClass::Narrow : kernels::FlexBandClass::Other;
}

namespace {

autotune::WinnerMemo g_winners;

}  // namespace

std::string flex_shape_key(const FlexShape &s, const FlexOptions &opt, const Plan &p) {
  BandArgs band = band_args(opt.mask.band);
  auto side = [](int64_t x) {
    return x >= kUnbounded ? std::string("inf") : std::to_string(autotune::pow2_bucket(x + 1) - 1);
  };
  // The mods' hash is of one traced IR (memoized per kernel object), which a captured value does not enter; the
  // frame it puts this launch in (a soft-cap's value decides whether the fixed reference applies) does, so it is
  // in the key on its own. The sequence strides are compiled into the kernels (add_stride_params): each layout
  // is tuned for itself.
  return fmt::format("{} mods={}/f{} dqk={} dv={} group={} varlen={} band={}/{}/{} sq<={} sk<={} bh<={} bm={} "
                     "seq_strides={}/{}/{}/{}{}",
                     dtype_name(opt.dtype), mods_hash(opt), int(score_frame(opt, p.pack_gqa).kind), s.head_dim_qk, p.dim_v,
                     p.heads_kv ? s.heads_q / p.heads_kv : 1, p.varlen ? 1 : 0,
                     opt.mask.band ? side(band.left) : "-", opt.mask.band ? side(band.right) : "-",
                     band.bottom_right, autotune::pow2_bucket(s.seqlen_q), autotune::pow2_bucket(s.seqlen_k),
                     autotune::pow2_bucket(int64_t(s.batch) * s.heads_q),
                     opt.block_mask ? fmt::format("{}x{}", opt.block_mask->block_m, opt.block_mask->block_n) : "-",
                     p.q.seq, p.k.seq, p.v.seq, p.o.seq, kernels::fixed_copy_method_key(opt));
}

FlexOptions tuned_flex_options(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse,
                               const FlexShape &s, const FlexOptions &opt_in) {
  FlexOptions opt = opt_in;
  opt.autotune = false;
  if (opt.arch.empty()) opt.arch = runtime::device_arch();
  Plan p = plan(s, opt);
  std::string key = flex_shape_key(s, opt, p);
  std::string fast_key = autotune::memo_key(key, opt.arch, {});
  if (auto known = g_winners.find(fast_key)) return kernels::with_tuned_config(opt, *known);
  std::vector<int> bms{64, 128}, bns{32, 64, 128};
  if (opt.block_mask) bms = {opt.block_mask->block_m}, bns = {opt.block_mask->block_n};

  autotune::Tunable t;
  t.kernel = "flex_attention_fwd";
  t.key = key;
  t.arch = opt.arch;
  t.configs = autotune::cartesian({{"BLOCK_M", bms}, {"BLOCK_N", bns}}, {4, 8}, {2, 3});
  if (kernels::more_per_sm_candidates()) t.configs = kernels::with_more_per_sm(std::move(t.configs));
  t.configs = kernels::with_copy_methods_of(opt, std::move(t.configs));
  t.stream = opt.stream;
  std::shared_ptr<KernelBase> kernel = flex_kernel(opt.dtype, opt.score_mod, opt.mask);
  t.compile = [&](const autotune::Config &c) {
    FlexOptions o = kernels::with_tuned_config(opt, c);
    const ir::Function &fn = kernel->function(placeholder_kernel_args(plan(s, o), s, o));
    const runtime::LoadedKernel &lk = runtime::get_kernel(fn, launch_config(o));
    return autotune::compiled_of(lk);
  };
  int dim_qk = next_pow2_at_least_16(s.head_dim_qk), dim_v = next_pow2_at_least_16(p.dim_v);
  t.estimate = [=](const autotune::Config &c) { return kernels::attention_estimate(c, dim_qk, dim_v); };
  t.prior = kernels::flex_prior(opt.arch, dim_qk, dim_v, autotune::pow2_bucket(s.seqlen_k), band_class(opt),
                                kernels::more_per_sm_candidates());
  CandidateBlockMasks masks(opt, s);
  autotune::DeviceSnapshot outputs;
  t.snapshot = [&](Stream *stream) {
    outputs.take({{out.address, size_t(p.last_o + 1) * 2}, {lse.address, size_t(p.last_lse + 1) * 4}}, stream);
  };
  t.restore = [&](Stream *stream) { outputs.restore(stream); };
  t.launch = [&](const autotune::Config &c, Stream *, int) {
    flex_forward(q, k, v, out, lse, s, masks.with_mask(kernels::with_tuned_config(opt, c)));
  };
  autotune::Result r = autotune::tune(t, {});
  g_winners.remember(fast_key, r.best);
  return kernels::with_tuned_config(opt, r.best);
}

}  // namespace tilejit::attention::flex
