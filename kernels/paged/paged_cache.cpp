#include "kernels/paged/paged_cache.h"

#include <limits>

#include <fmt/format.h>

#include "tilejit/error.h"

namespace tilejit::attention::paged {

CacheLayout cache_layout(const PagedKVCache &c, const char *op) {
  auto fail = [&](const std::string &why) { return TraceError(fmt::format("{}: paged KV cache: {}", op, why)); };
  if (c.dtype != DType::bf16 && c.dtype != DType::f16)
    throw fail(fmt::format("dtype {} is not supported (bf16 or f16)", dtype_name(c.dtype)));
  if (c.page_size < 1 || c.page_size > 256 || (c.page_size & (c.page_size - 1)))
    throw fail(fmt::format("page_size {} must be a power of two from 1 to 256", c.page_size));
  CacheLayout l;
  l.page_size = c.page_size;
  l.heads_kv = c.heads_kv;
  l.head_dim = c.head_dim;
  l.head_dim_v = c.head_dim_v == 0 ? c.head_dim : c.head_dim_v;
  for (int d : {l.head_dim, l.head_dim_v})
    if (d < 16 || d > 256) throw fail(fmt::format("head dim {} is not supported (16 to 256)", d));
  if (c.num_pages < 0 || c.heads_kv < 1 || c.max_pages_per_seq < 0)
    throw fail(fmt::format("num_pages {} and max_pages_per_seq {} must be ≥ 0 and heads_kv {} ≥ 1", c.num_pages,
                           c.max_pages_per_seq, c.heads_kv));
  if (c.page_stride < 0 || c.token_stride < 0 || c.head_stride < 0 || c.block_table_stride < 0)
    throw fail(fmt::format("strides (page {}, token {}, head {}, block table {}) must not be negative", c.page_stride,
                           c.token_stride, c.head_stride, c.block_table_stride));
  bool contiguous = c.page_stride == 0 && c.token_stride == 0 && c.head_stride == 0;
  if (!contiguous && (c.page_stride == 0 || c.token_stride == 0 || c.head_stride == 0))
    throw fail(fmt::format("give all three strides (page {}, token {}, head {}) or none", c.page_stride,
                           c.token_stride, c.head_stride));
  auto fill = [&](int d, int64_t &page, int64_t &token, int64_t &head) {
    head = contiguous ? d : c.head_stride;
    token = contiguous ? int64_t(c.heads_kv) * d : c.token_stride;
    page = contiguous ? int64_t(c.page_size) * token : c.page_stride;
  };
  fill(l.head_dim, l.page_stride, l.token_stride, l.head_stride);
  fill(l.head_dim_v, l.v_page_stride, l.v_token_stride, l.v_head_stride);
  l.bt_stride = c.block_table_stride == 0 ? c.max_pages_per_seq : c.block_table_stride;
  if (c.num_pages > 0) {
    if (c.k_pages.address == 0 || c.v_pages.address == 0)
      throw fail("k_pages and v_pages must not be null");
    auto last = [&](int d) {
      return int64_t(c.num_pages - 1) * l.page_stride + int64_t(c.heads_kv - 1) * l.head_stride +
             int64_t(c.page_size - 1) * l.token_stride + d - 1;
    };
    l.last_k = last(l.head_dim);
    l.last_v = last(l.head_dim_v);
  }
  l.large = std::max(l.last_k, l.last_v) + 256 > std::numeric_limits<int32_t>::max();
  return l;
}

}  // namespace tilejit::attention::paged
