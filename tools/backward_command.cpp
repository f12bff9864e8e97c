// `tilejit attention ... --backward`: flex_forward then flex_backward on random inputs, timed, and with --check
// dq, dk, dv of up to two KV heads (with their GQA groups' query heads) against float64.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "tilejit/attention.h"
#include "tilejit/device.h"
#include "tilejit/error.h"
#include "tilejit/flex_attention.h"
#include "tilejit/numerics.h"
#include "tilejit/launch.h"
#include "tools/flex_flags.h"
#include "tools/random_inputs.h"

namespace tilejit::tools {

int run_flex_backward(const FlexFlags &f, const FlexRunArgs &a) {
  using namespace attention;
  const Backend be = a.backend == "gpu" ? Backend::GPU
                     : a.backend == "interp" ? Backend::Interpreter
                                             : (gpu_available() ? Backend::GPU : Backend::Interpreter);
  FlexSetup x = flex_setup(f, a, be);
  if (!x.lens.empty())
    throw Error("--backward takes dense batches here (the C++ API attention::flex_backward takes varlen ones)");
  const FlexShape &s = x.s;
  FlexOptions &opt = x.opt;
  const DType dt = x.dt;
  const int Hq = s.heads_q, Hkv = x.Hkv, Sq = s.seqlen_q, Sk = s.seqlen_k, D = a.head_dim, group = Hq / Hkv;
  const size_t nq = size_t(s.batch) * Hq * Sq * D, nk = size_t(s.batch) * Hkv * Sk * D, nl = size_t(s.batch) * Hq * Sq;

  const uint64_t seed = a.seed ? a.seed : std::random_device{}();
  std::mt19937_64 rng(seed);
  auto make = [&](size_t n, std::vector<float> &vals) { return random_buffer(n, dt, rng, be, vals); };
  std::vector<float> qf, kf, vf, dof;
  Buffer q = make(nq, qf), k = make(nk, kf), v = make(nk, vf), dout = make(nq, dof);
  Buffer out(std::max<size_t>(nq, 1) * 2, be), lse(std::max<size_t>(nl, 1) * 4, be);
  Buffer dq(std::max<size_t>(nq, 1) * 2, be), dk(std::max<size_t>(nk, 1) * 2, be), dv(std::max<size_t>(nk, 1) * 2, be);
  for (Buffer *b : {&out, &lse, &dq, &dk, &dv}) b->fill_bytes(0xff);  // NaN: an unwritten element cannot pass
  std::optional<Stream> stream;
  if (be == Backend::GPU) {
    stream.emplace();
    opt.stream = &*stream;
  }
  auto sync = [&] { if (stream) stream->synchronize(); };
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto ms_since = [&](auto t0) { return std::chrono::duration<double, std::milli>(now() - t0).count(); };

  flex_forward(q, k, v, out, lse, s, opt);
  sync();
  auto t0 = now();
  flex_backward(q, k, v, out, lse, dout, dq, dk, dv, s, opt);  // first call: trace + compile (or cache hit)
  sync();
  const double first_ms = ms_since(t0);
  double ms = first_ms;
  if (be == Backend::GPU) {
    std::vector<double> times;
    for (int i = 0; i < std::max(1, a.iters); ++i) {
      auto st = now();
      flex_backward(q, k, v, out, lse, dout, dq, dk, dv, s, opt);
      sync();
      times.push_back(ms_since(st));
    }
    std::sort(times.begin(), times.end());
    ms = times[times.size() / 2];
  }
  // The backward's FLOPs: 2.5× the forward's (FlashAttention-2's count), causal counted as half.
  const double flops = 2.5 * forward_flops(Shape{s.batch, Hq, Sq, Sk, D}, a.causal && f.window_left < 0);
  fmt::print("flex attention backward {} b={} hq={} hkv={} sq={} sk={} d={} dtype={} band={} alibi={} softcap={}\n",
             be == Backend::GPU ? "gpu" : "interp", s.batch, Hq, Hkv, Sq, Sk, D, a.dtype,
             x.mods.has_band ? fmt::format("[{}, {}]{}", x.mods.band.left, x.mods.band.right,
                                           f.bottom_right ? " bottom-right" : "")
                             : "none",
             f.alibi, f.softcap);
  if (be == Backend::GPU)
    fmt::print("  first backward (trace+compile+run): {:.2f} ms; time: {:.3f} ms (median of {} launches), {:.1f} "
               "TFLOP/s\n", first_ms, ms, std::max(1, a.iters), flops / (ms * 1e-3) / 1e12);
  else
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
  double err2[3] = {0, 0, 0}, ref2[3] = {0, 0, 0};
  const int groups = std::min(2, s.batch * Hkv);
  for (int g = 0; g < groups; ++g) {
    const int b = int(rng() % uint64_t(s.batch)), kh = int(rng() % uint64_t(Hkv));
    const size_t kvh = (size_t(b) * Hkv + kh) * Sk;
    std::vector<double> rdk(size_t(Sk) * D, 0.0), rdv(size_t(Sk) * D, 0.0);
    for (int h = kh * group; h < (kh + 1) * group; ++h) {
      const size_t qh = (size_t(b) * Hq + h) * Sq;
      std::vector<double> rdq(size_t(Sq) * D, 0.0);
      reference_head_backward(ref, b, h, Sq, Sk, D, D, scale, {qf.data() + qh * D, D}, {kf.data() + kvh * D, D},
                              {vf.data() + kvh * D, D}, {dof.data() + qh * D, D}, rdq.data(), rdk.data(), rdv.data());
      for (size_t i = 0; i < rdq.size(); ++i) {
        err2[0] += (gq[qh * D + i] - rdq[i]) * (gq[qh * D + i] - rdq[i]);
        ref2[0] += rdq[i] * rdq[i];
      }
    }
    for (size_t i = 0; i < rdk.size(); ++i) {
      err2[1] += (gk[kvh * D + i] - rdk[i]) * (gk[kvh * D + i] - rdk[i]);
      ref2[1] += rdk[i] * rdk[i];
      err2[2] += (gv[kvh * D + i] - rdv[i]) * (gv[kvh * D + i] - rdv[i]);
      ref2[2] += rdv[i] * rdv[i];
    }
  }
  // The forward's bounds (tests/kernel_test_util.h): the backward rounds P and dS to the dtype as the forward
  // rounds P.
  const double tol = dt == DType::f16 ? 5e-3 : 1e-2;
  bool ok = true;
  std::string line;
  const char *names[] = {"dq", "dk", "dv"};
  for (int t = 0; t < 3; ++t) {
    const double rel = ref2[t] > 0 ? std::sqrt(err2[t] / ref2[t]) : std::sqrt(err2[t]);
    ok = ok && rel <= tol;
    line += fmt::format("{}{} {:.3e}", t ? ", " : "", names[t], rel);
  }
  fmt::print("  check ({} KV heads with their query heads vs float64, seed {}): rel. Frobenius errors {} (bound "
             "{:.0e}): {}\n", groups, seed, line, tol, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace tilejit::tools
