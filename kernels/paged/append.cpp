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

#include "kernels/paged/append.h"
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

/// A launch's sizes, strides and configuration, checked.
struct Launch {
  paged::CacheLayout l;
  int64_t k_token = 0, k_head = 0, v_token = 0, v_head = 0;  // k_new / v_new
  int pad_d = 0, pad_dv = 0, block_h = 0;
  uint32_t head_groups = 0;
  int num_warps = 0;
};

Launch plan_launch(const PagedKVCache &cache, const AppendOptions &opt) {
  Launch x;
  x.l = paged::cache_layout(cache, kOp);
  if (opt.token_stride < 0 || opt.head_stride < 0)
    throw TraceError(fmt::format("{}: AppendOptions::token_stride {} and head_stride {} must not be negative (0: "
                                 "contiguous)",
                                 kOp, opt.token_stride, opt.head_stride));
  const int D = x.l.head_dim, DV = x.l.head_dim_v, H = cache.heads_kv;
  // As the cache's: zero strides are the contiguous ones of each tensor's own head dim.
  x.k_head = opt.head_stride ? opt.head_stride : D;
  x.v_head = opt.head_stride ? opt.head_stride : DV;
  x.k_token = opt.token_stride ? opt.token_stride : int64_t(H) * D;
  x.v_token = opt.token_stride ? opt.token_stride : int64_t(H) * DV;
  x.pad_d = pad16(D);
  x.pad_dv = pad16(DV);
  // About 4096 elements per tensor per program (32 per thread with 4 warps), whole heads.
  x.block_h = std::clamp(4096 / std::max(x.pad_d, x.pad_dv), 1, int(autotune::pow2_bucket(H)));
  x.head_groups = uint32_t((H + x.block_h - 1) / x.block_h);
  if (x.head_groups > 65535)
    throw TraceError(fmt::format("{}: paged KV cache: heads_kv {} needs {} programs per token, above the grid's 65535",
                                 kOp, H, x.head_groups));
  x.num_warps = std::clamp(x.block_h * std::max(x.pad_d, x.pad_dv) / 1024, 1, 4);
  return x;
}

/// Calls f(kernel, args...) with the kernel of the cache's dtype and the launch arguments.
template <class F>
auto with_kernel(const PagedKVCache &cache, const Launch &x, DevicePtr k_new, DevicePtr v_new, DevicePtr slots, F f) {
  const paged::CacheLayout &l = x.l;
  auto call = [&](const auto &kernel) {
    return f(kernel, k_new, v_new, slots, cache.k_pages, cache.v_pages, cache.heads_kv, x.k_token, x.k_head,
             x.v_token, x.v_head, l.page_stride, l.token_stride, l.head_stride, l.v_page_stride, l.v_token_stride,
             l.v_head_stride, cache.page_size, l.head_dim, l.head_dim_v, x.pad_d, x.pad_dv, x.block_h);
  };
  return cache.dtype == DType::bf16 ? call(append_kernel<bf16>()) : call(append_kernel<f16>());
}

}  // namespace

void paged_kv_append(const PagedKVCache &cache, DevicePtr k_new, DevicePtr v_new, DevicePtr slot_mapping, int tokens,
                     const AppendOptions &opt) {
  const Launch x = plan_launch(cache, opt);
  const paged::CacheLayout &l = x.l;
  const int esz = dtype_bytes(cache.dtype), H = cache.heads_kv;
  paged::check_cache_buffers(cache, l, -1, kOp);
  if (tokens < 0) throw TraceError(fmt::format("{}: tokens {} must not be negative", kOp, tokens));
  auto check = [&](DevicePtr p, const char *name, int64_t token_stride, int64_t head_stride, int d, int size) {
    if (p.address == 0) throw TraceError(fmt::format("{}: pointer '{}' is null", kOp, name));
    if (tokens == 0 || p.bytes == 0) return;
    __int128 need = (__int128(tokens - 1) * token_stride + __int128(H - 1) * head_stride + d) * size;
    if (__int128(p.bytes) < need)
      throw TraceError(fmt::format("{}: '{}' holds {} bytes, {} tokens of its shape and strides address {}", kOp,
                                   name, p.bytes, tokens, int64_t(need)));
  };
  check(k_new, "k_new", x.k_token, x.k_head, l.head_dim, esz);
  check(v_new, "v_new", x.v_token, x.v_head, l.head_dim_v, esz);
  check(slot_mapping, "slot_mapping", 1, 0, 1, 4);
  if (tokens == 0) return;
  LaunchConfig cfg;
  cfg.num_warps = x.num_warps;
  cfg.backend = opt.backend;
  cfg.stream = opt.stream;
  with_kernel(cache, x, k_new, v_new, slot_mapping, [&](const auto &kernel, const auto &...args) {
    kernel.launch(Grid{uint32_t(tokens), x.head_groups}, cfg, args...);
  });
}

namespace paged {

std::string append_ptx(const PagedKVCache &cache, const std::string &arch) {
  const Launch x = plan_launch(cache, {});
  LaunchConfig cfg;
  cfg.num_warps = x.num_warps;
  cfg.arch = arch;
  const DevicePtr aligned{256, 0};
  return with_kernel(cache, x, aligned, aligned, aligned, [&](const auto &kernel, const auto &...args) {
    return kernel.ptx(cfg, args...).ptx;
  });
}

}  // namespace paged
}  // namespace tilejit::attention
