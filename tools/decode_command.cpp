// `tilejit decode`, tools/decode_command.h.
#include "tools/decode_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "kernels/paged/paged_cache.h"
#include "tilejit/error.h"
#include "tilejit/numerics.h"
#include "tilejit/paged_attention.h"
#include "tilejit/timer.h"
#include "tools/backend_flag.h"
#include "tools/flex_flags.h"
#include "tools/paged_check.h"

namespace tilejit::tools {
namespace {

struct DecodeArgs {
  int batch = 8, heads_q = 32, heads_kv = 8, context = 4096, seqlen_q = 1, page_size = 16, head_dim = 128;
  bool causal = false, exact_context = false, check = false;
  std::string dtype = "bf16", backend = "auto", arch;
  int num_splits = 0, block_n = 0, num_warps = 0, num_stages = 0, iters = 50, check_pairs = 64;
  uint64_t seed = 0;
  FlexFlags mods;
};
DecodeArgs g_args;
CLI::App *g_cmd = nullptr;

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

Buffer upload(const std::vector<uint16_t> &bits, Backend be) {
  Buffer b(std::max<size_t>(bits.size(), 1) * 2, be);
  if (!bits.empty()) b.upload(bits);
  return b;
}
Buffer upload(const std::vector<int32_t> &v, Backend be) {
  Buffer b(std::max<size_t>(v.size(), 1) * 4, be);
  if (!v.empty()) b.upload(v);
  return b;
}
DevicePtr ptr(const Buffer &b) { return {b.address(), b.bytes()}; }

std::string mods_text(const DecodeArgs &a, const FlagMods &m) {
  std::string t;
  if (m.has_band)
    t += fmt::format(" band=[{}, {}]{}", m.band.left, m.band.right, a.mods.band_as_mask ? " as a mask function" : "");
  if (a.mods.alibi) t += " alibi";
  if (a.mods.softcap > 0) t += fmt::format(" softcap={:g}", a.mods.softcap);
  return t.empty() ? " none" : t;
}

}  // namespace

CLI::App *add_decode_command(CLI::App &app) {
  DecodeArgs &a = g_args;
  auto *c = app.add_subcommand("decode", "run a decode step over a paged KV cache (paged_kv_append, then DecodePlan) "
                                         "on random inputs, time it, optionally check it");
  const auto positive = CLI::Range(1, std::numeric_limits<int>::max());
  c->add_option("--batch", a.batch, "sequences")->check(positive);
  c->add_option("--heads-q", a.heads_q, "query heads")->check(positive);
  c->add_option("--heads-kv", a.heads_kv, "key/value heads (heads-q must be a multiple)")->check(positive);
  c->add_option("--context", a.context, "longest sequence in the cache, new tokens included (lengths are random "
                                        "from seqlen-q to this, or exactly this with --exact-context)")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()));
  c->add_flag("--exact-context", a.exact_context, "every sequence exactly --context tokens long");
  c->add_option("--seqlen-q", a.seqlen_q, "new tokens per sequence (1 … 16)");
  c->add_option("--page-size", a.page_size, "tokens per page (a power of two, 1 … 256)");
  c->add_option("--head-dim", a.head_dim, "head dimension (16 … 256)");
  c->add_flag("--causal", a.causal, "causal mask among the new tokens (positions L − seqlen_q + i)");
  c->add_option("--dtype", a.dtype, "bf16 or f16")->check(CLI::IsMember({"bf16", "f16"}));
  c->add_option("--backend", a.backend, "gpu, interp (CPU interpreter) or auto")
      ->check(CLI::IsMember({"gpu", "interp", "auto"}));
  c->add_option("--arch", a.arch, "GPU arch (default: the device's)")
      ->check(CLI::IsMember({"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"}));
  c->add_option("--num-splits", a.num_splits, "KV splits per sequence (0: the library's choice)");
  c->add_option("--block-n", a.block_n, "keys per block (0: the library's choice)");
  c->add_option("--num-warps", a.num_warps, "num_warps (0: the library's choice)");
  c->add_option("--num-stages", a.num_stages, "num_stages (0: the library's choice)");
  c->add_option("--iters", a.iters, "timed steps (GPU)")->check(CLI::Range(1, 1000000));
  c->add_flag("--check", a.check, "compare sampled (sequence, head) pairs against a float64 reference");
  c->add_option("--check-pairs", a.check_pairs, "(sequence, head) pairs checked (0: all)")
      ->check(CLI::Range(0, 1 << 30));
  c->add_option("--seed", a.seed, "random seed (0: a random one, printed)");
  add_mod_flags(c, a.mods);
  g_cmd = c;
  return c;
}

int run_decode_command() {
  using namespace attention;
  const DecodeArgs &a = g_args;
  const Backend be = parse_backend(a.backend);
  const bool gpu = be == Backend::GPU;
  const DType dt = a.dtype == "f16" ? DType::f16 : DType::bf16;
  if (!gpu && !a.arch.empty()) fmt::print(stderr, "tilejit: note: --arch has no effect on the interpreter\n");
  if (a.context < a.seqlen_q)
    throw Error(fmt::format("--context {} must be at least --seqlen-q {} (the lengths include the new tokens)",
                            a.context, a.seqlen_q));
  double cache_elems = double(a.batch) * (double(a.context) + a.page_size) * a.heads_kv * a.head_dim * 2;
  if (cache_elems > double(1ull << 34))
    throw Error(fmt::format("--batch {} × (--context {} + --page-size {}) × --heads-kv {} × --head-dim {} × 2 (K and "
                            "V): the cache would hold {:.3g} elements; at most 2^34",
                            a.batch, a.context, a.page_size, a.heads_kv, a.head_dim, cache_elems));

  const uint64_t seed = a.seed ? a.seed : std::random_device{}();
  std::mt19937_64 rng(seed);
  HostCacheSpec spec;
  std::uniform_int_distribution<int> len(a.seqlen_q, a.context);
  spec.page_size = a.page_size;
  spec.heads_kv = a.heads_kv;
  spec.head_dim = a.head_dim;
  spec.dtype = dt;
  spec.spare_pages = a.batch;  // pages no sequence uses, shuffled in among the others
  // The mods (and their errors) before building anything large.
  FlagMods mods = flag_mods(a.mods, a.causal, a.heads_q, be, "tilejit decode");
  DecodeOptions opt;
  opt.score_mod = mods.score_mod;
  opt.mask = mods.mask;
  opt.num_splits = a.num_splits;
  opt.block_n = a.block_n;
  opt.num_warps = a.num_warps;
  opt.num_stages = a.num_stages;
  opt.backend = be;
  opt.arch = a.arch;
  {
    // The cache's sizes and the step's shape checked as the library checks them, before the host model
    // allocates anything.
    PagedKVCache sizes;
    sizes.dtype = dt;
    sizes.page_size = a.page_size;
    sizes.head_dim = a.head_dim;
    sizes.heads_kv = a.heads_kv;
    const DecodeShape step{.batch = a.batch, .heads_q = a.heads_q, .seqlen_q = a.seqlen_q, .max_seq_len = a.context};
    paged::check_decode_request(step, paged::cache_layout(sizes, "tilejit decode"), opt, "tilejit decode");
  }
  for (int b = 0; b < a.batch; ++b) spec.seq_lens.push_back(a.exact_context ? a.context : len(rng));
  HostPagedCache host = make_host_cache(spec, rng);

  // The pages start as NaN: a read of a slot no token was written to shows in the output.
  Buffer k(std::max<size_t>(host.k_bits.size(), 1) * 2, be), v(std::max<size_t>(host.v_bits.size(), 1) * 2, be);
  k.fill_bytes(0xff);
  v.fill_bytes(0xff);
  Buffer table = upload(host.block_table, be), lens = upload(host.seq_lens, be);
  PagedKVCache cache;
  cache.k_pages = ptr(k);
  cache.v_pages = ptr(v);
  cache.block_table = ptr(table);
  cache.seq_lens = ptr(lens);
  cache.dtype = dt;
  cache.num_pages = host.num_pages;
  cache.page_size = host.page_size;
  cache.heads_kv = host.heads_kv;
  cache.head_dim = host.head_dim;
  cache.max_pages_per_seq = host.max_pages_per_seq;

  std::optional<Stream> stream;
  if (gpu) stream.emplace();
  Stream *s = stream ? &*stream : nullptr;
  auto sync = [&] { if (stream) stream->synchronize(); };
  {
    AppendBatch tokens = append_batch(host, {}, {}, a.batch, rng);
    Buffer kn = upload(tokens.k_bits, be), vn = upload(tokens.v_bits, be), slots = upload(tokens.slots, be);
    auto t0 = Clock::now();
    paged_kv_append(cache, ptr(kn), ptr(vn), ptr(slots), tokens.tokens, {.backend = be, .stream = s});
    sync();
    fmt::print("append: {} tokens, and {} padding slot{} (negative: skipped) in {:.2f} ms{}\n",
               tokens.tokens - a.batch, a.batch, a.batch == 1 ? "" : "s", ms_since(t0),
               gpu ? " (first call: trace + compile + run)" : " (trace + one run on the CPU interpreter)");
  }

  QueryLayout layout = decode_layout(a.batch, a.seqlen_q, a.heads_q, a.head_dim, a.head_dim);
  std::vector<uint16_t> q_bits = random_bits(layout.q_elements, dt, rng);
  std::vector<float> q_vals(q_bits.size());
  for (size_t i = 0; i < q_bits.size(); ++i) q_vals[i] = host.value(q_bits[i]);
  Buffer q = upload(q_bits, be);
  Buffer out(std::max<size_t>(layout.out_elements, 1) * 2, be), lse(std::max<size_t>(layout.lse_elements, 1) * 4, be);
  out.fill_bytes(0xff);  // NaN: an element the step does not write cannot pass the check
  lse.fill_bytes(0xff);

  DecodeShape shape{.batch = a.batch, .heads_q = a.heads_q, .seqlen_q = a.seqlen_q, .max_seq_len = a.context};
  auto t0 = Clock::now();
  DecodePlan plan(shape, cache, opt);
  double plan_ms = ms_since(t0);
  t0 = Clock::now();
  plan.run(ptr(q), ptr(out), ptr(lse), cache, s);
  sync();
  double first_ms = ms_since(t0);

  int64_t tokens = 0;
  int shortest = a.context, longest = 0;
  for (int n : host.seq_lens) tokens += n, shortest = std::min(shortest, n), longest = std::max(longest, n);
  fmt::print("decode {} b={} hq={} hkv={} sq={} d={} page={} ({} pages, shuffled) context={}…{} (mean {:.0f}) "
             "dtype={} mods:{} splits={} block_n={}\n",
             gpu ? "gpu" : "interp", a.batch, a.heads_q, a.heads_kv, a.seqlen_q, a.head_dim, a.page_size,
             host.num_pages, shortest, longest, double(tokens) / a.batch, a.dtype, mods_text(a, mods),
             plan.num_splits(), plan.block_n());
  if (gpu) {
    GpuTimer timer;
    timer.start(s);
    for (int i = 0; i < a.iters; ++i) plan.run(ptr(q), ptr(out), ptr(lse), cache, s);
    timer.stop(s);
    double ms = timer.milliseconds() / a.iters;
    double bytes = double(tokens) * a.heads_kv * a.head_dim * 2 * 2;  // K and V read once per group
    fmt::print("  plan (trace + compile + load): {:.2f} ms; first run {:.3f} ms\n", plan_ms, first_ms);
    fmt::print("  time: {:.4f} ms per step (mean of {} back-to-back runs), K/V read at {:.0f} GB/s\n", ms, a.iters,
               bytes / (ms * 1e-3) / 1e9);
  } else {
    fmt::print("  time: plan {:.1f} ms, run {:.1f} ms (CPU interpreter)\n", plan_ms, first_ms);
    if (g_cmd->count("--iters") > 0)
      fmt::print(stderr, "tilejit: note: --iters has no effect on the interpreter (one run)\n");
  }
  if (!a.check) return 0;

  // Every element must have been written (the poison is NaN), then sampled pairs against float64.
  std::vector<uint16_t> ob(layout.out_elements);
  if (!ob.empty()) out.download(ob.data(), ob.size() * 2);
  std::vector<float> lb(layout.lse_elements);
  if (!lb.empty()) lse.download(lb.data(), lb.size() * 4);
  size_t unwritten = 0;
  for (uint16_t x : ob) unwritten += std::isnan(host.value(x));
  for (float x : lb) unwritten += std::isnan(x);
  if (unwritten) {
    fmt::print("  CHECK FAILED: {} of {} output and lse elements are NaN (unwritten, or a read of an unwritten "
               "page slot), seed {}\n", unwritten, ob.size() + lb.size(), seed);
    return 1;
  }
  const int pairs = a.batch * a.heads_q;
  // Exactly --check-pairs pairs: always the first and the last, the rest drawn at random.
  std::vector<char> picked(static_cast<size_t>(pairs), 1);
  if (a.check_pairs > 0 && a.check_pairs < pairs) {
    std::fill(picked.begin(), picked.end(), 0);
    picked[0] = 1;
    if (a.check_pairs > 1) picked[size_t(pairs - 1)] = 1;
    std::vector<int> middle(size_t(pairs - 2)), drawn;
    std::iota(middle.begin(), middle.end(), 1);
    std::sample(middle.begin(), middle.end(), std::back_inserter(drawn), std::max(a.check_pairs - 2, 0), rng);
    for (int i : drawn) picked[size_t(i)] = 1;
  }
  auto select = [&](int b, int h) { return picked[size_t(b * a.heads_q + h)] != 0; };
  RefMods ref_mods = flag_ref_mods(a.mods, mods, false);
  PagedRef ref = paged_reference(host, q_vals, layout, a.heads_q, 1.0 / std::sqrt(double(a.head_dim)), ref_mods,
                                 select);
  double err2 = 0, ref2 = 0, lse_err = 0;
  int empty_bad = 0;
  for (int b = 0; b < a.batch; ++b)
    for (int h = 0; h < a.heads_q; ++h) {
      if (!select(b, h)) continue;
      for (int i = 0; i < a.seqlen_q; ++i) {
        size_t lrow = size_t(layout.lse_base(b, h) + i * layout.lse_row_stride);
        size_t orow = size_t(layout.out_base(b, h) + i * layout.out_row_stride);
        bool empty = std::isinf(ref.lse[lrow]);
        if (empty) empty_bad += !(std::isinf(lb[lrow]) && lb[lrow] < 0);
        else
          lse_err = std::max(lse_err, std::abs(lb[lrow] - ref.lse[lrow]) / std::max(1.0, std::abs(ref.lse[lrow])));
        for (int d = 0; d < a.head_dim; ++d) {
          double got = host.value(ob[orow + size_t(d)]), want = ref.out[orow + size_t(d)];
          if (empty) empty_bad += got != 0.0;
          err2 += (got - want) * (got - want);
          ref2 += want * want;
        }
      }
    }
  double rel = std::sqrt(err2 / std::max(ref2, 1e-300));
  // Tolerances relative to float64, as the tests state them (f32 accumulation; inputs and outputs in the dtype).
  const double tol = dt == DType::f16 ? 5e-3 : 1e-2, lse_tol = 1e-3;
  bool ok = rel <= tol && lse_err <= lse_tol && empty_bad == 0;
  fmt::print("  check ({} rows of {} (sequence, head) pairs vs float64, {} seeing no key, seed {}): rel. Frobenius "
             "error {:.3e} (bound {:.0e}), max relative |lse error| {:.3e} (bound {:.0e}){}: {}\n",
             ref.rows, std::count(picked.begin(), picked.end(), 1), ref.empty_rows, seed, rel, tol, lse_err, lse_tol,
             empty_bad ? fmt::format(", {} values of rows seeing no key not 0 / −inf", empty_bad) : "",
             ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace tilejit::tools
