// attention::flex_backward: validates through the forward's plan, computes D = rowsum(dO ∘ O) into a scratch
// buffer, then launches the dK/dV and dQ kernels (flex_backward_kernel.cpp).
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/flex/flex_backward.h"
#include "tilejit/error.h"

namespace tilejit::attention {

namespace {
constexpr const char *kOp = "attention::flex_backward";

// The three kernels' arguments; ptrs in BackwardParam order (bQ … bDqAcc).
std::vector<detail::ArgValue> backward_args(const flex::Plan &p, const FlexShape &s, const FlexOptions &opt,
                                            const DevicePtr (&ptrs)[flex::bDqAcc + 1]) {
  using namespace flex;
  std::vector<detail::ArgValue> a(kNumBackwardParams);
  for (int i = 0; i <= bDqAcc; ++i) a[size_t(i)] = ptr_arg(ptrs[i]);
  a[bScale] = float_arg(effective_scale(s, opt));
  a[bGroup] = int_arg(s.heads_q / p.heads_kv);
  a[bSeqlenQ] = int_arg(s.seqlen_q);
  a[bSeqlenK] = int_arg(s.seqlen_k);
  layout_args(a, p, s, opt, {bQb, bBandLeft, bBlockM});
  a[bHasBand] = int_arg(opt.mask.band.has_value());
  a[bLarge] = int_arg(p.large);
  a[bVarlen] = int_arg(p.varlen);
  a[bFastDq] = int_arg(opt.dq_atomics);
  return a;
}

}  // namespace

void flex_backward(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse, DevicePtr dout, DevicePtr dq,
                   DevicePtr dk, DevicePtr dv, const FlexShape &s, const FlexOptions &opt) {
  using namespace flex;
  if (opt.kv_cache)
    throw TraceError(fmt::format("{}: a paged KV cache (FlexOptions::kv_cache) serves inference; the backward "
                                 "takes dense k and v",
                                 kOp));
  if (opt.block_mask)
    throw TraceError(fmt::format("{}: FlexOptions::block_mask is not used by the backward yet (the mask function "
                                 "is evaluated on every visited block); pass none",
                                 kOp));
  Plan p = plan(s, opt, kOp);
  if (!p.work) return;
  const struct {
    DevicePtr ptr;
    int64_t last;
    size_t esz;
    const char *name;
  } tensors[] = {{q, p.last_q, 2, "q"},       {k, p.last_k, 2, "k"},   {v, p.last_v, 2, "v"},
                 {out, p.last_o, 2, "out"},   {lse, p.last_lse, 4, "lse"}, {dout, p.last_o, 2, "dout"},
                 {dq, p.last_q, 2, "dq"},     {dk, p.last_k, 2, "dk"}, {dv, p.last_v, 2, "dv"}};
  for (const auto &t : tensors) check_extent(t.ptr, t.last, t.esz, t.name, kOp);
  const Backend backend = resolve_backend(opt.backend);
  // One scratch allocation: delta (one f32 per query row), then in the fast mode the dQ accumulator (PAD_QK f32
  // per query row), 256-byte aligned.
  const size_t delta_bytes = (size_t(p.last_lse + 1) * 4 + 255) / 256 * 256;
  const size_t acc_bytes =
      !opt.dq_atomics ? 0 : size_t(p.last_lse + 1) * size_t(next_pow2_at_least_16(s.head_dim_qk)) * 4;
  Buffer scratch(delta_bytes + acc_bytes, backend);
  const DevicePtr delta{scratch.address(), delta_bytes};
  const DevicePtr dq_acc = acc_bytes ? DevicePtr{scratch.address() + delta_bytes, acc_bytes} : DevicePtr{};

  const DevicePtr ptrs[] = {q, k, v, out, dout, dq, dk, dv, lse, delta, opt.cu_seqlens_q, opt.cu_seqlens_k, dq_acc};
  const std::vector<detail::ArgValue> a = backward_args(p, s, opt, ptrs);
  const LaunchConfig cfg = launch_config(opt);
  const uint32_t batch = uint32_t(s.batch);
  backward_kernel(BackwardKernel::Delta, opt.dtype, opt.score_mod, opt.mask)
      ->launch(Grid{uint32_t(p.nqb), uint32_t(s.heads_q), batch}, cfg, a);
  backward_kernel(BackwardKernel::DkDv, opt.dtype, opt.score_mod, opt.mask)
      ->launch(Grid{uint32_t(p.nkb), uint32_t(p.heads_kv), batch}, cfg, a);
  backward_kernel(BackwardKernel::Dq, opt.dtype, opt.score_mod, opt.mask)
      ->launch(Grid{uint32_t(p.nqb), uint32_t(s.heads_q), batch}, cfg, a);
}

void flex_backward(const Buffer &q, const Buffer &k, const Buffer &v, const Buffer &out, const Buffer &lse,
                   const Buffer &dout, Buffer &dq, Buffer &dk, Buffer &dv, const FlexShape &s, const FlexOptions &opt) {
  flex::check_buffer_backends({{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}, {"lse", &lse}, {"dout", &dout},
                               {"dq", &dq}, {"dk", &dk}, {"dv", &dv}},
                              opt, kOp);
  auto ptr = [](const Buffer &b) { return DevicePtr{b.address(), b.bytes()}; };
  flex_backward(ptr(q), ptr(k), ptr(v), ptr(out), ptr(lse), ptr(dout), ptr(dq), ptr(dk), ptr(dv), s, opt);
}

std::string flex_backward_ptx(const FlexShape &s, const FlexOptions &opt) {
  using namespace flex;
  LaunchConfig cfg = launch_config(opt);
  if (cfg.arch.empty()) cfg.arch = "sm_90a";
  const Plan p = plan(s, opt, kOp);
  const DevicePtr fake{256, 0};
  const DevicePtr cu = p.varlen ? fake : DevicePtr{};
  const DevicePtr acc = opt.dq_atomics ? fake : DevicePtr{};
  const DevicePtr ptrs[] = {fake, fake, fake, fake, fake, fake, fake, fake, fake, fake, cu, cu, acc};
  const std::vector<detail::ArgValue> a = backward_args(p, s, opt, ptrs);
  std::string ptx;
  for (BackwardKernel which : {BackwardKernel::Delta, BackwardKernel::DkDv, BackwardKernel::Dq})
    ptx += backward_kernel(which, opt.dtype, opt.score_mod, opt.mask)->ptx(cfg, a).ptx;
  return ptx;
}

}  // namespace tilejit::attention
