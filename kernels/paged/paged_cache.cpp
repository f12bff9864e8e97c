#include "kernels/paged/paged_cache.h"

#include <algorithm>
#include <array>
#include <limits>
#include <climits>
#include <tuple>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "kernels/strided_extent.h"
#include "tilejit/error.h"

namespace tilejit::attention::paged {
namespace {

struct Dim {
  int64_t extent, stride;
  const char *name;
};

struct Overlap {
  Dim dim;
  __int128 reach;  // the largest offset the dims inside it reach
};

/// The first dim (by increasing stride) whose stride does not clear everything inside it: with the dims
/// sorted by stride, dim i overlaps when stride_i ≤ Σ_{j<i} stride_j·(extent_j − 1) (its index 1 would land
/// on an address an inner index already reaches). Dims of extent 1 take no part.
std::optional<Overlap> overlapping(std::array<Dim, 4> dims) {
  std::stable_sort(dims.begin(), dims.end(), [](const Dim &a, const Dim &b) { return a.stride < b.stride; });
  __int128 reach = 0;
  for (const Dim &d : dims) {
    if (d.extent <= 1) continue;
    if (__int128(d.stride) <= reach) return Overlap{d, reach};
    reach += __int128(d.stride) * (d.extent - 1);
  }
  return std::nullopt;
}

}  // namespace

CacheLayout cache_layout(const PagedKVCache &c, const char *op) {
  auto fail = [&](const std::string &why) { return TraceError(fmt::format("{}: paged KV cache: {}", op, why)); };
  if (c.dtype != DType::bf16 && c.dtype != DType::f16)
    throw fail(fmt::format("dtype {} is not supported (bf16 or f16)", dtype_name(c.dtype)));
  if (c.page_size < 1 || c.page_size > 256 || (c.page_size & (c.page_size - 1)))
    throw fail(fmt::format("page_size {} must be a power of two from 1 to 256", c.page_size));
  if (c.head_dim < 16 || c.head_dim > 256)
    throw fail(fmt::format("head_dim {} is not supported (16 to 256)", c.head_dim));
  if (c.head_dim_v != 0 && (c.head_dim_v < 16 || c.head_dim_v > 256))
    throw fail(fmt::format("head_dim_v {} is not supported (16 to 256, or 0: head_dim)", c.head_dim_v));
  if (c.heads_kv < 1) throw fail(fmt::format("heads_kv {} must be at least 1", c.heads_kv));
  if (c.num_pages < 0) throw fail(fmt::format("num_pages {} must not be negative", c.num_pages));
  if (c.max_pages_per_seq < 0)
    throw fail(fmt::format("max_pages_per_seq {} must not be negative", c.max_pages_per_seq));
  for (auto [name, v] :
       {std::pair{"page_stride", c.page_stride}, std::pair{"token_stride", c.token_stride},
        std::pair{"head_stride", c.head_stride}, std::pair{"block_table_stride", c.block_table_stride}})
    if (v < 0) throw fail(fmt::format("{} {} must not be negative (0: contiguous)", name, v));
  bool contiguous = c.page_stride == 0 && c.token_stride == 0 && c.head_stride == 0;
  if (!contiguous && (c.page_stride == 0 || c.token_stride == 0 || c.head_stride == 0))
    throw fail(fmt::format("give all three strides (page_stride {}, token_stride {}, head_stride {}) or none",
                           c.page_stride, c.token_stride, c.head_stride));
  if (c.block_table_stride != 0 && c.block_table_stride < c.max_pages_per_seq)
    throw fail(fmt::format("block_table_stride {} is below max_pages_per_seq {} (rows would overlap)",
                           c.block_table_stride, c.max_pages_per_seq));
  CacheLayout l;
  l.page_size = c.page_size;
  l.heads_kv = c.heads_kv;
  l.head_dim = c.head_dim;
  l.head_dim_v = c.head_dim_v == 0 ? c.head_dim : c.head_dim_v;
  auto fill = [&](int d, int64_t &page, int64_t &token, int64_t &head, int64_t &last, const char *tensor) {
    head = contiguous ? d : c.head_stride;
    token = contiguous ? int64_t(c.heads_kv) * d : c.token_stride;
    page = contiguous ? int64_t(c.page_size) * token : c.page_stride;
    // The head dim first: a stride equal to its 1 is the one reported.
    std::array<Dim, 4> dims{Dim{d, 1, "head_dim"}, Dim{c.heads_kv, head, "head_stride"},
                            Dim{c.page_size, token, "token_stride"}, Dim{c.num_pages, page, "page_stride"}};
    if (std::optional<Overlap> o = overlapping(dims))
      throw fail(fmt::format("{} {} makes {} overlap: the dims inside it reach {} elements (page_stride {}, "
                             "token_stride {}, head_stride {}, {} values per head; num_pages {}, page_size {}, "
                             "heads_kv {})",
                             o->dim.name, o->dim.stride, tensor, int64_t(o->reach) + 1, page, token, head, d,
                             c.num_pages, c.page_size, c.heads_kv));
    if (c.num_pages == 0) return;
    const std::optional<int64_t> end =
        kernels::last_offset({{c.num_pages, page}, {c.page_size, token}, {c.heads_kv, head}, {d, 1}});
    if (!end)
      throw fail(fmt::format("the {} pages would span more than 2^62 elements (page_stride {}, token_stride {}, "
                             "head_stride {}; num_pages {}, page_size {}, heads_kv {})",
                             tensor, page, token, head, c.num_pages, c.page_size, c.heads_kv));
    last = *end;
  };
  fill(l.head_dim, l.page_stride, l.token_stride, l.head_stride, l.last_k, "K");
  fill(l.head_dim_v, l.v_page_stride, l.v_token_stride, l.v_head_stride, l.last_v, "V");
  l.bt_stride = c.block_table_stride == 0 ? c.max_pages_per_seq : c.block_table_stride;
  l.max_seq_len = int64_t(c.max_pages_per_seq) * c.page_size;
  if (c.num_pages > 0)
    for (auto [name, p] : {std::pair{"k_pages", c.k_pages}, std::pair{"v_pages", c.v_pages}})
      if (p.address == 0) throw fail(fmt::format("{} is null", name));
  l.large = std::max(l.last_k, l.last_v) + 256 > std::numeric_limits<int32_t>::max();
  return l;
}

void check_cache_buffers(const PagedKVCache &c, const CacheLayout &l, int batch, const char *op) {
  const int esz = dtype_bytes(c.dtype);
  for (auto [name, p, last] : {std::tuple{"k_pages", c.k_pages, l.last_k}, std::tuple{"v_pages", c.v_pages, l.last_v}}) {
    if (last < 0) continue;
    if (p.address == 0) throw TraceError(fmt::format("{}: paged KV cache: '{}' is null", op, name));
    if (p.bytes != 0 && __int128(p.bytes) < __int128(last + 1) * esz)
      throw TraceError(fmt::format("{}: paged KV cache: {} holds {} bytes, the layout addresses {}", op, name,
                                   p.bytes, (last + 1) * esz));
  }
  if (batch <= 0) return;
  const int64_t table = int64_t(batch - 1) * l.bt_stride + c.max_pages_per_seq;
  if (table > INT32_MAX)
    throw TraceError(fmt::format("{}: paged KV cache: a block table of {} rows of stride {} ({} entries) exceeds 2^31 "
                                 "− 1 entries",
                                 op, batch, l.bt_stride, table));
  auto need = [&](DevicePtr d, int64_t count, const char *name) {
    if (count <= 0) return;
    if (d.address == 0) throw TraceError(fmt::format("{}: paged KV cache: '{}' is null", op, name));
    if (d.bytes != 0 && d.bytes < size_t(count) * 4)
      throw TraceError(fmt::format("{}: paged KV cache: '{}' holds {} bytes; {} i32 entries are needed", op, name,
                                   d.bytes, count));
  };
  need(c.block_table, table, "block_table");
  need(c.seq_lens, batch, "seq_lens");
}

}  // namespace tilejit::attention::paged
