// paged_kv_append: each new token's K [heads_kv, head_dim] and V [heads_kv, head_dim_v] copied into its slot of
// the paged cache. One program per (token, group of heads): the token's slot is one scalar load, the copy a
// [BLOCK_H, head dim] tile each for K and V, so a decode step's few tokens still spread over heads_kv / BLOCK_H
// programs each. A negative slot disables every lane of its program (nothing read, nothing written). Offsets
// are 64-bit: a serving cache may span more than 2^31 elements.
#include <algorithm>
#include <bit>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "kernels/paged/paged_cache.h"
#include "tilejit/autotune.h"
#include "tilejit/error.h"
#include "tilejit/kernel.h"
#include "tilejit/ops.h"
#include "tilejit/paged_attention.h"

namespace tilejit::attention {
namespace {

constexpr const char *kOp = "attention::paged_kv_append";

template <class T>
auto &append_kernel() {
  static auto kernel = Kernel(
      "paged_kv_append",
      [](Ptr<T> k_new, Ptr<T> v_new, Ptr<i32> slots, Ptr<T> k_pages, Ptr<T> v_pages, I32 heads_kv,
         I64 new_k_token, I64 new_k_head, I64 new_v_token, I64 new_v_head, I64 k_page, I64 k_token, I64 k_head,
         I64 v_page, I64 v_token, I64 v_head, Constexpr<int> PAGE_SIZE, Constexpr<int> D, Constexpr<int> DV,
         Constexpr<int> PAD_D, Constexpr<int> PAD_DV, Constexpr<int> BLOCK_H) {
        Tile t = program_id(0).to(DType::i64);
        Tile slot = load(slots + t);
        Tile keep = slot >= 0;
        Tile s = where(keep, slot, 0);
        // The page size is a power of two: the slot splits by a shift and a mask.
        Tile page = (s >> std::countr_zero(unsigned(int(PAGE_SIZE)))).to(DType::i64);
        Tile offset = (s & (PAGE_SIZE - 1)).to(DType::i64);
        Tile h = program_id(1) * BLOCK_H + arange(0, BLOCK_H);
        Tile rows = keep & (h < heads_kv)(_, None);
        Tile h64 = h.to(DType::i64)(_, None);
        auto copy = [&](const Tile &src, const Tile &dst, const Tile &src_token, const Tile &src_head,
                        const Tile &page_stride, const Tile &token_stride, const Tile &head_stride, int d, int pad) {
          Tile lanes = arange(0, pad)(None, _);
          Tile mask = rows & (lanes < d);
          Tile from = src + (t * src_token + h64 * src_head + lanes);
          Tile to = dst + (page * page_stride + offset * token_stride + h64 * head_stride + lanes);
          store(to, load(from, mask), mask);
        };
        copy(k_new, k_pages, new_k_token, new_k_head, k_page, k_token, k_head, D, PAD_D);
        copy(v_new, v_pages, new_v_token, new_v_head, v_page, v_token, v_head, DV, PAD_DV);
      },
      {"k_new", "v_new", "slot_mapping", "k_pages", "v_pages", "heads_kv", "new_k_token_stride",
       "new_k_head_stride", "new_v_token_stride", "new_v_head_stride", "k_page_stride", "k_token_stride",
       "k_head_stride", "v_page_stride", "v_token_stride", "v_head_stride", "PAGE_SIZE", "D", "DV", "PAD_D",
       "PAD_DV", "BLOCK_H"});
  return kernel;
}

int pad16(int d) { return std::max(16, int(autotune::pow2_bucket(d))); }

}  // namespace

void paged_kv_append(const PagedKVCache &cache, DevicePtr k_new, DevicePtr v_new, DevicePtr slot_mapping, int tokens,
                     const AppendOptions &opt) {
  const paged::CacheLayout l = paged::cache_layout(cache, kOp);
  const int esz = dtype_bytes(cache.dtype);
  for (auto [name, p, last] : {std::tuple{"k_pages", cache.k_pages, l.last_k}, std::tuple{"v_pages", cache.v_pages, l.last_v}})
    if (p.bytes != 0 && __int128(p.bytes) < __int128(last + 1) * esz)
      throw TraceError(fmt::format("{}: paged KV cache: {} holds {} bytes, the layout addresses {}", kOp, name, p.bytes,
                                   (last + 1) * esz));
  if (tokens < 0) throw TraceError(fmt::format("{}: tokens {} must not be negative", kOp, tokens));
  if (opt.token_stride < 0 || opt.head_stride < 0)
    throw TraceError(fmt::format("{}: AppendOptions::token_stride {} and head_stride {} must not be negative (0: "
                                 "contiguous)",
                                 kOp, opt.token_stride, opt.head_stride));
  const int D = l.head_dim, DV = l.head_dim_v, H = cache.heads_kv;
  // As the cache's: a zero stride is the contiguous one of each tensor's own head dim.
  const int64_t k_head = opt.head_stride ? opt.head_stride : D, v_head = opt.head_stride ? opt.head_stride : DV;
  const int64_t k_token = opt.token_stride ? opt.token_stride : int64_t(H) * D;
  const int64_t v_token = opt.token_stride ? opt.token_stride : int64_t(H) * DV;
  auto check = [&](DevicePtr p, const char *name, int64_t token_stride, int64_t head_stride, int d, int esz) {
    if (p.address == 0) throw TraceError(fmt::format("{}: pointer '{}' is null", kOp, name));
    if (tokens == 0 || p.bytes == 0) return;
    __int128 need = (__int128(tokens - 1) * token_stride + __int128(H - 1) * head_stride + d) * esz;
    if (__int128(p.bytes) < need)
      throw TraceError(fmt::format("{}: '{}' holds {} bytes, {} tokens of its shape and strides address {}", kOp,
                                   name, p.bytes, tokens, int64_t(need)));
  };
  check(k_new, "k_new", k_token, k_head, D, esz);
  check(v_new, "v_new", v_token, v_head, DV, esz);
  check(slot_mapping, "slot_mapping", 1, 0, 1, 4);
  if (tokens == 0) return;

  const int pad_d = pad16(D), pad_dv = pad16(DV);
  // About 4096 elements per tensor per program (32 per thread with 4 warps), whole heads.
  const int block_h = std::clamp(4096 / std::max(pad_d, pad_dv), 1, int(autotune::pow2_bucket(H)));
  const uint32_t head_groups = uint32_t((H + block_h - 1) / block_h);
  if (head_groups > 65535)
    throw TraceError(fmt::format("{}: PagedKVCache::heads_kv {} needs {} programs per token, above the grid's "
                                 "65535", kOp, H, head_groups));
  LaunchConfig cfg;
  cfg.num_warps = std::clamp(block_h * std::max(pad_d, pad_dv) / 1024, 1, 4);
  cfg.backend = opt.backend;
  cfg.stream = opt.stream;
  Grid grid{uint32_t(tokens), head_groups};
  auto launch = [&](const auto &kernel) {
    kernel.launch(grid, cfg, k_new, v_new, slot_mapping, cache.k_pages, cache.v_pages, H, k_token, k_head, v_token,
                  v_head, l.page_stride, l.token_stride, l.head_stride, l.v_page_stride, l.v_token_stride,
                  l.v_head_stride, cache.page_size, D, DV, pad_d, pad_dv, block_h);
  };
  if (cache.dtype == DType::bf16) launch(append_kernel<bf16>());
  else launch(append_kernel<f16>());
}

}  // namespace tilejit::attention
