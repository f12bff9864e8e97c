// The paged-attention test harness, shared by the CPU (interpreter) and GPU tests: a modelled cache
// (tools/paged_check.h: shuffled page tables, unused pages, random values everywhere, out-of-range table
// entries past each sequence) uploaded to the backend, and runners that poison the outputs, run the op on fresh
// random queries and return the result beside the float64 reference (flex_reference.h's FlexResult, checked
// with require_paged_matches).
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "flex_reference.h"
#include "kernel_test_util.h"
#include "tilejit/error.h"
#include "tilejit/numerics.h"
#include "tilejit/paged_attention.h"
#include "tools/paged_check.h"

namespace tilejit::testing {

using tools::HostCacheSpec;
using tools::PagedStrides;

/// A modelled cache on a backend; `cache` describes the buffers (their byte counts set, so the interpreter
/// bounds-checks every access).
struct DeviceCache {
  tools::HostPagedCache host;
  Buffer k, v, table, lens;
  attention::PagedKVCache cache;
};

inline DevicePtr device_ptr(const Buffer &b) { return {b.address(), b.bytes()}; }

/// Buffers of at least one element (a cache with no page still has a valid address).
inline Buffer upload_bits(const std::vector<uint16_t> &bits, Backend be) {
  Buffer b(std::max<size_t>(bits.size(), 1) * 2, be);
  if (!bits.empty()) b.upload(bits);
  return b;
}
inline Buffer upload_i32(const std::vector<int32_t> &v, Backend be) {
  Buffer b(std::max<size_t>(v.size(), 1) * 4, be);
  if (!v.empty()) b.upload(v);
  return b;
}

/// The descriptor of `host` over these buffers.
inline attention::PagedKVCache describe(const tools::HostPagedCache &h, const Buffer &k, const Buffer &v,
                                        const Buffer &table, const Buffer &lens) {
  attention::PagedKVCache c;
  c.k_pages = device_ptr(k);
  c.v_pages = device_ptr(v);
  c.block_table = device_ptr(table);
  c.seq_lens = device_ptr(lens);
  c.dtype = h.dtype;
  c.num_pages = h.num_pages;
  c.page_size = h.page_size;
  c.heads_kv = h.heads_kv;
  c.head_dim = h.head_dim;
  c.head_dim_v = h.head_dim_v == h.head_dim ? 0 : h.head_dim_v;
  c.max_pages_per_seq = h.max_pages_per_seq;
  c.page_stride = h.page_stride;
  c.token_stride = h.token_stride;
  c.head_stride = h.head_stride;
  c.block_table_stride = h.block_table_stride == h.max_pages_per_seq ? 0 : h.block_table_stride;
  return c;
}

/// A model spec: lengths, page size, KV heads, head dims, strides, dtype.
inline HostCacheSpec paged_spec(std::vector<int> lens, int page_size, int heads_kv, int head_dim,
                                PagedStrides strides = PagedStrides::Contiguous, int head_dim_v = 0,
                                DType dt = DType::bf16) {
  HostCacheSpec s;
  s.seq_lens = std::move(lens);
  s.page_size = page_size;
  s.heads_kv = heads_kv;
  s.head_dim = head_dim;
  s.head_dim_v = head_dim_v;
  s.strides = strides;
  s.dtype = dt;
  return s;
}

/// The model's cache uploaded to `be`, pages included.
inline DeviceCache make_device_cache(Backend be, const HostCacheSpec &spec) {
  DeviceCache d;
  d.host = tools::make_host_cache(spec, rng());
  d.k = upload_bits(d.host.k_bits, be);
  d.v = upload_bits(d.host.v_bits, be);
  d.table = upload_i32(d.host.block_table, be);
  d.lens = upload_i32(d.host.seq_lens, be);
  d.cache = describe(d.host, d.k, d.v, d.table, d.lens);
  return d;
}

/// New lengths, table and values written into the same buffers (as a serving loop rewrites them between
/// replays of a captured step).
inline void redraw_device_cache(DeviceCache &d, const std::vector<int> &seq_lens) {
  tools::redraw(d.host, seq_lens, rng());
  d.k.upload(d.host.k_bits);
  d.v.upload(d.host.v_bits);
  d.table.upload(d.host.block_table);
  d.lens.upload(d.host.seq_lens);
}

// ---- paged_kv_append ----

/// A cache whose pages hold fresh random values (not the model's), and the model the appends must produce.
struct AppendFixture {
  Backend be = Backend::Interpreter;
  DeviceCache d;
  std::vector<uint16_t> before_k, before_v;  // the pages' contents before any append
};

inline AppendFixture garbage_cache(Backend be, const HostCacheSpec &spec) {
  AppendFixture f;
  f.be = be;
  f.d = make_device_cache(be, spec);
  f.before_k = tools::random_bits(f.d.host.k_bits.size(), spec.dtype, rng());
  f.before_v = tools::random_bits(f.d.host.v_bits.size(), spec.dtype, rng());
  f.d.k.upload(f.before_k);
  f.d.v.upload(f.before_v);
  return f;
}

/// Appends `a` (contiguous k_new / v_new) to the fixture's cache.
inline void append_tokens(AppendFixture &f, const tools::AppendBatch &a, attention::AppendOptions opt = {}) {
  Buffer k = upload_bits(a.k_bits, f.be), v = upload_bits(a.v_bits, f.be), slots = upload_i32(a.slots, f.be);
  opt.backend = f.be;
  attention::paged_kv_append(f.d.cache, device_ptr(k), device_ptr(v), device_ptr(slots), a.tokens, opt);
}

/// Every element of the pages: the model's value at the slots of tokens 0 … upto[b] − 1 of each sequence
/// (upto empty: all), the contents before the appends everywhere else.
inline void require_pages(const AppendFixture &f, const std::vector<int> &upto = {}) {
  const tools::HostPagedCache &h = f.d.host;
  std::vector<uint16_t> want_k = f.before_k, want_v = f.before_v;
  for (int b = 0; b < h.batch; ++b)
    for (int j = 0; j < (upto.empty() ? h.seq_lens[size_t(b)] : upto[size_t(b)]); ++j)
      for (int hh = 0; hh < h.heads_kv; ++hh) {
        int64_t ko = h.k_offset(h.slot(b, j), hh), vo = h.v_offset(h.slot(b, j), hh);
        std::copy_n(&h.k_bits[size_t(ko)], h.head_dim, &want_k[size_t(ko)]);
        std::copy_n(&h.v_bits[size_t(vo)], h.head_dim_v, &want_v[size_t(vo)]);
      }
  auto got_k = f.d.k.download_as<uint16_t>(want_k.size()), got_v = f.d.v.download_as<uint16_t>(want_v.size());
  size_t bad_k = 0, bad_v = 0, first_bad = SIZE_MAX;
  for (size_t i = 0; i < want_k.size(); ++i)
    if (got_k[i] != want_k[i]) bad_k++, first_bad = std::min(first_bad, i);
  for (size_t i = 0; i < want_v.size(); ++i) bad_v += got_v[i] != want_v[i];
  INFO("K elements differing " << bad_k << " (first at " << first_bad << "), V elements differing " << bad_v);
  REQUIRE(bad_k == 0);
  REQUIRE(bad_v == 0);
}

/// Rows that see no key must be exactly 0 in the output (and −inf in the lse, which require_matches checks).
inline void require_empty_rows_zero(const FlexResult &r, const tools::QueryLayout &l, int heads_q, int dv) {
  for (size_t b = 0; b < l.q_lens.size(); ++b)
    for (int h = 0; h < heads_q; ++h)
      for (int i = 0; i < l.q_lens[b]; ++i) {
        if (!std::isinf(r.ref_lse[size_t(l.lse_base(int(b), h) + i * l.lse_row_stride)])) continue;
        int64_t o = l.out_base(int(b), h) + i * l.out_row_stride;
        for (int d = 0; d < dv; ++d) {
          INFO("sequence " << b << ", head " << h << ", row " << i << " sees no key; out[" << d << "]");
          REQUIRE(r.out[size_t(o + d)] == 0.f);
        }
      }
}

/// The tolerances, relative to float64 (f32 accumulation; inputs and outputs in the dtype): output relative
/// Frobenius error ≤ tolerance(dt) (bf16 1e-2, f16 5e-3), lse within 1e-3·max(1, |lse|) per row, rows that see
/// no key exactly 0 with lse −inf (an unwritten element is NaN: outputs are poisoned before each run).
inline void require_paged_matches(const FlexResult &r, DType dt, const tools::QueryLayout &l, int heads_q, int dv) {
  require_matches(r, dt);
  require_empty_rows_zero(r, l, heads_q, dv);
}

/// bf16 / f16 bits of values exact in the dtype.
inline std::vector<uint16_t> to_bits(const std::vector<float> &v, DType dt) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = dt == DType::bf16 ? float_to_bf16(v[i]) : float_to_f16(v[i]);
  return bits;
}

/// Random queries in `l`'s layout (exact dtype values) and their upload.
struct Queries {
  std::vector<float> values;
  Buffer buffer;
};
inline Queries random_queries(const tools::QueryLayout &l, DType dt, Backend be) {
  Queries q;
  q.values = random_values(l.q_elements, dt);
  q.buffer = upload_bits(to_bits(q.values, dt), be);
  return q;
}

inline double scale_of(float softmax_scale, int head_dim) {
  return softmax_scale > 0 ? softmax_scale : 1.0 / std::sqrt(double(head_dim));
}

/// A decode step's outputs, poisoned (NaN), and the reference; `run` launches the op on them.
struct DecodeRun {
  tools::QueryLayout layout;
  Queries q;
  Buffer out, lse;
  bool with_lse = true;
};
inline DecodeRun prepare_decode(Backend be, const DeviceCache &d, int heads_q, int seqlen_q, bool with_lse = true) {
  DecodeRun r;
  r.layout = tools::decode_layout(d.host.batch, seqlen_q, heads_q, d.host.head_dim, d.host.head_dim_v);
  r.q = random_queries(r.layout, d.host.dtype, be);
  r.out = Buffer(std::max<size_t>(r.layout.out_elements, 1) * 2, be);
  r.lse = Buffer(std::max<size_t>(r.layout.lse_elements, 1) * 4, be);
  r.out.fill_bytes(0xff);
  r.lse.fill_bytes(0xff);
  r.with_lse = with_lse;
  return r;
}

/// Downloads a run's outputs and computes the float64 reference with `mods` (positions L − seqlen_q + i).
inline FlexResult decode_result(const DecodeRun &run, const DeviceCache &d, int heads_q, float softmax_scale,
                                const RefMods &mods) {
  tools::PagedRef ref = tools::paged_reference(d.host, run.q.values, run.layout, heads_q,
                                               scale_of(softmax_scale, d.host.head_dim), mods);
  FlexResult r;
  r.out = download_as_float(run.out, run.layout.out_elements, d.host.dtype);
  if (run.with_lse) r.lse = run.lse.download_as<float>(run.layout.lse_elements);
  r.ref_out = std::move(ref.out);
  r.ref_lse = std::move(ref.lse);
  r.empty_rows = ref.empty_rows;
  return r;
}

/// paged_decode on fresh random queries against the float64 reference.
inline FlexResult run_decode(Backend be, const DeviceCache &d, int heads_q, int seqlen_q, attention::DecodeOptions opt,
                             const RefMods &mods, bool with_lse = true) {
  DecodeRun run = prepare_decode(be, d, heads_q, seqlen_q, with_lse);
  opt.backend = be;
  attention::DecodeShape shape{.batch = d.host.batch, .heads_q = heads_q, .seqlen_q = seqlen_q};
  attention::paged_decode(device_ptr(run.q.buffer), device_ptr(run.out), with_lse ? device_ptr(run.lse) : DevicePtr{},
                          d.cache, shape, opt);
  return decode_result(run, d, heads_q, opt.softmax_scale, mods);
}

/// run_decode and require_paged_matches in one.
inline FlexResult check_decode(Backend be, const DeviceCache &d, int heads_q, int seqlen_q,
                               const attention::DecodeOptions &opt, const RefMods &mods, bool with_lse = true) {
  FlexResult r = run_decode(be, d, heads_q, seqlen_q, opt, mods, with_lse);
  tools::QueryLayout l = tools::decode_layout(d.host.batch, seqlen_q, heads_q, d.host.head_dim, d.host.head_dim_v);
  require_paged_matches(r, d.host.dtype, l, heads_q, d.host.head_dim_v);
  return r;
}

/// Two runs of one op that must agree up to rounding: outputs within 2^-8 relative Frobenius (half a bf16 ulp;
/// the runs round P to the dtype against different running maxima), lse within 1e-5·max(1, |lse|) (f32).
inline void require_same_within_rounding(const FlexResult &a, const FlexResult &b) {
  REQUIRE(a.out.size() == b.out.size());
  std::vector<double> ref(b.out.begin(), b.out.end());
  double diff = rel_error(a.out, ref);
  INFO("relative difference " << diff);
  REQUIRE(diff <= 0x1p-8);
  REQUIRE(a.lse.size() == b.lse.size());
  for (size_t i = 0; i < a.lse.size(); ++i) {
    INFO("lse row " << i << ": " << a.lse[i] << " vs " << b.lse[i]);
    if (std::isinf(b.lse[i])) REQUIRE(a.lse[i] == b.lse[i]);
    else REQUIRE(std::abs(double(a.lse[i]) - b.lse[i]) <= 1e-5 * std::max(1.0, std::abs(double(b.lse[i]))));
  }
}

/// flex_forward with FlexOptions::kv_cache (chunked prefill): q_lens[b] queries per sequence, the sequence's
/// last tokens, varlen (cu_seqlens_q) or, with varlen false, dense [batch, heads_q, seqlen_q, d] with every
/// q_len equal. Blocks of 16.
inline FlexResult run_paged_flex(Backend be, const DeviceCache &d, int heads_q, const std::vector<int> &q_lens,
                                 bool varlen, attention::FlexOptions opt, const RefMods &mods) {
  const tools::HostPagedCache &h = d.host;
  int max_q = 0, max_k = 0;
  for (int n : q_lens) max_q = std::max(max_q, n);
  for (int n : h.seq_lens) max_k = std::max(max_k, n);
  tools::QueryLayout l = varlen ? tools::flex_varlen_layout(q_lens, heads_q, h.head_dim, h.head_dim_v)
                                : tools::flex_dense_layout(h.batch, max_q, heads_q, h.head_dim, h.head_dim_v);
  Queries q = random_queries(l, h.dtype, be);
  Buffer out(std::max<size_t>(l.out_elements, 1) * 2, be), lse(std::max<size_t>(l.lse_elements, 1) * 4, be);
  out.fill_bytes(0xff);
  lse.fill_bytes(0xff);
  attention::FlexShape s{.batch = h.batch, .heads_q = heads_q, .heads_kv = h.heads_kv, .seqlen_q = max_q,
                         .seqlen_k = max_k, .head_dim_qk = h.head_dim, .head_dim_v = h.head_dim_v};
  Buffer cu;
  if (varlen) {
    std::vector<int32_t> cu_host{0};
    for (int n : q_lens) cu_host.push_back(cu_host.back() + n);
    s.total_q = cu_host.back();
    cu = upload_i32(cu_host, be);
    opt.cu_seqlens_q = device_ptr(cu);
  }
  opt.kv_cache = &d.cache;
  opt.dtype = h.dtype;
  opt.backend = be;
  opt.block_m = opt.block_n = 16;
  attention::flex_forward(device_ptr(q.buffer), DevicePtr{}, DevicePtr{}, device_ptr(out), device_ptr(lse), s, opt);
  tools::PagedRef ref = tools::paged_reference(h, q.values, l, heads_q, scale_of(opt.softmax_scale, h.head_dim), mods);
  FlexResult r;
  r.out = download_as_float(out, l.out_elements, h.dtype);
  r.lse = lse.download_as<float>(l.lse_elements);
  r.ref_out = std::move(ref.out);
  r.ref_lse = std::move(ref.lse);
  r.empty_rows = ref.empty_rows;
  require_paged_matches(r, h.dtype, l, heads_q, h.head_dim_v);
  return r;
}

/// f() throws TraceError whose message contains every one of `parts`.
template <class F>
void require_trace_error(F &&f, const std::vector<std::string> &parts) {
  try {
    f();
  } catch (const TraceError &e) {
    std::string m = e.what();
    INFO("message: " << m);
    for (const std::string &p : parts) {
      INFO("expected to contain: " << p);
      CHECK(m.find(p) != std::string::npos);
    }
    return;
  } catch (const std::exception &e) {
    FAIL("expected a TraceError containing '" << parts.front() << "', got: " << e.what());
  }
  FAIL("expected a TraceError containing '" << parts.front() << "', nothing was thrown");
}

// ---- host versions of the built-in mods, at positions (q = L − seqlen_q + i) ----

/// Causal on positions: key j visible from the query at position q when j ≤ q.
inline RefMods ref_causal() {
  return {{}, [](int, int, int q, int kv, int, int) { return kv <= q; }};
}
/// A band on positions (Align does not matter with a paged cache).
inline RefMods ref_band_positions(int64_t left, int64_t right) {
  return {{}, [=](int, int, int q, int kv, int, int) {
            return ref_band({left, right, attention::Align::TopLeft}, q, kv, 0, 0);
          }};
}

}  // namespace tilejit::testing
