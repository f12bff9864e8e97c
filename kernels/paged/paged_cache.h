// A paged KV cache's layout, validated once for every kernel that reads or writes it (append, decode, the flex
// forward's chunked prefill), so that one cache is accepted or rejected the same way everywhere. Not installed.
#pragma once
#include <cstdint>

#include "tilejit/paged_attention.h"

namespace tilejit::attention::paged {

/// The cache's sizes with the contiguous defaults filled in (elements).
struct CacheLayout {
  int page_size = 0, heads_kv = 0, head_dim = 0, head_dim_v = 0;
  int64_t page_stride = 0, token_stride = 0, head_stride = 0;        // K's
  int64_t v_page_stride = 0, v_token_stride = 0, v_head_stride = 0;  // V's (K's unless contiguous, dims differ)
  int64_t bt_stride = 0;
  int64_t max_seq_len = 0;           // max_pages_per_seq·page_size: the tokens one block-table row holds
  int64_t last_k = -1, last_v = -1;  // the furthest element of the pages addressed (−1: no pages)
  bool large = false;                // some element offset needs 64 bits
};

/// Validates `c` for operation `op` and fills in the defaults: strides all zero are the contiguous layout of
/// each tensor's own head dim (token = heads_kv·head_dim(_v), head = head_dim(_v), page = page_size·token);
/// otherwise all three are given and shared by K and V. Throws TraceError "<op>: paged KV cache: <field>
/// <value> ..." for: dtype other than bf16/f16; page_size not a power of two in 1 … 256; head_dim or head_dim_v
/// (when not 0) outside [16, 256]; heads_kv < 1; num_pages or max_pages_per_seq < 0; a negative stride; some
/// but not all of the three page strides given; a block_table_stride below max_pages_per_seq (rows would
/// overlap); strides under which two elements of K or of V share an address (a head, token or page reaching
/// into the next); pages spanning more than 2^62 elements; null k_pages / v_pages when num_pages > 0.
CacheLayout cache_layout(const PagedKVCache &c, const char *op);

/// Checks the buffers behind a cache of layout `l` for an operation on `batch` sequences (batch < 0: one that
/// reads no block table or lengths, e.g. an append): the pages non-null and, where their byte counts are
/// known, large enough for the layout; the block table and lengths non-null and large enough for `batch`
/// rows, and the block table's offsets within 32 bits (the kernels index it in i32). TraceError naming `op`.
void check_cache_buffers(const PagedKVCache &c, const CacheLayout &l, int batch, const char *op);

/// Checks a decode request against a cache of layout `l` before anything is planned: batch ≥ 0, heads_q ≥ 1 and
/// a multiple of heads_kv, at most 256 query rows per KV head ((heads_q / heads_kv)·seqlen_q), max_seq_len ≥ 0,
/// seqlen_q in 1 … 16, and the options' counts not negative (num_splits at most kMaxSplits). TraceError
/// "<op>: ..." naming the field and value.
void check_decode_request(const DecodeShape &shape, const CacheLayout &l, const DecodeOptions &opt, const char *op);

}  // namespace tilejit::attention::paged
