// The block-mask build: per (batch, query head, query block), the list of non-empty key blocks in increasing
// order, each encoded as index·2 + (1 when every valid position of the tile is visible), and the list's
// length. Only valid positions (row < seqlen_q, col < seqlen_k) count. The backward also needs them transposed:
// per key block, the query blocks that see it (build_transposed_lists), compacted by the same list kernel
// reading the statuses by column.
//
// Two kernels, so that the work spreads over the whole device however few lists there are (one list per
// query block when the mask depends on neither b nor h): the first evaluates the mask on one (query block,
// key block) tile per program and writes its status (0 empty, 1 partial, 2 full; tiles outside the band or
// the sequence are empty without evaluating the function); the second compacts each row of statuses into its
// list, CHUNK key blocks at a time, each entry's place the count of non-empty blocks before it (a
// triangular sum), so the lists come out in order without atomics. Where the mask does not depend on b / h
// (analyze_mask), lists are built for batch / head 0 only and the attention kernel reads them for every one.
#include <algorithm>
#include <atomic>
#include <limits>

#include <fmt/format.h>

#include "kernels/flex/flex_internal.h"
#include "kernels/flex/kernel_lru.h"
#include "kernels/launch_options.h"
#include "tilejit/error.h"
#include "tilejit/ops.h"

namespace tilejit::attention {
namespace flex {
namespace {

std::atomic<uint64_t> g_builds{0}, g_lists_built{0}, g_cache_hits{0};

ParamTable tile_params() {
  using K = detail::ParamKind;
  ParamTable t;
  t.add("STATUS", K::Ptr, DType::i8);
  for (const char *n : {"CU_SEQLENS_Q", "CU_SEQLENS_K"}) t.add(n, K::Ptr, DType::i32);
  // Lengths, block counts and band sides change from call to call and gain nothing from divisibility here
  // (scalar offsets and compares): not specialized, so every shape shares one compiled kernel.
  for (const char *n : {"seqlen_q", "seqlen_k", "num_q_blocks", "num_k_blocks", "band_left", "band_right",
                        "band_bottom_right"})
    t.add(n, K::I32, DType::i32, false);
  for (const char *n : {"BLOCK_M", "BLOCK_N"}) t.add(n, K::ConstInt);
  for (const char *n : {"VARLEN", "HAS_BAND"}) t.add(n, K::ConstBool, DType::i1);
  return t;
}

ParamTable list_params() {
  using K = detail::ParamKind;
  ParamTable t;
  for (const char *n : {"KV_BLOCKS", "KV_COUNTS"}) t.add(n, K::Ptr, DType::i32);
  t.add("STATUS", K::Ptr, DType::i8);
  for (const char *n : {"CU_SEQLENS_Q", "CU_SEQLENS_K"}) t.add(n, K::Ptr, DType::i32);
  for (const char *n : {"seqlen_q", "seqlen_k", "num_q_blocks", "num_k_blocks"}) t.add(n, K::I32, DType::i32, false);
  for (const char *n : {"BLOCK_M", "BLOCK_N", "CHUNK"}) t.add(n, K::ConstInt);
  for (const char *n : {"VARLEN", "TRANSPOSED"}) t.add(n, K::ConstBool, DType::i1);
  return t;
}

/// Grid (num_q_blocks · num_k_blocks, heads with lists, batches with lists).
void trace_tiles(const Mask &mask, std::span<const detail::ArgValue> a) {
  auto P = [](int i) { return detail::param_tile(i); };
  auto C = [&](int i) { return int(a[size_t(i)].i); };
  const int BM = C(tBlockM), BN = C(tBlockN);
  const bool varlen = C(tVarlen), has_band = C(tHasBand);
  Tile pid = program_id(0), h = program_id(1), b = program_id(2);
  Tile qb = pid / P(tNumKBlocks);
  Tile kb = pid - qb * P(tNumKBlocks);
  Sequence sq = sequence(varlen, b, P(tSeqlenQ), P(tSeqlenK), P(tCuQ), P(tCuK));
  ModScope scope(sq.seqlen_q, sq.seqlen_k, sq.q_start, sq.k_start);
  Tile m0 = qb * BM, n0 = kb * BN;
  Tile rows_end = minimum(m0 + BM, sq.seqlen_q), cols_end = minimum(n0 + BN, sq.seqlen_k);
  Tile live = (m0 < sq.seqlen_q) & (n0 < sq.seqlen_k);
  BandTiles band;
  if (has_band) {
    band = {P(tBandLeft), P(tBandRight), P(tBandBottomRight) * (sq.seqlen_k - sq.seqlen_q)};
    // The band's keys for rows m0..rows_end-1 form one range (left, right ≥ 0): a tile outside it is empty.
    live = live & (n0 <= rows_end - 1 + band.off + band.right) & (cols_end - 1 >= m0 + band.off - band.left);
  }
  Tile status = zeros({}, DType::i32);
  if_(live, [&] {
    Tile rows = m0 + arange(0, BM), cols = n0 + arange(0, BN);
    Tile valid = (rows < sq.seqlen_q)(_, None) & (cols < sq.seqlen_k)(None, _);
    // Clamped into the sequence as in the attention kernel, so table lookups never leave it.
    Tile q_idx = minimum(rows, sq.seqlen_q - 1)(_, None);
    Tile kv_idx = minimum(cols, sq.seqlen_k - 1)(None, _);
    Tile vis = visible(mask, has_band, band, b, h, q_idx, kv_idx);
    Tile seen = vis.valid() ? (valid & vis) : valid;
    Tile n_seen = sum(sum(seen.to(DType::i32), 1), 0);
    Tile n_valid = (rows_end - m0) * (cols_end - n0);
    status = where(n_seen == 0, 0, where(n_seen == n_valid, 2, 1));
  });
  Tile row = (b * num_programs(1) + h) * P(tNumQBlocks) + qb;
  store(P(tStatus) + (row.to(DType::i64) * P(tNumKBlocks) + kb), status.to(DType::i8));
}

/// Grid (num_q_blocks, heads with lists, batches with lists): per query block, its key blocks. TRANSPOSED: grid
/// (num_k_blocks, ...), per key block, its query blocks (the statuses read by column).
void trace_lists(std::span<const detail::ArgValue> a) {
  auto P = [](int i) { return detail::param_tile(i); };
  auto C = [&](int i) { return int(a[size_t(i)].i); };
  const int BM = C(lBlockM), BN = C(lBlockN), CH = C(lChunk);
  const bool transposed = C(lTransposed);
  Tile own = program_id(0), h = program_id(1), b = program_id(2);
  Sequence sq = sequence(C(lVarlen), b, P(lSeqlenQ), P(lSeqlenK), P(lCuQ), P(lCuK));
  Tile lists0 = b * num_programs(1) + h;  // this (batch, head)'s first list
  Tile nq = P(lNumQBlocks), nk = P(lNumKBlocks);
  // This list's row of statuses: [query block, key block] at (lists0 · nq + qb) · nk + kb.
  Tile row = lists0 * (transposed ? nk : nq) + own;
  Tile base = row.to(DType::i64) * (transposed ? nq : nk);
  Tile n_blocks = transposed ? where(own * BN < sq.seqlen_k, (sq.seqlen_q + (BM - 1)) / BM, 0)
                             : where(own * BM < sq.seqlen_q, (sq.seqlen_k + (BN - 1)) / BN, 0);
  auto status_at = [&](const Tile &others) {
    if (!transposed) return P(lStatus) + base + others;
    return P(lStatus) + ((lists0 * nq).to(DType::i64) + others) * nk + own;
  };
  Tile j = arange(0, CH);
  Tile before = j(_, None) < j(None, _);  // [i, j]: i comes before j
  Tile count = zeros({}, DType::i32);
  for_range(0, n_blocks, CH, [&](I32 c) {
    Tile others = c + j;
    Tile status = load(status_at(others), others < n_blocks, 0).to(DType::i32);
    Tile non_empty = status > 0;
    Tile ne = non_empty.to(DType::i32);
    Tile place = count + sum(where(before, ne(_, None), 0), 0);
    store(P(lKvBlocks) + base + place, others * 2 + (status == 2).to(DType::i32), non_empty);
    count = count + sum(ne, 0);
  });
  store(P(lKvCounts) + row, count);
}

}  // namespace

BlockMaskLaunches block_mask_launches(const Mask &mask, const FlexShape &s, const FlexOptions &opt,
                                      DevicePtr kv_blocks, DevicePtr counts, DevicePtr status, int lists_b,
                                      int lists_h, int num_q_blocks, int num_k_blocks) {
  static KernelLru<const void *> tiles_by_fn(kMaxCachedModKernels);
  static std::shared_ptr<KernelBase> lists_kernel = [] {
    ParamTable t = list_params();
    return std::make_shared<KernelBase>("flex_block_mask_lists", std::move(t.decls), std::move(t.names),
                                        [](std::span<const detail::ArgValue> a) { trace_lists(a); });
  }();
  BlockMaskLaunches L;
  // The band is applied through runtime arguments, so the traced kernel depends on the function alone; the
  // trace keeps a copy of the mask (its identity stays unique while cached).
  L.tiles = tiles_by_fn.get(mask.fn.identity(), [&] {
    ParamTable t = tile_params();
    Mask fn_only(mask.fn);
    return std::make_shared<KernelBase>("flex_block_mask_tiles", std::move(t.decls), std::move(t.names),
                                        [fn_only](std::span<const detail::ArgValue> a) { trace_tiles(fn_only, a); });
  });
  L.lists = lists_kernel;
  BandArgs band = band_args(mask.band);
  const bool varlen = opt.cu_seqlens_q.address != 0;
  std::vector<detail::ArgValue> &t = L.tile_args;
  t.resize(kNumBlockMaskTileParams);
  t[tStatus] = ptr_arg(status);
  t[tCuQ] = ptr_arg(opt.cu_seqlens_q);
  t[tCuK] = ptr_arg(opt.cu_seqlens_k);
  t[tSeqlenQ] = int_arg(s.seqlen_q);
  t[tSeqlenK] = int_arg(s.seqlen_k);
  t[tNumQBlocks] = int_arg(num_q_blocks);
  t[tNumKBlocks] = int_arg(num_k_blocks);
  t[tBandLeft] = int_arg(band.left);
  t[tBandRight] = int_arg(band.right);
  t[tBandBottomRight] = int_arg(band.bottom_right);
  t[tBlockM] = int_arg(opt.block_m);
  t[tBlockN] = int_arg(opt.block_n);
  t[tVarlen] = int_arg(varlen);
  t[tHasBand] = int_arg(mask.band.has_value());
  std::vector<detail::ArgValue> &l = L.list_args;
  l.resize(kNumBlockMaskListParams);
  l[lKvBlocks] = ptr_arg(kv_blocks);
  l[lKvCounts] = ptr_arg(counts);
  l[lStatus] = ptr_arg(status);
  l[lCuQ] = ptr_arg(opt.cu_seqlens_q);
  l[lCuK] = ptr_arg(opt.cu_seqlens_k);
  l[lSeqlenQ] = int_arg(s.seqlen_q);
  l[lSeqlenK] = int_arg(s.seqlen_k);
  l[lNumQBlocks] = int_arg(num_q_blocks);
  l[lNumKBlocks] = int_arg(num_k_blocks);
  l[lBlockM] = int_arg(opt.block_m);
  l[lBlockN] = int_arg(opt.block_n);
  // One pass over a row for up to 64 key blocks (seqlen_k 4096 at BLOCK_N 64); the triangular sum is
  // CHUNK² elements, 32 per thread at 64 with 4 warps.
  l[lChunk] = int_arg(std::clamp(int(autotune::pow2_bucket(num_k_blocks)), 16, 64));
  l[lVarlen] = int_arg(varlen);
  l[lTransposed] = int_arg(false);
  L.tile_grid = Grid{uint32_t(int64_t(num_q_blocks) * num_k_blocks), uint32_t(lists_h), uint32_t(lists_b)};
  L.list_grid = Grid{uint32_t(num_q_blocks), uint32_t(lists_h), uint32_t(lists_b)};
  LaunchConfig cfg = launch_config(opt);
  cfg.num_stages = 1;
  cfg.min_ctas_per_sm = 0;
  // About 32 tile elements per thread: small programs, many resident per SM.
  cfg.num_warps = std::clamp(opt.block_m * opt.block_n / 1024, 1, 8);
  L.tile_cfg = cfg;
  cfg.num_warps = 4;
  L.list_cfg = cfg;
  return L;
}

ListDims list_dims(const BlockMask &bm, const FlexShape &s) {
  return {bm.shared_batches ? std::min(s.batch, 1) : s.batch, bm.shared_heads ? std::min(s.heads_q, 1) : s.heads_q};
}

ListStrides list_strides(const BlockMask *bm, const FlexShape &s, int64_t blocks) {
  const int64_t head = bm && bm->shared_heads ? 0 : blocks;
  return {bm && bm->shared_batches ? 0 : (bm && bm->shared_heads ? 1 : s.heads_q) * blocks, head};
}

void build_transposed_lists(const BlockMask &bm, const FlexShape &s, const FlexOptions &opt, DevicePtr q_blocks,
                            DevicePtr q_counts) {
  const auto [lists_b, lists_h] = list_dims(bm, s);
  const size_t entries = size_t(lists_b) * lists_h * bm.num_q_blocks * bm.num_k_blocks;
  if (entries == 0) return;
  // The statuses follow the lists in bm.kv_blocks (create_block_mask).
  if (bm.kv_blocks.bytes() < entries * 5)
    throw TraceError(fmt::format("attention::flex_backward: the block mask's kv_blocks holds {} bytes; the backward "
                                 "reads its {} lists and then one status byte per list entry ({} bytes): pass a "
                                 "block mask made by create_block_mask",
                                 bm.kv_blocks.bytes(), entries / std::max(bm.num_k_blocks, 1), entries * 5));
  const DevicePtr status{bm.kv_blocks.address() + entries * 4, entries};
  BlockMaskLaunches L = block_mask_launches(opt.mask, s, opt, q_blocks, q_counts, status, lists_b, lists_h,
                                            bm.num_q_blocks, bm.num_k_blocks);
  L.list_args[lTransposed] = int_arg(true);
  L.list_args[lChunk] = int_arg(std::clamp(int(autotune::pow2_bucket(bm.num_q_blocks)), 16, 64));
  L.lists->launch(Grid{uint32_t(bm.num_k_blocks), uint32_t(lists_h), uint32_t(lists_b)}, L.list_cfg, L.list_args);
}

void check_block_mask(const BlockMask &bm, const FlexShape &s, const FlexOptions &opt, int64_t nqb, int64_t nkb,
                      const char *op) {
  if (bm.counts.address() == 0)
    throw TraceError(fmt::format("{}: FlexOptions::block_mask is empty (default-constructed or moved from); make it "
                                 "with create_block_mask",
                                 op));
  if (bm.mask_fn != opt.mask.fn.identity())
    throw TraceError(fmt::format("{}: the block mask was made from {} than this call's mask; pass the Mask object it "
                                 "was made from (copies share its function)",
                                 op,
                                 opt.mask.fn ? "another mask function" : "a mask function, but this call's mask has "
                                                                         "none, which is a different mask"));
  // A mask made for no batch or head holds no lists, whatever its sharing.
  const bool no_lists = bm.batch == 0 || bm.heads == 0, call_lists = s.batch > 0 && s.heads_q > 0;
  if ((!bm.shared_batches && bm.batch != s.batch) || (!bm.shared_heads && bm.heads != s.heads_q) ||
      (no_lists && call_lists) || bm.block_m != opt.block_m || bm.block_n != opt.block_n ||
      bm.num_q_blocks != nqb || bm.num_k_blocks != nkb || bm.seqlen_q != s.seqlen_q || bm.seqlen_k != s.seqlen_k)
    throw TraceError(fmt::format("{}: the block mask was made for batch {}, heads {}, {}x{} blocks of {}x{} (seqlen "
                                 "{}/{}); this call needs batch {}, heads {}, {}x{} blocks of {}x{} (seqlen {}/{})",
                                 op, bm.batch, bm.heads, bm.num_q_blocks, bm.num_k_blocks, bm.block_m, bm.block_n,
                                 bm.seqlen_q, bm.seqlen_k, s.batch, s.heads_q, nqb, nkb, opt.block_m, opt.block_n,
                                 s.seqlen_q, s.seqlen_k));
  auto band_text = [](const std::optional<Band> &b) {
    const char *align = b && b->align == Align::BottomRight ? "bottom-right" : "top-left";
    return b ? fmt::format("[{}, {}] {}", b->left, b->right, align)
             : std::string("none");
  };
  const BandArgs made = band_args(bm.band), call = band_args(opt.mask.band);  // as the kernels see them
  if (bm.band.has_value() != opt.mask.band.has_value() || made.left != call.left || made.right != call.right ||
      made.bottom_right != call.bottom_right)
    throw TraceError(fmt::format("{}: the block mask was made with band {}, this call's mask has band {}", op,
                                 band_text(bm.band), band_text(opt.mask.band)));
  if (bm.cu_seqlens_q != opt.cu_seqlens_q.address || bm.cu_seqlens_k != opt.cu_seqlens_k.address)
    throw TraceError(fmt::format("{}: the block mask was made for cu_seqlens at {:#x}/{:#x} ({}), this call has "
                                 "{:#x}/{:#x} ({}); make it with the call's cu_seqlens",
                                 op, bm.cu_seqlens_q, bm.cu_seqlens_k, bm.cu_seqlens_q ? "varlen" : "dense",
                                 opt.cu_seqlens_q.address, opt.cu_seqlens_k.address,
                                 opt.cu_seqlens_q.address ? "varlen" : "dense"));
}

void count_block_mask_cache_hit() { ++g_cache_hits; }

BlockMaskStats block_mask_stats() {
  BlockMaskStats s;
  s.builds = g_builds.load();
  s.lists_built = g_lists_built.load();
  s.cache_hits = g_cache_hits.load();
  return s;
}

}  // namespace flex

BlockMask create_block_mask(const Mask &mask, const FlexShape &s, const FlexOptions &opt) {
  using namespace flex;
  bool varlen = opt.cu_seqlens_q.address != 0;
  if (varlen != (opt.cu_seqlens_k.address != 0))
    throw TraceError("create_block_mask: give both cu_seqlens_q and cu_seqlens_k, or neither");
  if (!kernels::pow2_at_least(opt.block_m, 16) || !kernels::pow2_at_least(opt.block_n, 16) || opt.block_m > 256 ||
      opt.block_n > 256)
    throw TraceError(fmt::format("create_block_mask: block sizes {}x{} must be powers of two from 16 to 256 (as "
                                 "flex_forward's)", opt.block_m, opt.block_n));
  if (s.batch < 0 || s.heads_q < 0 || s.seqlen_q < 0 || s.seqlen_k < 0)
    throw TraceError("create_block_mask: sizes must be non-negative");
  if (s.heads_q > 65535 || s.batch > 65535)
    throw TraceError(fmt::format("create_block_mask: heads {} and batch {} must each be ≤ 65535 (grid y and z)",
                                 s.heads_q, s.batch));
  // Per sequence lengths (varlen) make every batch's lists its own.
  bool per_b = varlen, per_h = false;
  if (mask.fn) {
    std::shared_ptr<const MaskAnalysis> an = analyze_mask(mask.fn, varlen);
    per_b = per_b || an->reads_b;
    per_h = an->reads_h;
  }
  BlockMask bm;
  bm.batch = s.batch;
  bm.heads = s.heads_q;
  bm.shared_batches = !per_b;
  bm.shared_heads = !per_h;
  bm.mask_fn = mask.fn.identity();
  bm.band = mask.band;
  bm.seqlen_q = s.seqlen_q;
  bm.seqlen_k = s.seqlen_k;
  bm.cu_seqlens_q = opt.cu_seqlens_q.address;
  bm.cu_seqlens_k = opt.cu_seqlens_k.address;
  bm.block_m = opt.block_m;
  bm.block_n = opt.block_n;
  bm.num_q_blocks = (s.seqlen_q + opt.block_m - 1) / opt.block_m;
  bm.num_k_blocks = (s.seqlen_k + opt.block_n - 1) / opt.block_n;
  const int lists_b = per_b ? s.batch : std::min(s.batch, 1), lists_h = per_h ? s.heads_q : std::min(s.heads_q, 1);
  if (int64_t(bm.num_q_blocks) * bm.num_k_blocks > std::numeric_limits<int32_t>::max())
    throw TraceError(fmt::format("create_block_mask: {} x {} blocks of {}x{} are too many (at most 2^31 - 1 tiles "
                                 "per batch and head)", bm.num_q_blocks, bm.num_k_blocks, opt.block_m, opt.block_n));
  size_t lists = size_t(lists_b) * lists_h * bm.num_q_blocks;
  size_t entries = lists * bm.num_k_blocks;
  Backend where = resolve_backend(opt.backend);
  bm.counts = Buffer(std::max<size_t>(lists, 1) * 4, where);
  // The lists, then one status byte per entry (the tile kernel's output, read by the compaction).
  bm.kv_blocks = Buffer(std::max<size_t>(entries * 5, 1), where);
  if (lists == 0) return bm;
  DevicePtr kv{bm.kv_blocks.address(), entries * 4}, counts{bm.counts.address(), bm.counts.bytes()};
  DevicePtr status{bm.kv_blocks.address() + entries * 4, entries};
  BlockMaskLaunches L =
      block_mask_launches(mask, s, opt, kv, counts, status, lists_b, lists_h, bm.num_q_blocks, bm.num_k_blocks);
  L.tiles->launch(L.tile_grid, L.tile_cfg, L.tile_args);
  L.lists->launch(L.list_grid, L.list_cfg, L.list_args);
  ++g_builds;
  g_lists_built += uint64_t(lists_b) * lists_h;
  return bm;
}

}  // namespace tilejit::attention
