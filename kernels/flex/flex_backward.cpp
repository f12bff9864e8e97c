// attention::flex_backward: validates through the forward's plan, takes a mask function's block mask (given, or
// built as the forward builds it) and builds its transposed lists, computes D = rowsum(dO ∘ O) into a scratch
// buffer, then launches the dK/dV and dQ kernels (flex_backward_kernel.cpp). With FlexOptions::autotune on the GPU
// the config comes from the backward's tuner first (flex_backward_autotune.cpp).
//
// The two main kernels tile the score matrix the transposed ways: a dK/dV program owns BLOCK_N keys and steps
// through BLOCK_M queries, a dQ program owns BLOCK_N queries and steps through BLOCK_M keys. With BLOCK_N =
// 2·BLOCK_M and two warpgroups, each kernel's owned rows split between the warpgroups, which share every
// stepped block's loads (FlashAttention-2's backward blocking, arXiv 2307.08691 §3.2); the dQ kernel's plan is
// the forward plan of the swapped block sizes, and with a block mask it walks one made at those sizes.
#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/flex/fixed_point_grads.h"
#include "kernels/flex/flex_backward.h"
#include "runtime/prepare_concurrently.h"
#include "runtime/stream_scratch.h"
#include "tilejit/error.h"

namespace tilejit::attention {

namespace {
constexpr const char *kOp = "attention::flex_backward";

// The three kernels' arguments; ptrs in BackwardParam order (bQ … bQCounts). bm: the block mask whose lists
// (and transposed lists, in ptrs) the kernels walk, or null.
std::vector<detail::ArgValue> backward_args(const flex::Plan &p, const FlexShape &s, const FlexOptions &opt,
                                            const DevicePtr (&ptrs)[flex::bQCounts + 1], const BlockMask *bm) {
  using namespace flex;
  std::vector<detail::ArgValue> a(kNumBackwardParams);
  for (int i = 0; i <= bQCounts; ++i) a[size_t(i)] = ptr_arg(ptrs[i]);
  // Lists [batch or 1, heads or 1, blocks]: a stride of 0 shares one set of lists (as the forward's).
  auto strides = [&](int b_at, int h_at, int64_t blocks) {
    const ListStrides st = list_strides(bm, s, blocks);
    a[size_t(b_at)] = int_arg(bm ? st.batch : 0);
    a[size_t(h_at)] = int_arg(bm ? st.head : 0);
  };
  strides(bListsStrideB, bListsStrideH, p.nqb);
  strides(bTListsStrideB, bTListsStrideH, p.nkb);
  a[bNumQBlocks] = int_arg(p.nqb);
  a[bNumKBlocks] = int_arg(p.nkb);
  a[bUseBlockMask] = int_arg(bm != nullptr);
  a[bScale] = float_arg(effective_scale(s, opt));
  a[bGroup] = int_arg(s.heads_q / p.heads_kv);
  a[bSeqlenQ] = int_arg(s.seqlen_q);
  a[bSeqlenK] = int_arg(s.seqlen_k);
  layout_args(a, p, s, opt, {bQb, bBandLeft, bBlockM});
  a[bHasBand] = int_arg(opt.mask.band.has_value());
  // With ATOMICS the dQ accumulator's offsets (PAD_QK f32 per query row, lse's row order) reach further than
  // q's when the head dim is padded: 64-bit offsets when they pass 2^31 (a block of rows past the last).
  const __int128 acc_reach = (__int128(p.last_lse) + 1 + std::max(opt.block_m, opt.block_n)) *
                             next_pow2_at_least_16(s.head_dim_qk);
  a[bLarge] = int_arg(p.large || (opt.atomics && acc_reach > std::numeric_limits<int32_t>::max()));
  a[bVarlen] = int_arg(p.varlen);
  a[bAtomics] = int_arg(opt.atomics);
  a[bSmallPositions] = int_arg(small_positions(s));
  // The backward traces the mods as functions; captured scalars at their values now, as the forward's frame.
  a[bExactFrames] = int_arg(score_frame(opt, /*mods_as_functions=*/true).kind == ScoreFrame::AnyFinite);
  return a;
}

}  // namespace

namespace flex {

// The block sizes swapped (see the top of this file); a given block mask is made at the dK/dV kernel's sizes,
// so the dQ kernel's comes from the mask function unless the blocks are square.
FlexOptions dq_options(const FlexOptions &opt) {
  FlexOptions o = opt;
  std::swap(o.block_m, o.block_n);
  if (opt.block_m != opt.block_n) o.block_mask = nullptr;
  return o;
}

std::vector<std::shared_ptr<detail::CaptureState>> learnable_captures(const FlexOptions &opt,
                                                                      std::span<const detail::ArgValue> args) {
  std::vector<std::shared_ptr<detail::CaptureState>> learnable;
  if (!opt.score_mod) return learnable;  // masks are not differentiated
  for (const auto &c : backward_kernel(BackwardKernel::DkDv, opt.dtype, opt.score_mod, opt.mask)->captures(args))
    if (c->grad) learnable.push_back(c);
  return learnable;
}

namespace {

// Which block masks a call's kernels walk. The dK/dV kernel: the given one, or with a mask function in
// BlockMaskMode::Auto the one built at the call's block sizes. The dQ kernel (the swapped sizes): the same one when
// the blocks are square; else one built from the mask function at its sizes (Auto), or none (a given mask was made
// at the dK/dV kernel's sizes).
struct MaskWalks {
  bool automatic, main, dq;
};
MaskWalks mask_walks(const FlexOptions &opt) {
  const bool automatic = opt.mask.fn && opt.block_mask_mode == BlockMaskMode::Auto;
  const bool main = opt.block_mask || automatic;
  return {automatic, main, main && (opt.block_m == opt.block_n || automatic)};
}

}  // namespace

BackwardArgs placeholder_backward_args(const FlexShape &s, const FlexOptions &opt) {
  const Plan p = plan(s, opt, kOp);
  const DevicePtr fake{256, 0};
  const DevicePtr cu = p.varlen ? fake : DevicePtr{};
  const DevicePtr acc = opt.atomics ? fake : DevicePtr{};
  // A placeholder block mask where a launch would walk one.
  BlockMask placeholder;
  const MaskWalks walks = mask_walks(opt);
  const bool use_bm = walks.main, dq_use_bm = walks.dq;
  const DevicePtr lists = use_bm ? fake : DevicePtr{};
  const DevicePtr ptrs[] = {fake, fake, fake, fake, fake, fake, fake, fake, fake, fake, cu, cu, acc,
                            lists, lists, lists, lists};
  const FlexOptions dq_opt = dq_options(opt);
  return {backward_args(p, s, opt, ptrs, use_bm ? &placeholder : nullptr),
          backward_args(plan(s, dq_opt, kOp), s, dq_opt, ptrs, dq_use_bm ? &placeholder : nullptr)};
}

FlexOptions run_backward(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse, DevicePtr dout,
                         DevicePtr dq, DevicePtr dk, DevicePtr dv, const FlexShape &s, const FlexOptions &options) {
  const FlexOptions opt = with_implied_band(options);
  if (opt.kv_cache)
    throw TraceError(fmt::format("{}: a paged KV cache (FlexOptions::kv_cache) serves inference; the backward "
                                 "takes dense k and v",
                                 kOp));
  Plan p = plan(s, opt, kOp);
  // Keys that no query sees still get their (zero) gradients; queries that see no key get dq = 0 from the dQ
  // pass.
  const bool key_work = int64_t(s.batch) * p.heads_kv * s.seqlen_k > 0 && (p.varlen ? s.total_k : s.seqlen_k) > 0;
  if (!p.work && !key_work) return opt;
  const struct {
    DevicePtr ptr;
    int64_t last;
    size_t esz;
    const char *name;
  } tensors[] = {{q, p.last_q, 2, "q"},       {k, p.last_k, 2, "k"},   {v, p.last_v, 2, "v"},
                 {out, p.last_o, 2, "out"},   {lse, p.last_lse, 4, "lse"}, {dout, p.last_o, 2, "dout"},
                 {dq, p.last_q, 2, "dq"},     {dk, p.last_k, 2, "dk"}, {dv, p.last_v, 2, "dv"}};
  for (const auto &t : tensors) check_extent(t.ptr, t.last, t.esz, t.name, kOp);
  // The kernels read q, k, v, out, lse and dout after others have written gradients: a gradient must not start
  // where another tensor does (strided views of one packed buffer, as dq, dk, dv of a dqkv tensor, are fine).
  for (int o = 6; o < 9; ++o)
    for (int i = 0; i < 9; ++i)
      if (i != o && tensors[o].last >= 0 && tensors[i].last >= 0 && tensors[o].ptr.address == tensors[i].ptr.address)
        throw TraceError(fmt::format("{}: '{}' and '{}' start at the same address {:#x}; each gradient needs memory "
                                     "of its own",
                                     kOp, tensors[o].name, tensors[i].name, tensors[o].ptr.address));
  // A mask function's tiles come from a block mask: the one given, or built (and cached) as flex_forward builds
  // it. Its lists serve the dQ walk; the dK/dV walk needs them transposed. Without queries there is nothing to
  // skip.
  const BlockMask *bm = opt.block_mask;
  if (bm) check_block_mask(*bm, s, opt, p.nqb, p.nkb, kOp);
  // The learnable captures the mod reads: their gradient buffers are written while the kernels read the
  // captured tables and the inputs, so each must be memory of its own.
  auto check_learnable = [&](const std::vector<std::shared_ptr<detail::CaptureState>> &learnable) {
    for (const auto &c : learnable) {
      const uint64_t g = c->grad->address;
      if (g == 0)
        throw TraceError(fmt::format("{}: a learnable capture (at {:#x}) has a null gradient buffer; give it one "
                                     "with Captured::set_grad",
                                     kOp, c->address));
      if (g == c->address)
        throw TraceError(fmt::format("{}: a learnable capture's gradient buffer is the captured buffer itself "
                                     "({:#x}); the gradient needs memory of its own",
                                     kOp, g));
      for (const auto &t : tensors)
        if (t.last >= 0 && t.ptr.address == g)
          throw TraceError(fmt::format("{}: a learnable capture's gradient buffer starts at the address of '{}' "
                                       "({:#x}); the gradient needs memory of its own",
                                       kOp, t.name, g));
    }
  };
  // Tuned once everything above holds (the learnable captures' buffers too): the tuner times launches on these
  // buffers, and a launch that throws would only read as a failed candidate. Without queries the call only
  // zeroes dk and dv, which no config does faster.
  if (opt.autotune && p.work && resolve_backend(opt.backend) == Backend::GPU) {
    std::vector<std::shared_ptr<detail::CaptureState>> learnable;
    if (key_work) learnable = learnable_captures(opt, placeholder_backward_args(s, opt).main);
    check_learnable(learnable);
    return run_backward(q, k, v, out, lse, dout, dq, dk, dv, s,
                        tuned_flex_backward_options(q, k, v, out, lse, dout, dq, dk, dv, s, opt, learnable));
  }
  // The block masks the kernels walk (mask_walks); none without queries.
  const MaskWalks walks = mask_walks(opt);
  if (!p.work) bm = nullptr;
  std::shared_ptr<const BlockMask> computed;  // released after the launches: cuMemFree waits for the kernels
  if (!bm && p.work && walks.automatic) {
    computed = auto_block_mask(opt.mask, s, opt);
    bm = computed.get();
  }
  // The dQ kernel's tiling: the swapped block sizes.
  const FlexOptions dq_opt = dq_options(opt);
  const Plan dq_plan = plan(s, dq_opt, kOp);
  const BlockMask *dq_bm = nullptr;
  std::shared_ptr<const BlockMask> dq_computed;
  if (bm && walks.dq) {
    if (opt.block_m == opt.block_n) {
      dq_bm = bm;
    } else {
      dq_computed = auto_block_mask(opt.mask, s, dq_opt);
      dq_bm = dq_computed.get();
    }
  }
  const Backend backend = resolve_backend(opt.backend);
  // One scratch allocation, each part 256-byte aligned: delta (one f32 per query row); with atomics the dQ
  // accumulator (PAD_QK f32 per query row); with a block mask its transposed lists and their counts.
  auto aligned = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  const size_t delta_bytes = aligned(size_t(p.last_lse + 1) * 4);
  const size_t acc_bytes =
      !opt.atomics ? 0 : aligned(size_t(p.last_lse + 1) * size_t(next_pow2_at_least_16(s.head_dim_qk)) * 4);
  size_t t_lists = 0;
  if (bm) {
    const ListDims dims = list_dims(*bm, s);
    t_lists = size_t(dims.batches) * size_t(dims.heads) * size_t(p.nkb);
  }
  const size_t t_blocks_bytes = aligned(t_lists * size_t(p.nqb) * 4), t_counts_bytes = aligned(t_lists * 4);
  // Stream-ordered: neither its allocation nor its free waits for the device.
  runtime::StreamScratch scratch(delta_bytes + acc_bytes + t_blocks_bytes + t_counts_bytes, backend, opt.stream);
  uint64_t at = scratch.address();
  auto part = [&](size_t bytes) {
    DevicePtr d = bytes ? DevicePtr{at, bytes} : DevicePtr{};
    at += bytes;
    return d;
  };
  const DevicePtr delta = part(delta_bytes), dq_acc = part(acc_bytes);
  const DevicePtr q_blocks = part(t_blocks_bytes), q_counts = part(t_counts_bytes);
  if (bm) build_transposed_lists(*bm, s, opt, q_blocks, q_counts);

  // The dK/dV kernel walks bm's transposed lists, the dQ kernel dq_bm's lists.
  const DevicePtr kv_blocks = dq_bm ? DevicePtr{dq_bm->kv_blocks.address(), dq_bm->kv_blocks.bytes()} : DevicePtr{};
  const DevicePtr kv_counts = dq_bm ? DevicePtr{dq_bm->counts.address(), dq_bm->counts.bytes()} : DevicePtr{};
  const DevicePtr ptrs[] = {q,     k,     v,  out, dout, dq, dk, dv, lse, delta, opt.cu_seqlens_q, opt.cu_seqlens_k,
                            dq_acc, kv_blocks, kv_counts, q_blocks, q_counts};
  const std::vector<detail::ArgValue> a = backward_args(p, s, opt, ptrs, bm);
  const std::vector<detail::ArgValue> dq_a = backward_args(dq_plan, s, dq_opt, ptrs, dq_bm);
  const LaunchConfig cfg = launch_config(opt);
  const uint32_t batch = uint32_t(s.batch);
  const auto delta_kernel = backward_kernel(BackwardKernel::Delta, opt.dtype, opt.score_mod, opt.mask);
  const auto dkdv = backward_kernel(BackwardKernel::DkDv, opt.dtype, opt.score_mod, opt.mask);
  const auto dq_kernel = backward_kernel(BackwardKernel::Dq, opt.dtype, opt.score_mod, opt.mask);
  // A new shape's or variant's first call compiles the kernels it launches at once.
  if (backend == Backend::GPU) {
    std::vector<runtime::PrepareJob> jobs;
    if (p.work) jobs = {{delta_kernel.get(), a}, {dq_kernel.get(), dq_a}};
    if (key_work) jobs.push_back({dkdv.get(), a});
    runtime::prepare_concurrently(jobs, cfg);
  }
  std::vector<std::shared_ptr<detail::CaptureState>> learnable;
  if (key_work) learnable = learnable_captures(opt, a);
  check_learnable(learnable);
  // Without atomics, their gradients are summed in fixed point, in accumulators zeroed here and added into
  // their buffers after the dK/dV kernel.
  std::optional<FixedPointGrads> fixed_point;
  if (!learnable.empty() && !opt.atomics) fixed_point.emplace(learnable, backend, opt.stream, kOp);
  if (p.work) delta_kernel->launch(Grid{uint32_t(p.nqb), uint32_t(s.heads_q), batch}, cfg, a);
  if (key_work) dkdv->launch(Grid{uint32_t(p.nkb), uint32_t(p.heads_kv), batch}, cfg, a);
  if (fixed_point) fixed_point->add_into_grads(cfg);
  if (p.work) dq_kernel->launch(Grid{uint32_t(dq_plan.nqb), uint32_t(s.heads_q), batch}, cfg, dq_a);
  return opt;
}

}  // namespace flex

void flex_backward(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse, DevicePtr dout, DevicePtr dq,
                   DevicePtr dk, DevicePtr dv, const FlexShape &s, const FlexOptions &opt) {
  flex::run_backward(q, k, v, out, lse, dout, dq, dk, dv, s, opt);
}

void flex_backward(const Buffer &q, const Buffer &k, const Buffer &v, const Buffer &out, const Buffer &lse,
                   const Buffer &dout, Buffer &dq, Buffer &dk, Buffer &dv, const FlexShape &s, const FlexOptions &opt) {
  flex::check_buffer_backends({{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}, {"lse", &lse}, {"dout", &dout},
                               {"dq", &dq}, {"dk", &dk}, {"dv", &dv}},
                              opt, kOp);
  auto ptr = [](const Buffer &b) { return DevicePtr{b.address(), b.bytes()}; };
  flex_backward(ptr(q), ptr(k), ptr(v), ptr(out), ptr(lse), ptr(dout), ptr(dq), ptr(dk), ptr(dv), s, opt);
}

std::string flex_backward_ptx(const FlexShape &s, const FlexOptions &options) {
  using namespace flex;
  const FlexOptions opt = with_implied_band(options);
  LaunchConfig cfg = launch_config(opt);
  if (cfg.arch.empty()) cfg.arch = "sm_90a";
  const BackwardArgs a = placeholder_backward_args(s, opt);
  std::string ptx;
  for (BackwardKernel which : {BackwardKernel::Delta, BackwardKernel::DkDv, BackwardKernel::Dq})
    ptx += backward_kernel(which, opt.dtype, opt.score_mod, opt.mask)
               ->ptx(cfg, which == BackwardKernel::Dq ? a.dq : a.main)
               .ptx;
  return ptx;
}

}  // namespace tilejit::attention
