// Autotuning of the attention forward's configuration (Options::autotune, attention::tune).
//
// Candidates: BLOCK_M ∈ {64,128} × BLOCK_N ∈ {32,64,128} × num_warps ∈ {4,8} × num_stages ∈ {1,2,3} (and the
// register-capped ones), each with every copy method of the arch (cp.async; on sm_90a also TMA and a producer
// warpgroup; kernels/launch_options.h); the autotuner skips those whose accumulators cannot fit their register
// cap and, on an arch and head dim with measurements, those that never won there
// (kernels/autotune_prior.h), compiles the rest in parallel, drops those that do not fit or spill, and times the
// survivors on the call's own inputs (rotated among copies when they are small, so the L2 cache does not
// flatter them) while the outputs are snapshot and restored. The shape key buckets the sizes to powers of two,
// so nearby shapes share one tuning.
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "kernels/attention_internal.h"
#include "kernels/autotune_prior.h"
#include "kernels/launch_options.h"
#include "runtime/autotune_device.h"
#include "runtime/runtime.h"
#include "tilejit/error.h"

namespace tilejit::attention::detail {
namespace {

std::string shape_key(const Shape &s, const Options &opt) {
  return fmt::format("{} d={} causal={} sq<={} sk<={} bh<={}{}", opt.dtype == DType::bf16 ? "bf16" : "f16",
                     s.head_dim, opt.causal ? 1 : 0, autotune::pow2_bucket(s.seqlen_q),
                     autotune::pow2_bucket(s.seqlen_k), autotune::pow2_bucket(int64_t(s.batch) * s.heads),
                     kernels::fixed_copy_method_key(opt));
}

std::vector<autotune::Config> candidates(const Options &opt) {
  std::vector<autotune::Config> c =
      autotune::cartesian({{"BLOCK_M", {64, 128}}, {"BLOCK_N", {32, 64, 128}}}, {4, 8}, {1, 2, 3});
  if (kernels::more_per_sm_candidates()) c = kernels::with_more_per_sm(std::move(c));
  return kernels::with_copy_methods_of(opt, std::move(c));
}

// Bytes from a tensor's base pointer to the end of its furthest element.
size_t span_bytes(const Strides &st, int seqlen, const Shape &s) {
  int64_t last = int64_t(s.batch - 1) * st.batch + int64_t(s.heads - 1) * st.head + int64_t(seqlen - 1) * st.seq +
                 (s.head_dim - 1);
  return size_t(last + 1) * 2;
}

autotune::WinnerMemo g_winners;

}  // namespace

Options tuned_options(const Pointers &p, const Shape &s, const Layout &L, const Options &opt_in,
                      const autotune::Settings &settings, autotune::Result *result) {
  Options opt = opt_in;
  if (opt.arch.empty()) opt.arch = runtime::device_arch();
  std::string key = shape_key(s, opt);
  std::string fast_key = autotune::memo_key(key, opt.arch, settings);
  if (!result && settings.use_cache)
    if (auto known = g_winners.find(fast_key)) return kernels::with_tuned_config(opt, *known);

  autotune::Tunable t;
  t.kernel = "attention_fwd";
  t.key = key;
  t.arch = opt.arch;
  t.configs = candidates(opt);
  t.stream = opt.stream;
  t.flops = forward_flops(s, opt.causal);
  t.compile = [&](const autotune::Config &c) { return compile(p, s, L, kernels::with_tuned_config(opt, c)); };
  t.estimate = [&](const autotune::Config &c) { return kernels::attention_estimate(c, s.head_dim, s.head_dim); };
  t.prior = kernels::attention_prior(opt.arch, s.head_dim, autotune::pow2_bucket(s.seqlen_k),
                                     kernels::more_per_sm_candidates());

  // Input rotation: copies 1..n-1 of q, k, v (copy 0 is the caller's), made only when tuning really runs.
  size_t qb = span_bytes(L.q, s.seqlen_q, s), kb = span_bytes(L.k, s.seqlen_k, s), vb = span_bytes(L.v, s.seqlen_k, s);
  std::vector<Pointers> inputs{p};
  std::vector<Buffer> copies;
  autotune::DeviceSnapshot outputs;
  t.snapshot = [&](Stream *stream) {
    int n = autotune::rotation_count(qb + kb + vb);
    for (int r = 1; r < n; ++r) {
      Pointers c = p;
      for (auto [dst, bytes] : {std::pair{&c.q, qb}, std::pair{&c.k, kb}, std::pair{&c.v, vb}}) {
        copies.emplace_back(bytes, Backend::GPU);
        autotune::copy_device(copies.back().address(), dst->address, bytes, stream);
        *dst = DevicePtr{copies.back().address(), bytes};
      }
      inputs.push_back(c);
    }
    size_t lse_bytes = size_t(s.batch) * s.heads * s.seqlen_q * 4;
    outputs.take({{p.out.address, span_bytes(L.o, s.seqlen_q, s)}, {p.lse.address, lse_bytes}}, stream);
  };
  t.restore = [&](Stream *stream) { outputs.restore(stream); };
  t.rotations = 8;  // launch() wraps around the copies that exist
  t.launch = [&](const autotune::Config &c, Stream *, int rotation) {
    launch(inputs[size_t(rotation) % inputs.size()], s, L, kernels::with_tuned_config(opt, c));
  };

  autotune::Result r = autotune::tune(t, settings);
  autotune::Config best = r.best;
  g_winners.remember(fast_key, best);
  if (result) *result = std::move(r);
  return kernels::with_tuned_config(opt, best);
}

}  // namespace tilejit::attention::detail

namespace tilejit::attention {

autotune::Result tune(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse, const Shape &shape,
                      const Strides &q_strides, const Strides &k_strides, const Strides &v_strides,
                      const Strides &o_strides, const Options &opt, const autotune::Settings &settings) {
  if (resolve_backend(opt.backend) != Backend::GPU)
    throw Error("attention::tune: autotuning needs the GPU backend (it times configs with CUDA events)");
  detail::Pointers p{q, k, v, out, lse};
  detail::Layout L{q_strides, k_strides, v_strides, o_strides};
  detail::validate(p, shape, L, opt);
  if (int64_t(shape.batch) * shape.heads * shape.seqlen_q == 0)
    throw TraceError("attention::tune: the shape is empty; there is nothing to time");
  autotune::Result r;
  detail::tuned_options(p, shape, L, opt, settings, &r);
  return r;
}

}  // namespace tilejit::attention
