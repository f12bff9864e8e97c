// `tilejit attention` with flex variants: builds the FlexOptions from the flags, runs and times
// flex_forward, and checks sampled rows against a float64 reference with the same mods.
#include "tools/flex_flags.h"
#include "tools/backend_flag.h"
#include "tools/call_timing.h"
#include "tools/random_inputs.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <vector>

#include "kernels/flex/variants_builtin.h"
#include "tilejit/buffer.h"
#include "tilejit/error.h"
#include "tilejit/flex_attention.h"
#include "tilejit/flex_variants.h"
#include "tilejit/numerics.h"

namespace tilejit::tools {

namespace {

/// A finite number ≥ 0 that stays finite as a float (CLI11's own range check accepts NaN and inf for floats).
const CLI::Validator kFiniteNonNegative(
    [](std::string &text) -> std::string {
      char *end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !std::isfinite(float(v)) || v < 0)
        return fmt::format("{} is not a finite number ≥ 0 (at most {:g})", text, double(FLT_MAX));
      return {};
    },
    "FINITE≥0");

/// "100,0,1,513": lengths ≥ 0, at least one, no empty items or trailing characters.
std::vector<int> parse_lengths(const std::string &text) {
  std::vector<int> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    int n = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
    if (item.empty() || ec != std::errc{} || ptr != item.data() + item.size() || n < 0)
      throw Error(fmt::format("--varlen '{}': '{}' is not a length (comma-separated integers ≥ 0, e.g. 100,0,513)",
                              text, item));
    out.push_back(n);
  }
  if (out.empty() || text.back() == ',')
    throw Error(fmt::format("--varlen '{}': give comma-separated lengths, e.g. 100,0,513", text));
  return out;
}

}  // namespace

void add_mod_flags(CLI::App *att, FlexFlags &f) {
  const auto sides = CLI::Range(int64_t(-1), std::numeric_limits<int64_t>::max());
  att->add_option("--window-left", f.window_left, "sliding window: keys up to this many before the query (-1: "
                                                  "unbounded; with --causal or --window-right 0 a causal window, "
                                                  "e.g. Mistral's 4096)")
      ->check(sides);
  att->add_option("--window-right", f.window_right, "sliding window: keys up to this many after the query (-1: unbounded)")
      ->check(sides);
  att->add_flag("--alibi", f.alibi, "ALiBi bias with the paper's slopes");
  att->add_option("--softcap", f.softcap, "tanh soft-capping of the scores (e.g. 50; 0: off)")->check(kFiniteNonNegative);
  att->add_flag("--band-as-mask", f.band_as_mask,
                "apply the causal / window band as a mask function, as a user's lambda would, instead of bounding the "
                "key loop in closed form");
}

void add_flex_flags(CLI::App *att, FlexFlags &f) {
  add_mod_flags(att, f);
  att->add_option("--gqa-kv-heads", f.gqa_kv_heads, "key/value heads (grouped-query attention)")
      ->check(CLI::Range(0, 65535));
  att->add_option("--varlen", f.varlen, "variable-length batch: comma-separated sequence lengths (for `attention`, "
                                        "replaces --batch, --seqlen-q and --seqlen-k)")
      ->each([&f](const std::string &) { f.varlen_given = true; });
  att->add_flag("--bottom-right", f.bottom_right, "align causal / window masks bottom-right");
}

bool flex_requested(const FlexFlags &f) {
  return f.window_left >= 0 || f.window_right >= 0 || f.alibi || f.softcap > 0 || f.gqa_kv_heads > 0 ||
         f.varlen_given || f.bottom_right || f.band_as_mask;
}

namespace {

}  // namespace

FlagMods flag_mods(const FlexFlags &f, bool causal, int heads_q, Backend be, const char *who) {
  using namespace attention;
  FlagMods m;
  // The same variant builder as the C ABI (kernels/flex/variants_builtin.h).
  flex::BuiltinSettings settings{.causal = causal,
                                 .align = f.bottom_right ? Align::BottomRight : Align::TopLeft,
                                 .window_left = f.window_left,
                                 .window_right = f.window_right,
                                 .alibi = f.alibi,
                                 .learnable_slopes = f.learnable_slopes,
                                 .softcap = f.softcap > 0};
  if (causal && f.window_right > 0)
    fmt::print(stderr, "tilejit: note: with --causal no key past the diagonal is seen; --window-right {} has no effect\n",
               f.window_right);
  std::optional<Band> built_band = flex::builtin_band(settings);
  if (f.band_as_mask && !built_band) throw Error("--band-as-mask needs --causal or a window");
  m.has_band = built_band.has_value();
  m.band = built_band.value_or(Band{});
  m.variant = flex::make_builtin_variant(settings, who);
  if (f.alibi) m.slopes_host = alibi_slopes(heads_q);  // (alibi_slopes rejects more heads than ALiBi has slopes for)
  m.slopes = Buffer(std::max<size_t>(m.slopes_host.size(), 1) * 4, be);
  if (!m.slopes_host.empty()) m.slopes.upload(m.slopes_host);
  if (f.alibi) m.variant.slopes.set(m.slopes);
  if (f.learnable_slopes && !f.alibi) throw Error("--learn-slopes needs --alibi");
  if (f.learnable_slopes) {
    m.slopes_grad = Buffer(m.slopes.bytes(), be);
    m.slopes_grad.fill_bytes(0);
    m.variant.slopes.set_grad(m.slopes_grad);
  }
  if (f.softcap > 0) m.variant.cap.set(double(f.softcap));
  m.mask = m.variant.mask;
  if (f.band_as_mask) m.mask = Mask(band_function(m.band));  // one object: later calls reuse its block mask
  m.score_mod = m.variant.score_mod;
  return m;
}

RefMods flag_ref_mods(const FlexFlags &f, const FlagMods &m, bool bottom_right) {
  RefMods r;
  if (f.alibi || f.softcap > 0) {
    std::vector<float> slopes = f.alibi ? m.slopes_host : std::vector<float>{};
    const double cap = f.softcap;
    r.score = [slopes, cap](double s, int, int h, int q, int kv) {
      if (!slopes.empty()) s -= slopes[size_t(h)] * std::abs(q - kv);
      return cap > 0 ? cap * std::tanh(s / cap) : s;
    };
  }
  if (m.has_band) {
    const attention::Band band = m.band;
    r.visible = [band, bottom_right](int, int, int q, int kv, int sq, int sk) {
      int64_t diag = q + (bottom_right ? sk - sq : 0);
      return !(band.left >= 0 && kv < diag - band.left) && !(band.right >= 0 && kv > diag + band.right);
    };
  }
  return r;
}

namespace {
// The setup's options with placeholder cu_seqlens when it is varlen: for calls that read no memory (checks, dumps).
attention::FlexOptions without_memory(const FlexSetup &x) {
  attention::FlexOptions opt = x.opt;
  if (!x.lens.empty()) opt.cu_seqlens_q = opt.cu_seqlens_k = DevicePtr{256, 0};
  return opt;
}
}  // namespace

FlexSetup flex_setup(const FlexFlags &f, const FlexRunArgs &a, Backend be) {
  using namespace attention;
  FlexSetup x;
  if (a.dtype != "bf16" && a.dtype != "f16")
    throw Error(fmt::format("--dtype {}: flex attention runs on bf16 or f16 tensors", a.dtype));
  x.dt = a.dtype == "f16" ? DType::f16 : DType::bf16;
  x.s = {.batch = a.batch, .heads_q = a.heads, .heads_kv = f.gqa_kv_heads, .seqlen_q = a.seqlen_q,
         .seqlen_k = a.seqlen_k < 0 ? a.seqlen_q : a.seqlen_k, .head_dim_qk = a.head_dim};
  if (f.varlen_given) {
    const std::vector<int> lens = parse_lengths(f.varlen);
    double tokens = 0;
    for (int n : lens) tokens += n;
    const double elems = tokens * std::max(a.heads, f.gqa_kv_heads) * a.head_dim;
    if (elems > double(1u << 31))
      throw Error(fmt::format("--varlen '{}': {:.3g} tokens; the tensors would hold {:.3g} elements each, at most 2^31",
                              f.varlen, tokens, elems));
    if (tokens >= double(1u << 31))
      throw Error(fmt::format("--varlen '{}': {:.3g} tokens; at most 2^31 − 1", f.varlen, tokens));
    for (int n : lens) {
      x.lens.push_back(n);
      x.cu.push_back(x.cu.back() + n);
    }
    x.s.batch = int(x.lens.size());
    x.s.seqlen_q = x.s.seqlen_k = x.lens.empty() ? 0 : *std::max_element(x.lens.begin(), x.lens.end());
    x.s.total_q = x.s.total_k = x.cu.back();
  }
  x.Hkv = x.s.heads_kv ? x.s.heads_kv : x.s.heads_q;
  FlexOptions &opt = x.opt;
  opt.dtype = x.dt;
  opt.block_m = a.block_m;
  opt.block_n = a.block_n;
  opt.num_warps = a.num_warps;
  opt.num_stages = a.num_stages;
  opt.tma = a.tma;
  opt.warp_specialize = a.warp_specialize;
  opt.min_ctas_per_sm = a.min_ctas;
  opt.autotune = a.autotune;
  opt.backend = be;
  opt.arch = a.arch;
  if (f.bottom_right && !flex::builtin_band({.causal = a.causal, .window_left = f.window_left,
                                              .window_right = f.window_right}))
    throw Error("--bottom-right needs --causal or a window");
  x.mods = flag_mods(f, a.causal, x.s.heads_q, be, "tilejit attention");
  opt.mask = x.mods.mask;
  opt.score_mod = x.mods.score_mod;
  // The library's checks before any input is allocated and filled: a bad shape fails at once.
  flex_check(x.s, without_memory(x));
  return x;
}

std::string flex_code(const FlexFlags &f, const FlexRunArgs &a, bool ptx) {
  const FlexSetup x = flex_setup(f, a, Backend::Interpreter);  // no GPU needed: nothing runs
  const attention::FlexOptions opt = without_memory(x);
  return ptx ? attention::flex_forward_ptx(x.s, opt) : attention::flex_forward_ir(x.s, opt);
}

int run_flex(const FlexFlags &f, const FlexRunArgs &a) {
  using namespace attention;
  Backend be = parse_backend(a.backend);
  FlexSetup x = flex_setup(f, a, be);
  FlexShape &s = x.s;
  FlexOptions &opt = x.opt;
  const std::vector<int> &lens = x.lens, &cu = x.cu;
  const DType dt = x.dt;
  const int Hkv = x.Hkv;
  const bool has_band = x.mods.has_band;
  const Band band = x.mods.band;
  const std::vector<float> slopes = f.alibi ? alibi_slopes(s.heads_q) : std::vector<float>{};  // the reference's

  bool varlen = !lens.empty();
  size_t rows_q = varlen ? size_t(s.total_q) : size_t(s.batch) * s.seqlen_q;
  size_t rows_k = varlen ? size_t(s.total_k) : size_t(s.batch) * s.seqlen_k;
  size_t nq = rows_q * s.heads_q * a.head_dim, nk = rows_k * Hkv * a.head_dim, nl = rows_q * s.heads_q;
  uint64_t seed = a.seed ? a.seed : std::random_device{}();
  std::mt19937_64 rng(seed);
  auto make = [&](size_t n, std::vector<float> &vals) { return random_buffer(n, dt, rng, be, vals); };
  std::vector<float> qf, kf, vf;
  Buffer q = make(nq, qf), k = make(nk, kf), v = make(nk, vf);
  Buffer out(std::max<size_t>(nq, 1) * 2, be), lse(std::max<size_t>(nl, 1) * 4, be);
  out.fill_bytes(0xff);
  lse.fill_bytes(0xff);
  Buffer cub;
  if (varlen) {
    cub = Buffer(cu.size() * 4, be);
    cub.upload(cu);
    opt.cu_seqlens_q = opt.cu_seqlens_k = {cub.address(), cub.bytes()};
  }
  std::optional<Stream> stream;
  if (be == Backend::GPU) {
    stream.emplace();
    opt.stream = &*stream;
  }
  const CallTimes t = time_calls([&] { flex_forward(q, k, v, out, lse, s, opt); }, opt.stream, a.iters);
  const double first_ms = t.first_ms, ms = t.median_ms;
  fmt::print("flex attention {} b={} hq={} hkv={} sq={} sk={} d={} dtype={} band={} alibi={} softcap={} varlen={}\n",
             be == Backend::GPU ? "gpu" : "interp", s.batch, s.heads_q, Hkv, s.seqlen_q, s.seqlen_k, a.head_dim,
             a.dtype, has_band ? fmt::format("[{}, {}]{}{}", band.left, band.right, f.bottom_right ? " bottom-right" : "",
                                             f.band_as_mask ? " as a mask function" : "")
                               : "none",
             f.alibi, f.softcap, f.varlen_given ? f.varlen : "no");
  if (be == Backend::GPU)
    fmt::print("  first call (trace+compile+run): {:.2f} ms; time: {:.3f} ms (median of {} launches)\n", first_ms, ms,
               std::max(1, a.iters));
  else
    fmt::print("  time: {:.1f} ms (trace + one run on the CPU interpreter)\n", first_ms);
  if (!a.check) return 0;

  // Float64 reference for sampled rows (the first and last, and random ones) of up to 8 (sequence, head)
  // pairs: every row of a long sequence would cost O(seqlen²·D) per pair on the host.
  auto ob = out.download_as<uint16_t>(nq);
  auto lb = lse.download_as<float>(nl);
  double scale = 1.0 / std::sqrt(double(a.head_dim)), err2 = 0, ref2 = 0, lse_err = 0;
  int D = a.head_dim, group = s.heads_q / Hkv;
  const int pairs = std::min(8, s.batch * s.heads_q), rows_per_pair = std::max(2, a.check_rows / std::max(pairs, 1));
  int checked = 0;
  const std::vector<int> sequences =
      sequences_to_sample(s.batch, [&](int b) { return varlen ? lens[size_t(b)] : s.seqlen_q; });
  for (int pair = 0; pair < std::min(8, s.batch * s.heads_q); ++pair) {
    int b = sequences[size_t(rng() % sequences.size())], h = int(rng() % uint64_t(s.heads_q)), kh = h / group;
    int sq = varlen ? lens[size_t(b)] : s.seqlen_q, sk = varlen ? lens[size_t(b)] : s.seqlen_k;
    auto row_of = [&](int i, int heads, int hh, int seqlen) -> size_t {
      return varlen ? (size_t(cu[size_t(b)] + i) * heads + hh) * D : ((size_t(b) * heads + hh) * seqlen + i) * D;
    };
    std::vector<int> rows;
    for (int r = 0; r < std::min(sq, rows_per_pair); ++r)
      rows.push_back(r == 0 ? 0 : r == 1 ? sq - 1 : int(rng() % uint64_t(sq)));
    for (int i : rows) {
      std::vector<double> p(size_t(std::max(sk, 1)), -INFINITY);
      double mx = -INFINITY;
      for (int j = 0; j < sk; ++j) {
        if (has_band) {
          int64_t diag = i + (f.bottom_right ? sk - sq : 0);
          if ((band.left >= 0 && j < diag - band.left) || (band.right >= 0 && j > diag + band.right)) continue;
        }
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += double(qf[row_of(i, s.heads_q, h, s.seqlen_q) + d]) * kf[row_of(j, Hkv, kh, s.seqlen_k) + d];
        double sc = dot * scale;
        if (f.alibi) sc -= slopes[size_t(h)] * std::abs(i - j);
        if (f.softcap > 0) sc = f.softcap * std::tanh(sc / f.softcap);
        p[size_t(j)] = sc;
        mx = std::max(mx, sc);
      }
      size_t lrow = varlen ? size_t(h) * s.total_q + cu[size_t(b)] + i : (size_t(b) * s.heads_q + h) * s.seqlen_q + i;
      ++checked;
      if (mx == -INFINITY) {  // a row that sees no key: output 0, lse −inf
        lse_err = std::max(lse_err, std::isinf(lb[lrow]) && lb[lrow] < 0 ? 0.0 : INFINITY);
        for (int d = 0; d < D; ++d) {
          uint16_t bits = ob[row_of(i, s.heads_q, h, s.seqlen_q) + d];
          double got = dt == DType::bf16 ? bf16_to_float(bits) : f16_to_float(bits);
          err2 += got * got;
        }
        continue;
      }
      double sum = 0;
      for (auto &x : p) sum += (x = std::exp(x - mx));
      for (int d = 0; d < D; ++d) {
        double o = 0;
        for (int j = 0; j < sk; ++j) o += p[size_t(j)] * vf[row_of(j, Hkv, kh, s.seqlen_k) + d];
        o /= sum;
        uint16_t bits = ob[row_of(i, s.heads_q, h, s.seqlen_q) + d];
        double got = dt == DType::bf16 ? bf16_to_float(bits) : f16_to_float(bits);
        err2 += (got - o) * (got - o);
        ref2 += o * o;
      }
      lse_err = std::max(lse_err, std::abs(double(lb[lrow]) - (mx + std::log(sum))));
    }
  }
  if (checked == 0) {
    fmt::print("  check: no rows to check (every sampled sequence is empty)\n");
    return 0;
  }
  double rel = std::sqrt(err2 / std::max(ref2, 1e-300));
  // Same bounds and line as the plain kernel's check (tools/tilejit.cpp), the lse bound growing with log
  // seqlen_k as the mods' scores can reach further.
  const double tol = 1e-2, lse_tol = 1e-3 * std::max(1.0, std::log(double(std::max(s.seqlen_k, 1))) + 4);
  bool ok = rel <= tol && lse_err <= lse_tol;
  fmt::print("  check ({} sampled rows vs float64, seed {}): rel. Frobenius error {:.3e} (bound {:.0e}), max |lse "
             "error| {:.3e} (bound {:.1e}): {}\n", checked, seed, rel, tol, lse_err, lse_tol, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace tilejit::tools
