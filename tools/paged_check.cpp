#include "tools/paged_check.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "tilejit/numerics.h"

namespace tilejit::tools {

std::vector<uint16_t> random_bits(size_t n, DType dt, std::mt19937_64 &rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<uint16_t> bits(n);
  for (auto &x : bits) x = dt == DType::bf16 ? float_to_bf16(dist(rng)) : float_to_f16(dist(rng));
  return bits;
}

HostPagedCache make_host_cache(const HostCacheSpec &spec, std::mt19937_64 &rng) {
  HostPagedCache c;
  c.dtype = spec.dtype;
  c.batch = int(spec.seq_lens.size());
  c.page_size = spec.page_size;
  c.heads_kv = spec.heads_kv;
  c.head_dim = spec.head_dim;
  c.head_dim_v = spec.head_dim_v ? spec.head_dim_v : spec.head_dim;
  const int P = c.page_size, H = c.heads_kv, D = c.head_dim, DV = c.head_dim_v;
  int used = 0, longest = 0;
  for (int n : spec.seq_lens) {
    used += (n + P - 1) / P;
    longest = std::max(longest, (n + P - 1) / P);
  }
  c.num_pages = used + spec.spare_pages;
  c.max_pages_per_seq = longest + spec.spare_columns;

  switch (spec.strides) {
    case PagedStrides::Contiguous:
      c.k_head = D, c.k_token = int64_t(H) * D, c.k_page = P * c.k_token;
      c.v_head = DV, c.v_token = int64_t(H) * DV, c.v_page = P * c.v_token;
      c.block_table_stride = c.max_pages_per_seq;
      break;
    case PagedStrides::Padded: {
      int64_t hd = std::max(D, DV);
      c.head_stride = hd + 8;
      c.token_stride = H * c.head_stride + 16;
      c.page_stride = P * c.token_stride + 24;
      c.block_table_stride = c.max_pages_per_seq + 3;
      break;
    }
    case PagedStrides::HeadsMajor: {
      int64_t hd = std::max(D, DV);
      c.token_stride = hd;
      c.head_stride = P * hd;
      c.page_stride = H * c.head_stride;
      c.block_table_stride = c.max_pages_per_seq + 3;
      break;
    }
  }
  if (spec.strides != PagedStrides::Contiguous) {
    c.k_head = c.v_head = c.head_stride;
    c.k_token = c.v_token = c.token_stride;
    c.k_page = c.v_page = c.page_stride;
  }

  redraw(c, spec.seq_lens, rng);
  return c;
}

void redraw(HostPagedCache &c, const std::vector<int> &seq_lens, std::mt19937_64 &rng) {
  const int P = c.page_size, H = c.heads_kv;
  int used = 0, longest = 0;
  for (int n : seq_lens) {
    used += (n + P - 1) / P;
    longest = std::max(longest, (n + P - 1) / P);
  }
  if (int(seq_lens.size()) != c.batch || used > c.num_pages || longest > c.max_pages_per_seq)
    throw std::invalid_argument(fmt::format("redraw: {} sequences needing {} pages, at most {} per sequence, do not "
                                            "fit a cache of {} sequences, {} pages, {} per sequence",
                                            seq_lens.size(), used, longest, c.batch, c.num_pages,
                                            c.max_pages_per_seq));
  c.seq_lens.assign(seq_lens.begin(), seq_lens.end());
  // Entries past a sequence's pages (and between rows) point outside the pages: never to be used.
  c.block_table.resize(std::max<size_t>(size_t(c.batch) * size_t(c.block_table_stride), 1));
  for (size_t i = 0; i < c.block_table.size(); ++i) c.block_table[i] = c.num_pages + 1 + int32_t(i % 97);
  std::vector<int32_t> perm(size_t(c.num_pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  size_t next = 0;
  for (int b = 0; b < c.batch; ++b)
    for (int p = 0; p < (seq_lens[size_t(b)] + P - 1) / P; ++p)
      c.block_table[size_t(b * c.block_table_stride + p)] = perm[next++];
  auto extent = [&](int64_t page, int64_t token, int64_t head, int d) -> size_t {
    if (c.num_pages == 0) return 0;
    return size_t((c.num_pages - 1) * page + (P - 1) * token + (H - 1) * head + d);
  };
  c.k_bits = random_bits(extent(c.k_page, c.k_token, c.k_head, c.head_dim), c.dtype, rng);
  c.v_bits = random_bits(extent(c.v_page, c.v_token, c.v_head, c.head_dim_v), c.dtype, rng);
}

float HostPagedCache::value(uint16_t bits) const {
  return dtype == DType::bf16 ? bf16_to_float(bits) : f16_to_float(bits);
}

std::vector<float> HostPagedCache::gather_k(int b) const {
  const int L = seq_lens[size_t(b)];
  std::vector<float> out(size_t(L) * heads_kv * head_dim);
  for (int j = 0; j < L; ++j)
    for (int h = 0; h < heads_kv; ++h) {
      const uint16_t *from = &k_bits[size_t(k_offset(slot(b, j), h))];
      float *to = &out[(size_t(j) * heads_kv + h) * head_dim];
      for (int e = 0; e < head_dim; ++e) to[e] = value(from[e]);
    }
  return out;
}

std::vector<float> HostPagedCache::gather_v(int b) const {
  const int L = seq_lens[size_t(b)];
  std::vector<float> out(size_t(L) * heads_kv * head_dim_v);
  for (int j = 0; j < L; ++j)
    for (int h = 0; h < heads_kv; ++h) {
      const uint16_t *from = &v_bits[size_t(v_offset(slot(b, j), h))];
      float *to = &out[(size_t(j) * heads_kv + h) * head_dim_v];
      for (int e = 0; e < head_dim_v; ++e) to[e] = value(from[e]);
    }
  return out;
}

AppendBatch append_batch(const HostPagedCache &c, const std::vector<int> &first, const std::vector<int> &end,
                         int padding, std::mt19937_64 &rng) {
  struct Token {
    int b, j;  // j < 0: padding
  };
  std::vector<Token> order;
  for (int b = 0; b < c.batch; ++b)
    for (int j = first.empty() ? 0 : first[size_t(b)]; j < (end.empty() ? c.seq_lens[size_t(b)] : end[size_t(b)]); ++j)
      order.push_back({b, j});
  for (int i = 0; i < padding; ++i) order.push_back({-1, -1});
  std::shuffle(order.begin(), order.end(), rng);
  AppendBatch a;
  a.tokens = int(order.size());
  const int H = c.heads_kv, D = c.head_dim, DV = c.head_dim_v;
  a.k_bits.resize(size_t(a.tokens) * H * D);
  a.v_bits.resize(size_t(a.tokens) * H * DV);
  a.slots.resize(size_t(a.tokens));
  for (size_t t = 0; t < order.size(); ++t) {
    if (order[t].b < 0) {
      a.slots[t] = -1 - int32_t(t % 3);  // any negative slot skips
      std::vector<uint16_t> k = random_bits(size_t(H) * D, c.dtype, rng), v = random_bits(size_t(H) * DV, c.dtype, rng);
      std::copy(k.begin(), k.end(), &a.k_bits[t * H * D]);
      std::copy(v.begin(), v.end(), &a.v_bits[t * H * DV]);
      continue;
    }
    int32_t s = c.slot(order[t].b, order[t].j);
    a.slots[t] = s;
    for (int h = 0; h < H; ++h) {
      std::copy_n(&c.k_bits[size_t(c.k_offset(s, h))], D, &a.k_bits[(t * H + h) * D]);
      std::copy_n(&c.v_bits[size_t(c.v_offset(s, h))], DV, &a.v_bits[(t * H + h) * DV]);
    }
  }
  return a;
}

QueryLayout decode_layout(int batch, int seqlen_q, int heads_q, int dq, int dv) {
  QueryLayout l;
  l.q_lens.assign(size_t(batch), seqlen_q);
  l.q_base = [=](int b, int h) { return (int64_t(b) * seqlen_q * heads_q + h) * dq; };
  l.out_base = [=](int b, int h) { return (int64_t(b) * seqlen_q * heads_q + h) * dv; };
  l.lse_base = [=](int b, int h) { return int64_t(b) * seqlen_q * heads_q + h; };
  l.q_row_stride = int64_t(heads_q) * dq;
  l.out_row_stride = int64_t(heads_q) * dv;
  l.lse_row_stride = heads_q;
  l.lse_elements = size_t(batch) * seqlen_q * heads_q;
  l.q_elements = l.lse_elements * dq;
  l.out_elements = l.lse_elements * dv;
  return l;
}

QueryLayout flex_dense_layout(int batch, int seqlen_q, int heads_q, int dq, int dv) {
  QueryLayout l;
  l.q_lens.assign(size_t(batch), seqlen_q);
  l.q_base = [=](int b, int h) { return (int64_t(b) * heads_q + h) * seqlen_q * dq; };
  l.out_base = [=](int b, int h) { return (int64_t(b) * heads_q + h) * seqlen_q * dv; };
  l.lse_base = [=](int b, int h) { return (int64_t(b) * heads_q + h) * seqlen_q; };
  l.q_row_stride = dq;
  l.out_row_stride = dv;
  l.lse_row_stride = 1;
  l.lse_elements = size_t(batch) * seqlen_q * heads_q;
  l.q_elements = l.lse_elements * dq;
  l.out_elements = l.lse_elements * dv;
  return l;
}

QueryLayout flex_varlen_layout(const std::vector<int> &q_lens, int heads_q, int dq, int dv) {
  QueryLayout l;
  l.q_lens = q_lens;
  std::vector<int64_t> cu{0};
  for (int n : q_lens) cu.push_back(cu.back() + n);
  const int64_t total = cu.back();
  l.q_base = [=](int b, int h) { return (cu[size_t(b)] * heads_q + h) * dq; };
  l.out_base = [=](int b, int h) { return (cu[size_t(b)] * heads_q + h) * dv; };
  l.lse_base = [=](int b, int h) { return h * total + cu[size_t(b)]; };
  l.q_row_stride = int64_t(heads_q) * dq;
  l.out_row_stride = int64_t(heads_q) * dv;
  l.lse_row_stride = 1;
  l.lse_elements = size_t(total) * heads_q;
  l.q_elements = l.lse_elements * dq;
  l.out_elements = l.lse_elements * dv;
  return l;
}

PagedRef paged_reference(const HostPagedCache &c, const std::vector<float> &q, const QueryLayout &l, int heads_q,
                         double scale, const RefMods &mods, const std::function<bool(int b, int h)> &select) {
  PagedRef r;
  r.out.assign(l.out_elements, 0.0);
  r.lse.assign(l.lse_elements, -std::numeric_limits<double>::infinity());
  const int H = c.heads_kv, D = c.head_dim, DV = c.head_dim_v, group = heads_q / H;
  for (int b = 0; b < c.batch; ++b) {
    const int L = c.seq_lens[size_t(b)], sq = l.q_lens[size_t(b)];
    if (sq == 0) continue;
    bool any = false;
    for (int h = 0; h < heads_q && !any; ++h) any = !select || select(b, h);
    if (!any) continue;
    std::vector<float> k = c.gather_k(b), v = c.gather_v(b);
    for (int h = 0; h < heads_q; ++h) {
      if (select && !select(b, h)) continue;
      const int kh = h / group;
      r.empty_rows +=
          reference_head(mods, b, h, sq, L, L - sq, D, DV, scale, {q.data() + l.q_base(b, h), l.q_row_stride},
                         {L ? k.data() + size_t(kh) * D : nullptr, int64_t(H) * D},
                         {L ? v.data() + size_t(kh) * DV : nullptr, int64_t(H) * DV}, r.out.data() + l.out_base(b, h),
                         l.out_row_stride, r.lse.data() + l.lse_base(b, h), l.lse_row_stride);
      r.rows += sq;
    }
  }
  return r;
}

}  // namespace tilejit::tools
