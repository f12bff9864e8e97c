// A paged KV cache modelled on the host, and the float64 reference of attention over it: shared by
// `tilejit decode --check` and the tests. The model places each sequence's pages at randomly shuffled physical
// pages (some left unused), fills every element of the page memory (gaps between strided rows included) with
// fresh random values, and leaves block-table entries past a sequence's last page out of range, so that a
// kernel reading the wrong page, a gap, or a table entry it must not use gives a wrong answer or an
// out-of-bounds access on the interpreter.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "tilejit/types.h"
#include "tools/attention_check.h"

namespace tilejit::tools {

/// The strides of the modelled pages. Contiguous: all zero in the descriptor (PagedKVCache's defaults, each
/// tensor its own head dim). Padded: vLLM's [page, token, head, dim] order with gaps after each head, token and
/// page. HeadsMajor: FlashInfer's HND order [page, head, token, dim].
enum class PagedStrides { Contiguous, Padded, HeadsMajor };

struct HostCacheSpec {
  std::vector<int> seq_lens;  // tokens per sequence (batch = size)
  int page_size = 16, heads_kv = 1, head_dim = 32, head_dim_v = 0;  // head_dim_v 0: head_dim
  DType dtype = DType::bf16;                                         // bf16 or f16
  PagedStrides strides = PagedStrides::Contiguous;
  int spare_pages = 3;  // physical pages no sequence uses
  int spare_columns = 1;  // block-table entries past the longest sequence's last page
};

struct HostPagedCache {
  DType dtype = DType::bf16;
  int batch = 0, num_pages = 0, page_size = 0, heads_kv = 0, head_dim = 0, head_dim_v = 0, max_pages_per_seq = 0;
  // As given to PagedKVCache (0: contiguous), and as resolved for each tensor.
  int64_t page_stride = 0, token_stride = 0, head_stride = 0, block_table_stride = 0;
  int64_t k_page = 0, k_token = 0, k_head = 0, v_page = 0, v_token = 0, v_head = 0;
  std::vector<int32_t> seq_lens, block_table;
  std::vector<uint16_t> k_bits, v_bits;  // the page memory, dtype bits

  /// The value of a dtype element.
  float value(uint16_t bits) const;

  /// Physical page of sequence b's key j.
  int page_of(int b, int j) const { return block_table[size_t(b * block_table_stride + j / page_size)]; }
  /// vLLM's slot of sequence b's key j: physical page · page_size + offset.
  int32_t slot(int b, int j) const { return page_of(b, j) * page_size + j % page_size; }
  /// Element offsets in k / v of slot `s`, head h.
  int64_t k_offset(int32_t s, int h) const { return (s / page_size) * k_page + (s % page_size) * k_token + h * k_head; }
  int64_t v_offset(int32_t s, int h) const { return (s / page_size) * v_page + (s % page_size) * v_token + h * v_head; }
  /// Sequence b's keys and values in order, [seq_lens[b], heads_kv, head_dim(_v)] (read through the table).
  std::vector<float> gather_k(int b) const;
  std::vector<float> gather_v(int b) const;
};

/// n values uniform in [−1, 1) rounded to dt (bf16 or f16), as dtype bits.
std::vector<uint16_t> random_bits(size_t n, DType dt, std::mt19937_64 &rng);

/// Builds the model: pages for every sequence at shuffled physical pages plus spec.spare_pages unused ones,
/// every element random.
HostPagedCache make_host_cache(const HostCacheSpec &spec, std::mt19937_64 &rng);

/// New contents for the same layout (sizes, strides, num_pages, max_pages_per_seq): these lengths, a fresh
/// shuffled table and fresh values. Throws std::invalid_argument when the lengths do not fit.
void redraw(HostPagedCache &c, const std::vector<int> &seq_lens, std::mt19937_64 &rng);

/// The tokens of a cache as paged_kv_append takes them: k_new [tokens, heads_kv, head_dim], v_new [tokens,
/// heads_kv, head_dim_v] (contiguous, dtype bits) and slot_mapping, in a random order, with `padding`
/// extra tokens of slot −1 (random values that must not land anywhere) mixed in.
struct AppendBatch {
  int tokens = 0;
  std::vector<uint16_t> k_bits, v_bits;
  std::vector<int32_t> slots;
};
/// The tokens of sequence b at positions first[b] … end[b] − 1 (first empty: from 0; end empty: to seq_lens[b]).
AppendBatch append_batch(const HostPagedCache &c, const std::vector<int> &first, const std::vector<int> &end,
                         int padding, std::mt19937_64 &rng);

/// Where each (sequence, query head)'s query rows, output rows and lse live (element offsets of row 0 and row
/// strides), and each sequence's query count. The queries are the sequence's last tokens: row i at position
/// seq_lens[b] − q_lens[b] + i.
struct QueryLayout {
  std::vector<int> q_lens;
  std::function<int64_t(int b, int h)> q_base, out_base, lse_base;
  int64_t q_row_stride = 0, out_row_stride = 0, lse_row_stride = 0;
  size_t q_elements = 0, out_elements = 0, lse_elements = 0;
};
/// The decode layout: q [batch, seqlen_q, heads_q, dq], out [batch, seqlen_q, heads_q, dv], lse [batch,
/// seqlen_q, heads_q].
QueryLayout decode_layout(int batch, int seqlen_q, int heads_q, int dq, int dv);
/// flex_forward's dense layout: q [batch, heads_q, seqlen_q, dq], out alike with dv, lse [batch, heads_q,
/// seqlen_q].
QueryLayout flex_dense_layout(int batch, int seqlen_q, int heads_q, int dq, int dv);
/// flex_forward's varlen layout: q [total_q, heads_q, dq], out alike with dv, lse [heads_q, total_q].
QueryLayout flex_varlen_layout(const std::vector<int> &q_lens, int heads_q, int dq, int dv);

struct PagedRef {
  std::vector<double> out, lse;  // in the layout's shapes; rows not computed hold 0 and −inf
  int empty_rows = 0;            // computed rows that see no key
  int rows = 0;                  // computed rows
};
/// Float64 attention of q (layout `l`, heads_q heads, exact dtype values) over the cache with `mods`
/// (positions as above). `select` (empty: all) picks the (sequence, head) pairs to compute.
PagedRef paged_reference(const HostPagedCache &c, const std::vector<float> &q, const QueryLayout &l, int heads_q,
                         double scale, const RefMods &mods, const std::function<bool(int b, int h)> &select = {});

}  // namespace tilejit::tools
