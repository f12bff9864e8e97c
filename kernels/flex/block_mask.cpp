// The block-mask kernel: evaluates a mask over every (query block, key block) tile on the device and
// writes, per (batch, query head, query block), the list of non-empty key blocks in increasing order,
// each encoded as index·2 + (1 when every valid position of the tile is visible), and the list's length.
// Program (query block, head, batch); a loop over the key blocks keeps a running count, so the list is
// compacted without atomics. Only valid positions (row < seqlen_q, col < seqlen_k) count.
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "kernels/flex/flex_internal.h"
#include "kernels/flex/kernel_lru.h"
#include "kernels/launch_options.h"
#include "tilejit/error.h"
#include "tilejit/ops.h"

namespace tilejit::attention {
namespace flex {
namespace {

ParamTable block_mask_params() {
  using K = detail::ParamKind;
  ParamTable t;
  for (const char *n : {"KV_BLOCKS", "KV_COUNTS", "CU_SEQLENS_Q", "CU_SEQLENS_K"}) t.add(n, K::Ptr, DType::i32);
  for (const char *n : {"seqlen_q", "seqlen_k", "heads", "num_q_blocks", "num_k_blocks", "band_left",
                        "band_right", "band_bottom_right"})
    t.add(n, K::I32);
  for (const char *n : {"BLOCK_M", "BLOCK_N"}) t.add(n, K::ConstInt);
  for (const char *n : {"VARLEN", "HAS_BAND"}) t.add(n, K::ConstBool, DType::i1);
  return t;
}

void trace_block_mask(const Mask &mask, std::span<const detail::ArgValue> a) {
  auto P = [](int i) { return detail::param_tile(i); };
  auto C = [&](int i) { return int(a[size_t(i)].i); };
  const int BM = C(bBlockM), BN = C(bBlockN);
  const bool varlen = C(bVarlen), has_band = C(bHasBand);
  Tile pid_m = program_id(0), h = program_id(1), b = program_id(2);
  Tile seqlen_q = P(bSeqlenQ), seqlen_k = P(bSeqlenK);
  Tile q_start = b * seqlen_q, k_start = b * seqlen_k;
  if (varlen) {
    q_start = load(P(bCuQ) + b);
    k_start = load(P(bCuK) + b);
    seqlen_q = load(P(bCuQ) + b + 1) - q_start;
    seqlen_k = load(P(bCuK) + b + 1) - k_start;
  }
  ModScope scope(seqlen_q, seqlen_k, q_start, k_start);
  BandTiles band;
  if (has_band) band = {P(bBandLeft), P(bBandRight), P(bBandBottomRight) * (seqlen_k - seqlen_q)};

  Tile m0 = pid_m * BM;
  Tile rows = m0 + arange(0, BM);
  Tile row_ok = rows < seqlen_q;
  Tile q_idx = minimum(rows, maximum(seqlen_q - 1, 0))(_, None);
  Tile bh_q = (b * P(bHeads) + h) * P(bNumQBlocks) + pid_m;
  Tile list = P(bKvBlocks) + bh_q.to(DType::i64) * P(bNumKBlocks);
  Tile n_blocks = where(m0 < seqlen_q, (seqlen_k + (BN - 1)) / BN, 0);
  Tile count = zeros({}, DType::i32);
  for_range(0, n_blocks, 1, [&](I32 kb) {
    Tile cols = kb * BN + arange(0, BN);
    Tile valid = row_ok(_, None) & (cols < seqlen_k)(None, _);
    Tile kv_idx = minimum(cols, maximum(seqlen_k - 1, 0))(None, _);
    Tile vis = visible(mask, has_band, band, b, h, q_idx, kv_idx);
    Tile seen = vis.valid() ? (valid & vis) : valid;
    Tile n_valid = sum(sum(valid.to(DType::i32), 1), 0);
    Tile n_seen = sum(sum(seen.to(DType::i32), 1), 0);
    Tile non_empty = n_seen > 0;
    store(list + count, kb * 2 + (n_seen == n_valid).to(DType::i32), non_empty);
    count = count + non_empty.to(DType::i32);
  });
  store(P(bKvCounts) + bh_q, count);
}

}  // namespace

std::shared_ptr<KernelBase> block_mask_kernel(const Mask &mask) {
  static KernelLru<const void *> kernels(kMaxCachedModKernels);
  return kernels.get(mask.fn.identity(), [&] {
    ParamTable t = block_mask_params();
    return std::make_shared<KernelBase>("flex_block_mask", std::move(t.decls), std::move(t.names),
                                        [mask](std::span<const detail::ArgValue> a) { trace_block_mask(mask, a); });
  });
}

std::vector<detail::ArgValue> block_mask_args(const Mask &mask, const FlexShape &s, const FlexOptions &opt,
                                              DevicePtr kv_blocks, DevicePtr counts, int num_q_blocks,
                                              int num_k_blocks) {
  BandArgs band = band_args(mask.band);
  std::vector<detail::ArgValue> args(kNumBlockMaskParams);
  args[bKvBlocks] = ptr_arg(kv_blocks);
  args[bKvCounts] = ptr_arg(counts);
  args[bCuQ] = ptr_arg(opt.cu_seqlens_q);
  args[bCuK] = ptr_arg(opt.cu_seqlens_k);
  args[bSeqlenQ] = int_arg(s.seqlen_q);
  args[bSeqlenK] = int_arg(s.seqlen_k);
  args[bHeads] = int_arg(s.heads_q);
  args[bNumQBlocks] = int_arg(num_q_blocks);
  args[bNumKBlocks] = int_arg(num_k_blocks);
  args[bBandLeft] = int_arg(band.left);
  args[bBandRight] = int_arg(band.right);
  args[bBandBottomRight] = int_arg(band.bottom_right);
  args[bBlockM] = int_arg(opt.block_m);
  args[bBlockN] = int_arg(opt.block_n);
  args[bVarlen] = int_arg(opt.cu_seqlens_q.address != 0);
  args[bHasBand] = int_arg(mask.band.has_value());
  return args;
}

}  // namespace flex

BlockMask create_block_mask(const Mask &mask, const FlexShape &s, const FlexOptions &opt) {
  using namespace flex;
  bool varlen = opt.cu_seqlens_q.address != 0;
  if (varlen != (opt.cu_seqlens_k.address != 0))
    throw TraceError("create_block_mask: give both cu_seqlens_q and cu_seqlens_k, or neither");
  if (!kernels::pow2_at_least(opt.block_m, 16) || !kernels::pow2_at_least(opt.block_n, 16))
    throw TraceError(fmt::format("create_block_mask: block sizes {}x{} must be powers of two ≥ 16", opt.block_m,
                                 opt.block_n));
  if (s.batch < 0 || s.heads_q < 0 || s.seqlen_q < 0 || s.seqlen_k < 0)
    throw TraceError("create_block_mask: sizes must be non-negative");
  BlockMask bm;
  bm.batch = s.batch;
  bm.heads = s.heads_q;
  bm.block_m = opt.block_m;
  bm.block_n = opt.block_n;
  bm.num_q_blocks = (s.seqlen_q + opt.block_m - 1) / opt.block_m;
  bm.num_k_blocks = (s.seqlen_k + opt.block_n - 1) / opt.block_n;
  size_t lists = size_t(s.batch) * s.heads_q * bm.num_q_blocks;
  Backend where = resolve_backend(opt.backend);
  bm.counts = Buffer(std::max<size_t>(lists, 1) * 4, where);
  bm.kv_blocks = Buffer(std::max<size_t>(lists * bm.num_k_blocks, 1) * 4, where);
  if (lists == 0) return bm;
  auto args = flex::block_mask_args(mask, s, opt, {bm.kv_blocks.address(), bm.kv_blocks.bytes()},
                                    {bm.counts.address(), bm.counts.bytes()}, bm.num_q_blocks, bm.num_k_blocks);
  auto cfg = launch_config(opt);
  cfg.num_stages = 1;
  Grid grid{uint32_t(bm.num_q_blocks), uint32_t(s.heads_q), uint32_t(s.batch)};
  block_mask_kernel(mask)->launch(grid, cfg, args);
  return bm;
}

}  // namespace tilejit::attention
