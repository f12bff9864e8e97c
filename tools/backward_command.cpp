// `tilejit attention ... --backward`: flex_forward then flex_backward on random inputs, timed, and with --check
// dq, dk, dv of up to two KV heads (with their GQA groups' query heads) against float64, and with
// --learn-slopes the ALiBi slopes' gradient of a query head per KV head checked.
#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "kernels/flex/flex_backward.h"
#include "runtime/runtime.h"
#include "tilejit/attention.h"
#include "tilejit/autodiff.h"
#include "tilejit/error.h"
#include "tilejit/flex_attention.h"
#include "tilejit/numerics.h"
#include "tilejit/launch.h"
#include "tools/backend_flag.h"
#include "tools/flex_flags.h"
#include "tools/call_timing.h"
#include "tools/random_inputs.h"

namespace tilejit::tools {
namespace {

// The config the autotuned calls ran (flex::run_backward's report).
void print_tuned_backward(const attention::FlexOptions &t) {
  const int method = runtime::copy_method(attention::flex::launch_config(t));
  fmt::print("  autotuned backward config: BLOCK_M={} BLOCK_N={} num_warps={} num_stages={} copy={}\n", t.block_m,
             t.block_n, t.num_warps, t.num_stages,
             method == 2 ? "warp_specialize" : method == 1 ? "tma" : "cp.async");
}

}  // namespace

int run_flex_backward(const FlexFlags &f, const FlexRunArgs &a) {
  using namespace attention;
  const Backend be = parse_backend(a.backend);
  FlexSetup x = flex_setup(f, a, be);
  const FlexShape &s = x.s;
  FlexOptions &opt = x.opt;
  opt.atomics = a.atomics;
  const DType dt = x.dt;
  const bool varlen = !x.lens.empty();
  const int Hq = s.heads_q, Hkv = x.Hkv, D = a.head_dim, group = Hq / Hkv;
  // Dense [batch, heads, seq, d], or varlen [tokens, heads, d] with the sequences packed (lengths x.lens).
  const size_t rows_q = varlen ? size_t(s.total_q) : size_t(s.batch) * s.seqlen_q;
  const size_t rows_k = varlen ? size_t(s.total_k) : size_t(s.batch) * s.seqlen_k;
  const size_t nq = rows_q * Hq * D, nk = rows_k * Hkv * D, nl = rows_q * Hq;
  auto seq_len = [&](int b, bool keys) { return varlen ? x.lens[size_t(b)] : keys ? s.seqlen_k : s.seqlen_q; };
  auto row0 = [&](int b, int h, int heads, bool keys) -> size_t {  // element offset of the sequence's first row
    return varlen ? (size_t(x.cu[size_t(b)]) * heads + h) * D
                  : (size_t(b) * heads + h) * size_t(keys ? s.seqlen_k : s.seqlen_q) * D;
  };
  auto row_stride = [&](int heads) { return varlen ? int64_t(heads) * D : int64_t(D); };

  const uint64_t seed = a.seed ? a.seed : std::random_device{}();
  std::mt19937_64 rng(seed);
  auto make = [&](size_t n, std::vector<float> &vals) { return random_buffer(n, dt, rng, be, vals); };
  std::vector<float> qf, kf, vf, dof;
  Buffer q = make(nq, qf), k = make(nk, kf), v = make(nk, vf), dout = make(nq, dof);
  Buffer out(std::max<size_t>(nq, 1) * 2, be), lse(std::max<size_t>(nl, 1) * 4, be);
  Buffer dq(std::max<size_t>(nq, 1) * 2, be), dk(std::max<size_t>(nk, 1) * 2, be), dv(std::max<size_t>(nk, 1) * 2, be);
  for (Buffer *b : {&out, &lse, &dq, &dk, &dv}) b->fill_bytes(0xff);  // NaN: an unwritten element cannot pass
  Buffer cub;
  if (varlen) {
    cub = Buffer(x.cu.size() * 4, be);
    cub.upload(x.cu);
    opt.cu_seqlens_q = opt.cu_seqlens_k = {cub.address(), cub.bytes()};
  }
  std::optional<Stream> stream;
  if (be == Backend::GPU) {
    stream.emplace();
    opt.stream = &*stream;
  }
  flex_forward(q, k, v, out, lse, s, opt);
  if (opt.stream) opt.stream->synchronize();  // the backward's times exclude the forward
  // The first backward traces and compiles (or hits the cache).
  auto ptr = [](const Buffer &b) { return DevicePtr{b.address(), b.bytes()}; };
  FlexOptions ran = opt;  // what the calls ran: with --autotune on the GPU, the backward tuner's pick
  const CallTimes t = time_calls(
      [&] {
        ran = flex::run_backward(ptr(q), ptr(k), ptr(v), ptr(out), ptr(lse), ptr(dout), ptr(dq), ptr(dk), ptr(dv), s,
                                 opt);
      },
      opt.stream, a.iters);
  const double first_ms = t.first_ms, ms = t.median_ms;
  // The timed calls added into the slopes' gradient too (it accumulates, as .grad does): check one call's.
  if (f.learnable_slopes && opt.stream) {
    x.mods.slopes_grad.fill_bytes(0);
    flex_backward(q, k, v, out, lse, dout, dq, dk, dv, s, opt);
    opt.stream->synchronize();
  }
  // The backward's FLOPs: 2.5× the forward's (FlashAttention-2's count), causal counted as half.
  double flops = 0;  // every sequence's pairs (varlen: its own length)
  for (int b = 0; b < s.batch; ++b)
    flops += 2.5 * forward_flops(Shape{1, Hq, seq_len(b, false), seq_len(b, true), D}, a.causal && f.window_left < 0);
  fmt::print("flex attention backward {} b={} hq={} hkv={} sq={} sk={} d={} dtype={} band={} alibi={} softcap={} "
             "varlen={} dq={}\n",
             be == Backend::GPU ? "gpu" : "interp", s.batch, Hq, Hkv, s.seqlen_q, s.seqlen_k, D, a.dtype,
             x.mods.has_band ? fmt::format("[{}, {}]{}{}", x.mods.band.left, x.mods.band.right,
                                           f.bottom_right ? " bottom-right" : "",
                                           f.band_as_mask ? " as a mask function" : "")
                             : "none",
             f.alibi, f.softcap, varlen ? f.varlen : "no", a.atomics ? "atomics" : "own pass");
  if (be == Backend::GPU)
    fmt::print("  first backward (trace+compile+{}run): {:.2f} ms; time: {:.3f} ms (median of {} launches), {:.1f} "
               "TFLOP/s\n", opt.autotune ? "tune+" : "", first_ms, ms, std::max(1, a.iters),
               flops / (ms * 1e-3) / 1e12);
  if (be == Backend::GPU && opt.autotune) print_tuned_backward(ran);
  if (be != Backend::GPU)
    fmt::print("  backward: {:.1f} ms (trace + one run on the CPU interpreter)\n", first_ms);
  if (!a.check) return 0;

  auto widen = [&](const Buffer &b, size_t n) {
    auto bits = b.download_as<uint16_t>(n);
    std::vector<float> w(n);
    for (size_t i = 0; i < n; ++i) w[i] = dt == DType::bf16 ? bf16_to_float(bits[i]) : f16_to_float(bits[i]);
    return w;
  };
  const std::vector<float> gq = widen(dq, nq), gk = widen(dk, nk), gv = widen(dv, nk);
  for (const auto *g : {&gq, &gk, &gv})
    for (float e : *g)
      if (!std::isfinite(e)) {
        fmt::print("  CHECK FAILED: a gradient element is not finite (unwritten or NaN)\n");
        return 1;
      }
  // Whole KV heads: their dk and dv sum every query row of the group's heads.
  const RefMods ref = flag_ref_mods(f, x.mods, f.bottom_right);
  const double scale = 1.0 / std::sqrt(double(D));
  double err2[3] = {0, 0, 0}, ref2[3] = {0, 0, 0}, mag2[3] = {0, 0, 0};
  size_t compared = 0;  // gradient elements compared
  auto accumulate = [&](int t, const std::vector<float> &got, size_t at, int64_t stride, const std::vector<double> &want,
                        const std::vector<double> *mags, int rows) {
    compared += size_t(rows) * D;
    for (int i = 0; i < rows; ++i)
      for (int d = 0; d < D; ++d) {
        const double w = want[size_t(i) * D + d], e = got[at + size_t(i * stride) + d] - w;
        err2[t] += e * e;
        ref2[t] += w * w;
        if (mags) mag2[t] += (*mags)[size_t(i) * D + d] * (*mags)[size_t(i) * D + d];
      }
  };
  std::vector<int> checked_heads;  // a query head of each group: their slopes' gradients are checked
  const std::vector<int> sequences =
      sequences_to_sample(s.batch, [&](int b) { return std::max(seq_len(b, false), seq_len(b, true)); });
  // Distinct (sequence, KV head) pairs, so that the heads the report counts are the heads checked.
  std::vector<std::pair<int, int>> pairs;
  for (int b : sequences)
    for (int kh = 0; kh < Hkv; ++kh) pairs.emplace_back(b, kh);
  std::shuffle(pairs.begin(), pairs.end(), rng);
  const int groups = int(std::min<size_t>(2, pairs.size()));
  for (int g = 0; g < groups; ++g) {
    const auto [b, kh] = pairs[size_t(g)];
    if (f.learnable_slopes) {
      const int slope_head = kh * group + int(rng() % uint64_t(group));
      if (std::find(checked_heads.begin(), checked_heads.end(), slope_head) == checked_heads.end())
        checked_heads.push_back(slope_head);
    }
    const int sq = seq_len(b, false), sk = seq_len(b, true);
    std::vector<double> rdk(size_t(sk) * D, 0.0), rdv(size_t(sk) * D, 0.0), mdk(rdk.size(), 0.0);
    for (int h = kh * group; h < (kh + 1) * group; ++h) {
      std::vector<double> rdq(size_t(sq) * D, 0.0), mdq(rdq.size(), 0.0);
      reference_head_backward(ref, b, h, sq, sk, D, D, scale, {qf.data() + row0(b, h, Hq, false), row_stride(Hq)},
                              {kf.data() + row0(b, kh, Hkv, true), row_stride(Hkv)},
                              {vf.data() + row0(b, kh, Hkv, true), row_stride(Hkv)},
                              {dof.data() + row0(b, h, Hq, false), row_stride(Hq)}, rdq.data(), rdk.data(), rdv.data(),
                              {}, {mdq.data(), mdk.data()});
      accumulate(0, gq, row0(b, h, Hq, false), row_stride(Hq), rdq, &mdq, sq);
    }
    accumulate(1, gk, row0(b, kh, Hkv, true), row_stride(Hkv), rdk, &mdk, sk);
    accumulate(2, gv, row0(b, kh, Hkv, true), row_stride(Hkv), rdv, nullptr, sk);
  }
  if (compared == 0) {
    fmt::print("  check: no gradients to check (every sampled sequence is empty)\n");
    return 0;
  }
  // The forward's bounds (tests/kernel_test_util.h): the backward rounds P and dS to the dtype as the forward
  // rounds P.
  const double tol = dt == DType::f16 ? 5e-3 : 1e-2;
  bool ok = true;
  std::string line;
  const char *names[] = {"dq", "dk", "dv"};
  for (int t = 0; t < 3; ++t) {
    const double rel = gradient_error(err2[t], ref2[t], mag2[t], tol);
    ok = ok && rel <= tol;
    line += fmt::format("{}{} {:.3e}", t ? ", " : "", names[t], rel);
  }
  fmt::print("  check ({} KV head{} with {} query heads vs float64, seed {}): errors {} (relative Frobenius, "
             "or against the terms' magnitudes where they cancel; bound {:.0e}): {}\n", groups, groups == 1 ? "" : "s",
             groups == 1 ? "its" : "their", seed, line, tol, ok ? "PASS" : "FAIL");
  if (!f.learnable_slopes) return ok ? 0 : 1;

  // The slopes' gradient: d slope[h] = Σ over every sequence's visible scores of dZ · ∂z/∂slope, where
  // z = softcap(s − slope·|i − j|): ∂z/∂slope = −|i − j| · (1 − tanh²(x / cap)) with a soft-cap, −|i − j|
  // without (s = q·k·scale recomputed from the inputs). Its terms cancel (Σ_j dZ_ij = 0 in every row), so each
  // head's error is bounded by tol times the sum of the terms' magnitudes, plus, summed in fixed point, half a
  // low unit (2^-53) per term.
  const std::vector<float> got = x.mods.slopes_grad.download_as<float>(size_t(Hq));
  const double rounding = a.atomics ? 0.0 : std::ldexp(1.0, -kFixedPointLowBits - 1);
  bool slopes_ok = true;
  std::string heads;
  for (int h : checked_heads) {
    double want = 0, magnitude = 0, terms = 0;
    const int kh = h / group;
    for (int b = 0; b < s.batch; ++b) {
      const int sq = seq_len(b, false), sk = seq_len(b, true);
      std::vector<double> rdq(size_t(sq) * D), rdk(size_t(sk) * D), rdv(size_t(sk) * D);
      reference_head_backward(ref, b, h, sq, sk, D, D, scale, {qf.data() + row0(b, h, Hq, false), row_stride(Hq)},
                              {kf.data() + row0(b, kh, Hkv, true), row_stride(Hkv)},
                              {vf.data() + row0(b, kh, Hkv, true), row_stride(Hkv)},
                              {dof.data() + row0(b, h, Hq, false), row_stride(Hq)}, rdq.data(), rdk.data(), rdv.data(),
                              [&](int i, int j, double dz) {
                                double factor = -std::abs(i - j);
                                if (f.softcap > 0) {
                                  const float *qi = qf.data() + row0(b, h, Hq, false) + size_t(i) * row_stride(Hq);
                                  const float *kj = kf.data() + row0(b, kh, Hkv, true) + size_t(j) * row_stride(Hkv);
                                  double score = 0;
                                  for (int d = 0; d < D; ++d) score += double(qi[d]) * kj[d];
                                  const double th = std::tanh((score * scale + factor * x.mods.slopes_host[size_t(h)]) /
                                                              f.softcap);
                                  factor *= 1 - th * th;
                                }
                                const double term = factor * dz;
                                want += term;
                                magnitude += std::fabs(term);
                                terms += 1;
                              });
    }
    const double err = std::fabs(double(got[size_t(h)]) - want), bound = tol * magnitude + rounding * terms;
    slopes_ok = slopes_ok && err <= bound;
    heads += fmt::format("{}head {}: {:.6g} vs {:.6g} (error {:.2e}, bound {:.2e})", heads.empty() ? "" : "; ", h,
                         got[size_t(h)], want, err, bound);
  }
  fmt::print("  check of the learnable slopes' gradient ({}, every sequence): {}: {}\n",
             a.atomics ? "f32 atomics" : "fixed point", heads, slopes_ok ? "PASS" : "FAIL");
  return ok && slopes_ok ? 0 : 1;
}

}  // namespace tilejit::tools
