// A paged KV cache's layout, validated once for every kernel that reads or writes it (append, decode, the flex
// forward's chunked prefill). Not installed.
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
  int64_t last_k = -1, last_v = -1;  // the furthest element of the pages addressed (−1: no pages)
  bool large = false;                // some element offset needs 64 bits
};

/// Validates `c` for operation `op` (named in errors) and fills in the defaults. Throws TraceError naming the
/// field and value: dtype other than bf16/f16; page size not a power of two in 1 … 256; head dims outside
/// [16, 256]; negative counts or strides; null pointers (pages, block table, lengths) when num_pages > 0.
CacheLayout cache_layout(const PagedKVCache &c, const char *op);

}  // namespace tilejit::attention::paged
