// The paged decode and chunked-prefill checks, shared by the CPU (interpreter) and GPU test binaries: each
// builds a modelled cache (shuffled page tables, unused pages, random values everywhere), runs the op on fresh
// random queries with poisoned outputs, and compares against the float64 reference (paged_reference.h; the
// tolerances are stated there: bf16 output 1e-2 relative Frobenius, f16 5e-3, lse 1e-3·max(1, |lse|), rows
// that see no key exactly 0 and −inf). The CPU tests call them with small head dims, the GPU tests with the
// serving shapes.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/flex/flex_internal.h"
#include "paged_reference.h"
#include "tilejit/flex_variants.h"
#include "tilejit/ops.h"

namespace tilejit::testing {

using attention::DecodeOptions;

inline DecodeOptions decode_options(int block_n = 16, int num_splits = 0) {
  DecodeOptions o;
  o.block_n = block_n;
  o.num_splits = num_splits;
  return o;
}

inline const char *strides_name(PagedStrides s) {
  return s == PagedStrides::Contiguous ? "contiguous" : s == PagedStrides::Padded ? "padded" : "heads-major";
}

/// Context lengths at the pages' edges — 0, 1, P − 1, P, P + 1 — and one long one, in one batch, seqlen_q 1,
/// no mod: every row of a sequence of length 0 sees nothing.
inline void check_decode_context_edges(Backend be, int page_size, PagedStrides strides, int head_dim, int head_dim_v,
                                       int long_len, int heads_q = 8, int heads_kv = 2, int block_n = 16) {
  const int P = page_size;
  std::vector<int> lens{0, 1, P - 1, P, P + 1, long_len};
  INFO("page size " << P << ", " << strides_name(strides) << " strides, head dims " << head_dim << "/"
                    << (head_dim_v ? head_dim_v : head_dim) << ", lengths 0, 1, " << P - 1 << ", " << P << ", "
                    << P + 1 << ", " << long_len);
  DeviceCache d = make_device_cache(be, paged_spec(lens, P, heads_kv, head_dim, strides, head_dim_v));
  FlexResult r = check_decode(be, d, heads_q, 1, decode_options(block_n), {});
  int zero = int(std::count(lens.begin(), lens.end(), 0));
  REQUIRE(r.empty_rows == zero * heads_q);
}

/// Page sizes outside 1 … 256 or not powers of two: DecodePlan and paged_decode name the value.
inline void check_decode_rejects_page_size(Backend be, int page_size) {
  DeviceCache d = make_device_cache(be, paged_spec({10, 20}, 16, 2, 32));
  attention::PagedKVCache c = d.cache;
  c.page_size = page_size;
  attention::DecodeShape shape{.batch = 2, .heads_q = 4, .seqlen_q = 1};
  DecodeOptions o = decode_options();
  o.backend = be;
  std::string value = fmt::format("page_size {}", page_size);
  require_trace_error([&] { attention::DecodePlan plan(shape, c, o); }, {value});
  DecodeRun run = prepare_decode(be, d, 4, 1);
  require_trace_error(
      [&] { attention::paged_decode(device_ptr(run.q.buffer), device_ptr(run.out), device_ptr(run.lse), c, shape, o); },
      {value});
}

/// GQA groups of heads_q / heads_kv (1: MHA; heads_kv 1: MQA), with seqlen_q 1 and, causal, 4.
inline void check_decode_gqa(Backend be, int heads_q, int heads_kv, int head_dim, std::vector<int> lens,
                             int block_n = 16) {
  DeviceCache d = make_device_cache(be, paged_spec(lens, 16, heads_kv, head_dim));
  for (int sq : {1, 4}) {
    INFO("heads_q " << heads_q << ", heads_kv " << heads_kv << ", seqlen_q " << sq);
    DecodeOptions o = decode_options(block_n);
    if (sq > 1) o.mask = attention::causal_top_left();
    check_decode(be, d, heads_q, sq, o, sq > 1 ? ref_causal() : RefMods{});
  }
}

/// seqlen_q new tokens per sequence, causal among themselves and over the cache; the lengths include them
/// (each ≥ seqlen_q, or 0: a sequence with nothing in it). Also without a mask (every query sees every key).
inline void check_decode_seqlen_q(Backend be, int seqlen_q, int page_size, int head_dim, int long_len,
                                  int block_n = 16) {
  const int sq = seqlen_q, P = page_size;
  std::vector<int> lens{0, sq};
  for (int n : {sq + 1, P - 1, P, P + 1, long_len})
    if (n >= sq) lens.push_back(n);
  INFO("seqlen_q " << sq << ", page size " << P);
  DeviceCache d = make_device_cache(be, paged_spec(lens, P, 2, head_dim, PagedStrides::Padded));
  DecodeOptions o = decode_options(block_n);
  o.mask = attention::causal_top_left();
  FlexResult r = check_decode(be, d, 8, sq, o, ref_causal());
  REQUIRE(r.empty_rows == 8 * sq);  // the sequence of length 0
  check_decode(be, d, 8, sq, decode_options(block_n), {});
}

/// Every built-in mod, combinations, and user lambdas (a score_mod reading positions and mod_seqlen_k(), a mask
/// reading b, h and mod_seqlen_q()), at seqlen_q 1 and 4.
inline void check_decode_mods(Backend be, int head_dim, int long_len, int block_n = 16) {
  const int Hq = 8, Hkv = 2;
  for (int sq : {1, 4}) {
    std::vector<int> lens{0, sq, 15, 16, 17, long_len};
    DeviceCache d = make_device_cache(be, paged_spec(lens, 16, Hkv, head_dim));
    std::vector<float> slopes_host = attention::alibi_slopes(Hq);
    Buffer slopes(slopes_host.size() * 4, be);
    slopes.upload(slopes_host);
    auto slopes_cap = capture(slopes, DType::f32);
    auto alibi_ref = [slopes_host](double s, int, int h, int q, int kv) {
      return s - double(slopes_host[size_t(h)]) * std::abs(q - kv);
    };
    const double cap = 2.0;  // with softmax_scale 1 the scores reach past it
    auto softcap_ref = [cap](double s, int, int, int, int) { return cap * std::tanh(s / cap); };
    auto causal = [](int, int, int q, int kv, int, int) { return kv <= q; };
    struct Case {
      std::string name;
      attention::ScoreMod score;
      attention::Mask mask;
      RefMods ref;
      float scale = 0.f;
    };
    std::vector<Case> cases;
    cases.push_back({"causal", {}, attention::causal_top_left(), ref_causal()});
    cases.push_back({"alibi", attention::alibi(slopes_cap), {}, {alibi_ref, {}}});
    cases.push_back({"alibi, causal", attention::alibi(slopes_cap), attention::causal_top_left(), {alibi_ref, causal}});
    cases.push_back({"softcap 2", attention::softcap(float(cap)), {}, {softcap_ref, {}}, 1.f});
    cases.push_back(
        {"alibi then softcap 2, causal",
         attention::compose(attention::alibi(slopes_cap), attention::softcap(float(cap))),
         attention::causal_top_left(),
         {[=](double s, int b, int h, int q, int kv) { return softcap_ref(alibi_ref(s, b, h, q, kv), b, h, q, kv); },
          causal},
         1.f});
    cases.push_back({"sliding window 40 back", {}, attention::sliding_window(40, 0), ref_band_positions(40, 0)});
    cases.push_back({"sliding window 8 each side", {}, attention::sliding_window(8, 8), ref_band_positions(8, 8)});
    cases.push_back({"window 20 back, softcap 2 (Gemma 2)",
                     attention::softcap(float(cap)),
                     attention::sliding_window(19, 0),
                     {softcap_ref, ref_band_positions(19, 0).visible},
                     1.f});
    std::vector<int32_t> L = d.host.seq_lens;  // the user score_mod reads mod_seqlen_k(), each sequence's L
    cases.push_back({"user score_mod", attention::ScoreMod([](Tile s, Tile b, Tile h, Tile q, Tile kv) {
                       Tile from_end = (attention::mod_seqlen_k() - kv).to(DType::f32);
                       return s * 0.75f - from_end * 0.01f + where((q + kv + h + b) % 3 == 0, 0.5f, 0.f);
                     }),
                     {},
                     {[L](double s, int b, int h, int q, int kv) {
                        return s * 0.75 - 0.01 * double(L[size_t(b)] - kv) + ((q + kv + h + b) % 3 == 0 ? 0.5 : 0.0);
                      },
                      {}}});
    cases.push_back({"user mask",
                     {},
                     attention::Mask([](Tile b, Tile h, Tile q, Tile kv) {
                       return (kv <= q) & ((kv + b) % 4 != h % 4) & (q - kv < attention::mod_seqlen_q() * 30);
                     }),
                     {{}, [](int b, int h, int q, int kv, int sq_, int) {
                        return kv <= q && (kv + b) % 4 != h % 4 && q - kv < sq_ * 30;
                      }}});
    attention::Mask not_h = attention::Mask([](Tile, Tile h, Tile, Tile kv) { return (kv % 7) != h; });
    cases.push_back({"user mask and window 64", {}, attention::and_masks(attention::sliding_window(64, 0), not_h),
                     {{}, [](int, int h, int q, int kv, int, int) { return kv <= q && kv >= q - 64 && kv % 7 != h; }}});
    for (const Case &c : cases) {
      INFO(c.name << ", seqlen_q " << sq);
      DecodeOptions o = decode_options(block_n);
      o.score_mod = c.score;
      o.mask = c.mask;
      o.softmax_scale = c.scale;
      check_decode(be, d, Hq, sq, o, c.ref);
    }
  }
}

/// A sliding window written as a lambda over a captured size: its implied band skips the pages outside the
/// window, and one plan follows the capture's value from run to run (the band's sides are taken at each run).
inline void check_decode_captured_window(Backend be, int head_dim, int long_len, int block_n = 16) {
  const int Hq = 8, Hkv = 2, sq = 2;
  DeviceCache d = make_device_cache(be, paged_spec({0, sq, 17, 40, long_len}, 16, Hkv, head_dim));
  Captured w = capture(int32_t(5));
  DecodeOptions o = decode_options(block_n);
  o.backend = be;
  o.mask = attention::Mask([w](Tile, Tile, Tile q, Tile kv) { return (kv <= q) & (q - kv <= w()); });
  DecodeRun run = prepare_decode(be, d, Hq, sq);
  attention::DecodeShape shape{.batch = d.host.batch, .heads_q = Hq, .seqlen_q = sq};
  attention::DecodePlan plan(shape, d.cache, o);
  auto kernel = attention::flex::flex_kernel(d.host.dtype, {}, o.mask);
  const size_t compiled = kernel->num_specializations();
  // 0 and 32 are divisible by 16, the plan's 5 is not: run() widens such a side by one instead of compiling.
  for (int window : {5, 40, 3, 0, 32, long_len}) {
    INFO("window " << window << " (captured), one plan");
    w.set_int(window);
    run.out.fill_bytes(0xff);
    run.lse.fill_bytes(0xff);
    plan.run(device_ptr(run.q.buffer), device_ptr(run.out), device_ptr(run.lse), d.cache);
    FlexResult r = decode_result(run, d, Hq, o.softmax_scale, ref_band_positions(window, 0));
    require_paged_matches(r, d.host.dtype, run.layout, Hq, d.host.head_dim_v);
    CHECK(kernel->num_specializations() == compiled);
  }
}

/// A soft-cap over a captured cap, changed between runs of one plan (cap 20 at the plan, then larger and smaller,
/// one far past the fixed reference's range): each run matches float64 with that run's cap. The plan's softmax
/// frame must hold for any captured value, since run() reads the capture only then.
inline void check_decode_captured_cap(Backend be, int head_dim, int long_len, int block_n = 16) {
  const int Hq = 8, Hkv = 2, sq = 2;
  DeviceCache d = make_device_cache(be, paged_spec({0, sq, 17, 40, long_len}, 16, Hkv, head_dim));
  Captured cap = capture(20.f);
  DecodeOptions o = decode_options(block_n);
  o.backend = be;
  o.score_mod = [cap](Tile s, Tile, Tile, Tile, Tile) { return cap() * tanh(s / cap()); };
  o.softmax_scale = 300.f;  // scores in the hundreds: a cap of 3e4 leaves them there, far outside cap 20's frame
  DecodeRun run = prepare_decode(be, d, Hq, sq);
  attention::DecodeShape shape{.batch = d.host.batch, .heads_q = Hq, .seqlen_q = sq};
  attention::DecodePlan plan(shape, d.cache, o);
  for (float c : {20.f, 80.f, 0.5f, 3e4f}) {
    INFO("cap " << c << " (captured), one plan");
    cap.set(double(c));
    run.out.fill_bytes(0xff);
    run.lse.fill_bytes(0xff);
    plan.run(device_ptr(run.q.buffer), device_ptr(run.out), device_ptr(run.lse), d.cache);
    RefMods ref{[c](double s, int, int, int, int) { return double(c) * std::tanh(s / double(c)); }, {}};
    FlexResult r = decode_result(run, d, Hq, o.softmax_scale, ref);
    require_paged_matches(r, d.host.dtype, run.layout, Hq, d.host.head_dim_v);
  }
}

/// One set of queries run with each split count 1 … max_splits, and 0 (the library's choice): each within the
/// tolerance of float64, and each the same as the unsplit run up to rounding (require_same_within_rounding).
/// `max_seq_len` (0: the cache's bound) sizes the splits; larger than the sequences, it leaves splits empty.
inline void check_decode_splits(Backend be, const DeviceCache &d, int heads_q, int seqlen_q, DecodeOptions o,
                                const RefMods &mods, int max_splits, int max_seq_len = 0) {
  DecodeRun run = prepare_decode(be, d, heads_q, seqlen_q);
  attention::DecodeShape shape{.batch = d.host.batch, .heads_q = heads_q, .seqlen_q = seqlen_q,
                               .max_seq_len = max_seq_len};
  o.backend = be;
  tools::QueryLayout l = run.layout;
  FlexResult one;
  std::vector<int> splits{1};
  for (int s = 2; s <= max_splits; ++s) splits.push_back(s);
  splits.push_back(0);
  for (int s : splits) {
    INFO("num_splits " << s << ", max_seq_len " << max_seq_len);
    o.num_splits = s;
    run.out.fill_bytes(0xff);
    run.lse.fill_bytes(0xff);
    attention::DecodePlan plan(shape, d.cache, o);
    if (s >= 1) REQUIRE(plan.num_splits() == s);  // an explicit split count is taken as given
    REQUIRE((plan.scratch_bytes() > 0) == (plan.num_splits() > 1));
    plan.run(device_ptr(run.q.buffer), device_ptr(run.out), device_ptr(run.lse), d.cache);
    FlexResult r = decode_result(run, d, heads_q, o.softmax_scale, mods);
    require_paged_matches(r, d.host.dtype, l, heads_q, d.host.head_dim_v);
    if (s == 1) one = r;
    else require_same_within_rounding(r, one);
  }
}

/// The split counts on lengths 0, 5, 16, 17, 100, long_len with causal seqlen_q 2 and ALiBi; then sequences
/// of at most one key block with up to 16 splits, and splits sized for max_seq_len 4096 over short sequences:
/// most splits see no key.
inline void check_decode_split_counts(Backend be, int head_dim, int long_len, int block_n) {
  const int Hq = 8;
  std::vector<float> slopes_host = attention::alibi_slopes(Hq);
  Buffer slopes(slopes_host.size() * 4, be);
  slopes.upload(slopes_host);
  RefMods ref{[slopes_host](double s, int, int h, int q, int kv) {
                return s - double(slopes_host[size_t(h)]) * std::abs(q - kv);
              },
              [](int, int, int q, int kv, int, int) { return kv <= q; }};
  DecodeOptions o = decode_options(block_n);
  o.score_mod = attention::alibi(capture(slopes, DType::f32));
  o.mask = attention::causal_top_left();
  {
    DeviceCache d = make_device_cache(be, paged_spec({0, 5, 16, 17, 100, long_len}, 16, 2, head_dim));
    check_decode_splits(be, d, Hq, 2, o, ref, 6);
  }
  {
    DeviceCache d = make_device_cache(be, paged_spec({1, 3, block_n, 0}, 16, 2, head_dim));
    check_decode_splits(be, d, Hq, 1, o, ref, 16);
    check_decode_splits(be, d, Hq, 1, o, ref, 8, 4096);
  }
}

/// A plan made once and run on new lengths, tables, pages and queries written into the same buffers (what a
/// replayed CUDA graph sees), with and without a split; lse may be null.
inline void check_decode_plan_reuse(Backend be, int head_dim, int long_len, int block_n = 16) {
  DeviceCache d = make_device_cache(be, paged_spec({long_len, 40, 1, 17}, 16, 2, head_dim));
  for (int splits : {1, 3}) {
    INFO("num_splits " << splits);
    DecodeOptions o = decode_options(block_n, splits);
    o.mask = attention::causal_top_left();
    o.backend = be;
    attention::DecodeShape shape{.batch = 4, .heads_q = 8, .seqlen_q = 2};
    attention::DecodePlan plan(shape, d.cache, o);
    if (block_n) REQUIRE(plan.block_n() == block_n);
    REQUIRE(plan.block_n() >= 16);
    if (splits == 1) REQUIRE((plan.num_splits() == 1 && plan.scratch_bytes() == 0));
    DecodeRun run = prepare_decode(be, d, 8, 2);
    const std::vector<std::vector<int>> draws{{2, 40, 33, long_len}, {16, 0, long_len / 2, 3}};
    for (const std::vector<int> &lens : draws) {
      redraw_device_cache(d, lens);
      run.q.values = random_values(run.layout.q_elements, d.host.dtype);
      run.q.buffer.upload(to_bits(run.q.values, d.host.dtype));
      run.out.fill_bytes(0xff);
      run.lse.fill_bytes(0xff);
      plan.run(device_ptr(run.q.buffer), device_ptr(run.out), device_ptr(run.lse), d.cache);
      require_paged_matches(decode_result(run, d, 8, 0.f, ref_causal()), d.host.dtype, run.layout, 8, head_dim);
    }
    // Without lse.
    run.out.fill_bytes(0xff);
    run.lse.fill_bytes(0xff);
    plan.run(device_ptr(run.q.buffer), device_ptr(run.out), DevicePtr{}, d.cache);
    run.with_lse = false;
    FlexResult r = decode_result(run, d, 8, 0.f, ref_causal());
    require_paged_matches(r, d.host.dtype, run.layout, 8, head_dim);
    // The lse buffer was left alone (still the poison's NaN).
    for (float x : run.lse.download_as<float>(run.layout.lse_elements)) REQUIRE(std::isnan(x));
  }
}

/// Lengths a cache cannot hold: a seq_lens entry beyond max_pages_per_seq·page_size attends to the tokens the
/// sequence's block-table row holds (not past it), a negative one to none.
inline void check_decode_lengths_beyond_capacity(Backend be) {
  HostCacheSpec spec = paged_spec({32, 20}, 16, 2, 32);
  spec.spare_columns = 0;  // the rows hold exactly the longest sequence's pages: 32 tokens
  DeviceCache d = make_device_cache(be, spec);
  REQUIRE(d.cache.max_pages_per_seq * d.cache.page_size == 32);
  DecodeOptions o = decode_options();
  o.backend = be;
  attention::DecodeShape shape{.batch = 2, .heads_q = 4, .seqlen_q = 1};
  attention::DecodePlan plan(shape, d.cache, o);
  DecodeRun run = prepare_decode(be, d, 4, 1);
  auto out_bits = [&] {
    run.out.fill_bytes(0xff);
    plan.run(device_ptr(run.q.buffer), device_ptr(run.out), device_ptr(run.lse), d.cache);
    return run.out.download_as<uint16_t>(run.layout.out_elements);
  };
  const std::vector<uint16_t> want = out_bits();  // lengths 32 (the capacity) and 20
  d.lens.upload(std::vector<int32_t>{1000, 20});
  CHECK(out_bits() == want);
  d.lens.upload(std::vector<int32_t>{32, -5});
  const std::vector<uint16_t> none = out_bits();
  const size_t per_seq = run.layout.out_elements / 2;
  for (size_t i = 0; i < per_seq; ++i) REQUIRE(none[i] == want[i]);
  for (size_t i = per_seq; i < none.size(); ++i) REQUIRE((none[i] & 0x7fff) == 0);  // rows seeing no key: 0
}

/// What DecodePlan rejects, each error naming the field and value; and a cache of another layout at run().
inline void check_decode_errors(Backend be) {
  DeviceCache d = make_device_cache(be, paged_spec({10, 20}, 16, 4, 32));
  attention::DecodeShape good{.batch = 2, .heads_q = 8, .seqlen_q = 1};
  DecodeOptions o = decode_options();
  o.backend = be;
  auto plan_with = [&](attention::DecodeShape s, attention::PagedKVCache c, DecodeOptions op) {
    attention::DecodePlan p(s, c, op);
  };
  auto shape_edit = [&](auto edit) {
    attention::DecodeShape s = good;
    edit(s);
    return s;
  };
  auto cache_edit = [&](auto edit) {
    attention::PagedKVCache c = d.cache;
    edit(c);
    return c;
  };
  require_trace_error([&] { plan_with(shape_edit([](auto &s) { s.heads_q = 6; }), d.cache, o); }, {"heads_q", "6"});
  require_trace_error([&] { plan_with(shape_edit([](auto &s) { s.seqlen_q = 0; }), d.cache, o); }, {"seqlen_q", "0"});
  require_trace_error([&] { plan_with(shape_edit([](auto &s) { s.seqlen_q = 17; }), d.cache, o); }, {"seqlen_q", "17"});
  require_trace_error([&] { plan_with(shape_edit([](auto &s) { s.batch = -1; }), d.cache, o); }, {"batch", "-1"});
  for (int p : {3, 0, 512})
    require_trace_error([&] { plan_with(good, cache_edit([p](auto &c) { c.page_size = p; }), o); },
                        {fmt::format("page_size {}", p)});
  for (int hd : {8, 300})
    require_trace_error([&] { plan_with(good, cache_edit([hd](auto &c) { c.head_dim = hd; }), o); },
                        {fmt::format("head_dim {}", hd)});
  require_trace_error([&] { plan_with(good, cache_edit([](auto &c) { c.dtype = DType::f32; }), o); }, {"f32"});
  require_trace_error([&] { plan_with(good, cache_edit([](auto &c) { c.page_stride = -5; }), o); },
                      {"page_stride", "-5"});
  require_trace_error([&] { plan_with(good, cache_edit([](auto &c) { c.num_pages = -1; }), o); }, {"num_pages", "-1"});
  DecodeOptions neg = o;
  neg.num_splits = -1;
  require_trace_error([&] { plan_with(good, d.cache, neg); }, {"num_splits", "-1"});
  // A moved-from plan says so instead of dereferencing nothing.
  attention::DecodePlan moved(good, d.cache, o);
  attention::DecodePlan taken(std::move(moved));
  CHECK(taken.num_splits() >= 1);
  require_trace_error([&] { (void)moved.num_splits(); }, {"moved from"});
  require_trace_error([&] { moved.run(DevicePtr{1, 0}, DevicePtr{1, 0}, DevicePtr{}, d.cache); }, {"run", "moved from"});
  // The tiling options (0: the plan's choice): negative or unsupported ones are named with their value.
  for (auto [field, value, what] : {std::tuple{&DecodeOptions::block_n, -16, "BLOCK_N -16"},
                                    std::tuple{&DecodeOptions::block_n, 48, "BLOCK_N 48"},
                                    std::tuple{&DecodeOptions::num_warps, -4, "num_warps -4"},
                                    std::tuple{&DecodeOptions::num_stages, 9, "num_stages 9"}}) {
    DecodeOptions bad = o;
    bad.*field = value;
    require_trace_error([&] { plan_with(good, d.cache, bad); }, {what});
  }
  // run() with a cache of another layout than the plan's.
  attention::DecodePlan plan(good, d.cache, o);
  DecodeRun run = prepare_decode(be, d, 8, 1);
  attention::PagedKVCache other = d.cache;
  other.page_size = 8;
  other.num_pages *= 2;
  other.max_pages_per_seq *= 2;
  require_trace_error([&] { plan.run(device_ptr(run.q.buffer), device_ptr(run.out), device_ptr(run.lse), other); },
                      {"layout", "page size 8"});
}

/// Chunked prefill through flex_forward with FlexOptions::kv_cache: varlen chunks (q_lens[b] ≤ seq_lens[b],
/// one chunk empty) with a causal mask at positions L − q_len + i, then dense chunks with a user score_mod and
/// mask function, across page sizes and strides.
inline void check_paged_prefill(Backend be, int head_dim, int long_len) {
  for (int P : {1, 16, 64})
    for (PagedStrides st : {PagedStrides::Contiguous, PagedStrides::HeadsMajor}) {
      INFO("page size " << P << ", " << strides_name(st) << " strides");
      DeviceCache d = make_device_cache(be, paged_spec({5, 30, long_len, 1, 40}, P, 2, head_dim, st));
      attention::FlexOptions o;
      o.mask = attention::causal_top_left();
      run_paged_flex(be, d, 8, {5, 0, 17, 1, 40}, true, o, ref_causal());
      o.mask = attention::sliding_window(12, 0);
      run_paged_flex(be, d, 8, {3, 30, 64, 1, 20}, true, o, ref_band_positions(12, 0));
    }
  DeviceCache d = make_device_cache(be, paged_spec({8, 20, long_len}, 16, 1, head_dim, PagedStrides::Padded));
  attention::FlexOptions o;
  o.score_mod = [](Tile s, Tile, Tile, Tile q, Tile kv) {
    return 3.f * tanh(s / 3.f) - 0.02f * (q - kv).to(DType::f32);
  };
  o.mask = attention::Mask([](Tile, Tile h, Tile q, Tile kv) { return (kv <= q) & ((q + kv + h) % 5 != 0); });
  o.softmax_scale = 1.f;
  RefMods ref{[](double s, int, int, int q, int kv) { return 3.0 * std::tanh(s / 3.0) - 0.02 * (q - kv); },
              [](int, int h, int q, int kv, int, int) { return kv <= q && (q + kv + h) % 5 != 0; }};
  run_paged_flex(be, d, 4, {8, 8, 8}, false, o, ref);
}

/// flex_forward with kv_cache rejects k / v / cu_seqlens_k given too, and a shape that does not match the cache.
inline void check_paged_prefill_errors(Backend be) {
  DeviceCache d = make_device_cache(be, paged_spec({8, 20}, 16, 2, 32));
  Buffer q(2 * 4 * 8 * 32 * 2, be), out(2 * 4 * 8 * 32 * 2, be), lse(2 * 4 * 8 * 4, be), other(1024, be);
  attention::FlexShape s{.batch = 2, .heads_q = 4, .heads_kv = 2, .seqlen_q = 8, .seqlen_k = 20, .head_dim_qk = 32};
  attention::FlexOptions o;
  o.kv_cache = &d.cache;
  o.backend = be;
  auto run = [&](DevicePtr k, DevicePtr v, const attention::FlexShape &shape, const attention::FlexOptions &op) {
    attention::flex_forward(device_ptr(q), k, v, device_ptr(out), device_ptr(lse), shape, op);
  };
  require_trace_error([&] { run(device_ptr(other), DevicePtr{}, s, o); }, {"kv_cache"});
  require_trace_error([&] { run(DevicePtr{}, device_ptr(other), s, o); }, {"kv_cache"});
  attention::FlexOptions with_cu = o;
  with_cu.cu_seqlens_k = device_ptr(other);
  with_cu.cu_seqlens_q = device_ptr(other);
  require_trace_error([&] { run(DevicePtr{}, DevicePtr{}, s, with_cu); }, {"cu_seqlens_k"});
  attention::FlexShape wrong = s;
  wrong.heads_kv = 4;
  require_trace_error([&] { run(DevicePtr{}, DevicePtr{}, wrong, o); }, {"paged cache holds 2 KV heads"});
  wrong = s;
  wrong.head_dim_qk = 64;
  require_trace_error([&] { run(DevicePtr{}, DevicePtr{}, wrong, o); }, {"paged cache holds", "32/32"});
}

}  // namespace tilejit::testing
