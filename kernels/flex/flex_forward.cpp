// flex_forward: validation, default strides, block-mask choice and the launch of the flex kernel.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "kernels/flex/flex_internal.h"
#include "kernels/launch_options.h"
#include "kernels/paged/paged_cache.h"
#include "kernels/strided_extent.h"
#include "runtime/runtime.h"
#include "tilejit/error.h"
#include "kernels/log2_units.h"

namespace tilejit::attention {
namespace flex {
namespace {

bool all_zero(const Strides &s) { return s.batch == 0 && s.head == 0 && s.seq == 0 && s.dim == 0; }

}  // namespace

Plan plan(const FlexShape &s, const FlexOptions &opt, const char *op) {
  auto fail = [op](const std::string &why) { return TraceError(fmt::format("{}: {}", op, why)); };
  Plan p;
  p.varlen = opt.cu_seqlens_q.address != 0;
  p.paged = opt.kv_cache != nullptr;
  if (p.paged && opt.cu_seqlens_k.address != 0)
    throw fail("with a paged KV cache the key counts are the cache's seq_lens: cu_seqlens_k must be null");
  if (!p.paged && p.varlen != (opt.cu_seqlens_k.address != 0))
    throw fail("give both cu_seqlens_q and cu_seqlens_k, or neither");
  if (s.batch < 0 || s.heads_q < 0 || s.heads_kv < 0 || s.seqlen_q < 0 || s.seqlen_k < 0 || s.total_q < 0 ||
      s.total_k < 0)
    throw fail(fmt::format("sizes must be non-negative (batch {}, heads_q {}, heads_kv {}, seqlen_q {}, "
                           "seqlen_k {}, total_q {}, total_k {})",
                           s.batch, s.heads_q, s.heads_kv, s.seqlen_q, s.seqlen_k, s.total_q, s.total_k));
  p.heads_kv = s.heads_kv == 0 ? s.heads_q : s.heads_kv;
  if (s.heads_q > 0 && (p.heads_kv == 0 || s.heads_q % p.heads_kv != 0))
    throw fail(fmt::format("heads_q ({}) must be a multiple of heads_kv ({}) for grouped-query attention",
                           s.heads_q, p.heads_kv));
  p.dim_v = s.head_dim_v == 0 ? s.head_dim_qk : s.head_dim_v;
  for (int d : {s.head_dim_qk, p.dim_v})
    if (d < 16 || d > 256) throw fail(fmt::format("head dim {} is not supported (16 to 256)", d));
  if (std::string e = kernels::tile_options_error(opt.block_m, opt.block_n, opt.num_warps, opt.num_stages, false);
      !e.empty())
    throw fail(e);
  // 0 selects 1/sqrt(head_dim_qk); the kernel takes the row max on raw scores, so the scale must be positive.
  if (!std::isfinite(opt.softmax_scale) || opt.softmax_scale < 0)
    throw fail(fmt::format("softmax_scale {} must be finite and positive (0 selects 1/sqrt(head_dim))",
                           opt.softmax_scale));
  // The kernel takes scores to log2 units with the factor scale·log2(e) (f32), which must be finite.
  if (!std::isfinite(opt.softmax_scale * kernels::kLog2e))
    throw fail(fmt::format("softmax_scale {:g} is too large: scale·log2(e) overflows f32 (at most {:g})",
                           opt.softmax_scale, std::numeric_limits<float>::max() / double(kernels::kLog2e)));
  // The built-in ALiBi adds slope/scale·|q − kv| to the raw scores: below 2^-50 that product can overflow where
  // the bias in natural units, slope·|q − kv|, is moderate (keys would silently drop out). With scale ≥ 2^-50
  // an overflow needs |slope| > 2^40, where exp of the bias is 0 anyway.
  if (const BuiltinScoreForm *form = opt.score_mod.builtin();
      form && form->alibi_slopes.shared_state() && opt.softmax_scale > 0 && opt.softmax_scale < 0x1p-50f)
    throw fail(fmt::format("softmax_scale {:g} is below 2^-50, the smallest the built-in alibi() supports (it scales "
                           "the slopes by 1/softmax_scale); write the bias as your own score_mod for such a scale",
                           opt.softmax_scale));
  if (opt.dtype != DType::bf16 && opt.dtype != DType::f16)
    throw fail(fmt::format("dtype {} is not supported (bf16 or f16)", dtype_name(opt.dtype)));
  if (s.heads_q > 65535 || s.batch > 65535)
    throw fail(fmt::format("heads_q {} and batch {} must each be ≤ 65535 (grid y and z)", s.heads_q, s.batch));
  // total_k sizes k and v; a paged cache holds them instead.
  if (p.varlen && s.batch > 0 &&
      ((s.total_q <= 0 && s.seqlen_q > 0) || (s.total_k <= 0 && s.seqlen_k > 0 && !opt.kv_cache)))
    throw fail(fmt::format("varlen needs FlexShape::total_q and total_k (the last cu_seqlens entries); got {} and {}",
                           s.total_q, s.total_k));

  const int Dq = s.head_dim_qk, Dv = p.dim_v;
  auto dflt = [&](const Strides &given, int heads, int seqlen, int d) {
    if (!all_zero(given)) return given;
    if (p.varlen) return Strides{0, d, int64_t(heads) * d, 1};
    return contiguous_strides(heads, seqlen, d);
  };
  p.q = dflt(opt.q_strides, s.heads_q, s.seqlen_q, Dq);
  p.k = dflt(opt.k_strides, p.heads_kv, s.seqlen_k, Dq);
  p.v = dflt(opt.v_strides, p.heads_kv, s.seqlen_k, Dv);
  p.o = dflt(opt.o_strides, s.heads_q, s.seqlen_q, Dv);
  if (p.varlen) p.q.batch = p.k.batch = p.v.batch = p.o.batch = 0;
  if (p.paged) {
    const paged::CacheLayout &c = p.cache = paged::cache_layout(*opt.kv_cache, op);
    if (c.heads_kv != p.heads_kv || c.head_dim != Dq || c.head_dim_v != Dv || opt.kv_cache->dtype != opt.dtype)
      throw fail(fmt::format("the paged cache holds {} KV heads of dims {}/{} ({}); the call has {} of {}/{} ({})",
                             c.heads_kv, c.head_dim, c.head_dim_v, dtype_name(opt.kv_cache->dtype), p.heads_kv, Dq,
                             Dv, dtype_name(opt.dtype)));
    if (!all_zero(opt.k_strides) || !all_zero(opt.v_strides))
      throw fail("with a paged KV cache, K/V strides come from the cache (k_strides / v_strides must be zero)");
    p.k = Strides{c.page_stride, c.head_stride, c.token_stride, 1};  // (page, head, token) in (batch, head, seq)
    p.v = Strides{c.v_page_stride, c.v_head_stride, c.v_token_stride, 1};
    p.last_k = c.last_k;
    p.last_v = c.last_v;
  }

  p.nqb = (s.seqlen_q + opt.block_m - 1) / opt.block_m;
  p.nkb = (s.seqlen_k + opt.block_n - 1) / opt.block_n;
  int64_t rows_q = p.varlen ? s.total_q : s.seqlen_q, rows_k = p.varlen ? s.total_k : s.seqlen_k;
  p.work = int64_t(s.batch) * s.heads_q * s.seqlen_q > 0 && rows_q > 0;
  auto last = [&](const Strides &st, int heads, int64_t seq, int d, const char *name) {
    if (st.dim != 1)
      throw fail(fmt::format("tensor '{}': the last dimension must be contiguous (stride 1), got {}", name, st.dim));
    if (st.batch < 0 || st.head < 0 || st.seq < 0)
      throw fail(fmt::format("tensor '{}': strides (batch {}, head {}, seq {}) must not be negative", name,
                             st.batch, st.head, st.seq));
    if (seq <= 0 || heads <= 0 || (!p.varlen && s.batch <= 0)) return int64_t(-1);  // no rows: nothing addressed
    const int64_t b = p.varlen ? 0 : s.batch - 1;
    const std::optional<int64_t> last =
        kernels::last_offset({{b + 1, st.batch}, {heads, st.head}, {seq, st.seq}, {d, 1}});
    if (!last)
      throw fail(fmt::format("tensor '{}': strides (batch {}, head {}, seq {}) over {} × {} × {} rows address more "
                             "than 2^62 elements",
                             name, st.batch, st.head, st.seq, b + 1, heads, seq));
    return *last;
  };
  p.last_q = last(p.q, s.heads_q, rows_q, Dq, "q");
  if (!p.paged) {
    p.last_k = last(p.k, p.heads_kv, rows_k, Dq, "k");
    p.last_v = last(p.v, p.heads_kv, rows_k, Dv, "v");
  }
  p.last_o = last(p.o, s.heads_q, rows_q, Dv, "out");
  if (p.varlen) {
    p.lse_b = 0;
    p.lse_h = s.total_q;
    p.last_lse = int64_t(s.heads_q) * s.total_q - 1;
  } else {
    p.lse_h = s.seqlen_q;
    p.lse_b = int64_t(s.heads_q) * s.seqlen_q;
    p.last_lse = int64_t(s.batch) * p.lse_b - 1;
  }
  // Padded head-dim lanes and block padding add at most one block of rows past the last element.
  // (128-bit: a sequence stride is unbounded where a tensor has a single row.)
  const __int128 slack =
      __int128(std::max(opt.block_m, opt.block_n)) * std::max({p.q.seq, p.k.seq, p.v.seq, p.o.seq, int64_t(1)}) + 256;
  const __int128 furthest = std::max({p.last_q, p.last_k, p.last_v, p.last_o, p.last_lse}) + slack;
  p.large = furthest > std::numeric_limits<int32_t>::max();
  return p;
}

void check_extent(DevicePtr d, int64_t last, size_t esz, const char *name, const char *op) {
  if (last < 0) return;  // nothing addressed (no rows): any pointer, null included
  if (d.address == 0) throw TraceError(fmt::format("{}: pointer '{}' is null", op, name));
  size_t need = size_t(last + 1) * esz;
  if (d.bytes != 0 && d.bytes < need)
    throw TraceError(fmt::format("{}: '{}' holds {} bytes, its shape and strides address {}", op, name, d.bytes, need));
}

void check_buffer_backends(std::initializer_list<std::pair<const char *, const Buffer *>> buffers,
                           const FlexOptions &opt, const char *op) {
  const bool gpu = resolve_backend(opt.backend) == Backend::GPU;
  for (auto [name, b] : buffers)
    if (b->address() != 0 && b->on_gpu() != gpu)
      throw TraceError(fmt::format("{}: buffer '{}' is a {} buffer but the launch runs on the {}{}", op, name,
                                   b->on_gpu() ? "GPU" : "host (interpreter)", gpu ? "GPU" : "CPU interpreter",
                                   runtime::auto_backend_note(opt.backend)));
}

int add_stride_params(ParamTable &t) {
  using K = detail::ParamKind;
  int first = -1;
  for (const char *tensor : {"q", "k", "v", "o"})
    for (const char *axis : {"b", "h", "s"}) {
      const bool seq = axis[0] == 's';
      const int at = t.add(fmt::format("stride_{}{}", tensor, axis), seq ? K::ConstInt64 : K::I64, DType::i64);
      if (first < 0) first = at;
    }
  for (const char *n : {"stride_lb", "stride_lh", "stride_ls"}) t.add(n, K::I64, DType::i64, /*specialize=*/false);
  return first;
}

int add_band_params(ParamTable &t) {
  const int first = t.add("band_left", detail::ParamKind::I32);
  for (const char *n : {"band_right", "band_bottom_right"}) t.add(n, detail::ParamKind::I32);
  return first;
}

int add_tile_params(ParamTable &t) {
  const int first = t.add("BLOCK_M", detail::ParamKind::ConstInt);
  for (const char *n : {"BLOCK_N", "DIM_QK", "DIM_V", "PAD_QK", "PAD_V"}) t.add(n, detail::ParamKind::ConstInt);
  return first;
}

void layout_args(std::vector<detail::ArgValue> &a, const Plan &p, const FlexShape &s, const FlexOptions &opt,
                 LayoutArgsAt at) {
  const Strides *st[] = {&p.q, &p.k, &p.v, &p.o};
  for (int t = 0; t < 4; ++t) {
    a[size_t(at.strides + 3 * t)] = int_arg(st[t]->batch);
    a[size_t(at.strides + 3 * t + 1)] = int_arg(st[t]->head);
    a[size_t(at.strides + 3 * t + 2)] = int_arg(st[t]->seq);
  }
  a[size_t(at.strides + 12)] = int_arg(p.lse_b);
  a[size_t(at.strides + 13)] = int_arg(p.lse_h);
  a[size_t(at.strides + 14)] = int_arg(p.lse_s);
  BandArgs band = band_args(opt.mask.band);
  a[size_t(at.band)] = int_arg(band.left);
  a[size_t(at.band + 1)] = int_arg(band.right);
  // Paged, the kernel's query positions are already the sequence's (a band is anchored on positions).
  a[size_t(at.band + 2)] = int_arg(p.paged ? 0 : band.bottom_right);
  const int tile[] = {opt.block_m, opt.block_n, s.head_dim_qk, p.dim_v, next_pow2_at_least_16(s.head_dim_qk),
                      next_pow2_at_least_16(p.dim_v)};
  for (int i = 0; i < 6; ++i) a[size_t(at.tile + i)] = int_arg(tile[i]);
}

std::vector<detail::ArgValue> kernel_args(const Plan &p, const FlexShape &s, const FlexOptions &opt, DevicePtr q,
                                          DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse,
                                          const BlockMask *bm) {
  std::vector<detail::ArgValue> a(kNumFlexParams);
  a[kQ] = ptr_arg(q);
  a[kK] = ptr_arg(k);
  a[kV] = ptr_arg(v);
  a[kO] = ptr_arg(out);
  a[kLse] = ptr_arg(lse);
  a[kCuQ] = ptr_arg(opt.cu_seqlens_q);
  a[kCuK] = ptr_arg(opt.cu_seqlens_k);
  a[kBlockTable] = ptr_arg(p.paged ? opt.kv_cache->block_table : DevicePtr{});
  a[kSeqLens] = ptr_arg(p.paged ? opt.kv_cache->seq_lens : DevicePtr{});
  a[kOPart] = ptr_arg(p.o_part);
  a[kLsePart] = ptr_arg(p.lse_part);
  a[kKvBlocks] = ptr_arg(bm ? DevicePtr{bm->kv_blocks.address(), bm->kv_blocks.bytes()} : DevicePtr{});
  a[kKvCounts] = ptr_arg(bm ? DevicePtr{bm->counts.address(), bm->counts.bytes()} : DevicePtr{});
  a[kScale] = float_arg(effective_scale(s, opt));
  // The block mask's lists are [batch or 1, heads or 1, query blocks]: a stride of 0 shares one set of lists.
  int64_t nqb = bm ? bm->num_q_blocks : p.nqb;
  const ListStrides st = list_strides(bm, s, nqb);
  a[kBmStrideB] = int_arg(st.batch);
  a[kBmStrideH] = int_arg(st.head);
  a[kGroup] = int_arg(p.heads_kv == 0 ? 1 : s.heads_q / p.heads_kv);
  a[kSeqlenQ] = int_arg(s.seqlen_q);
  a[kSeqlenK] = int_arg(s.seqlen_k);
  layout_args(a, p, s, opt, {kQb, kBandLeft, kBlockM});
  a[kNumQBlocks] = int_arg(bm ? bm->num_q_blocks : p.nqb);
  a[kNumKBlocks] = int_arg(bm ? bm->num_k_blocks : p.nkb);
  a[kBtStride] = int_arg(p.cache.bt_stride);
  a[kMaxSeqLen] = int_arg(std::min<int64_t>(p.cache.max_seq_len, std::numeric_limits<int32_t>::max()));
  a[kNumSplits] = int_arg(p.num_splits);
  a[kPartStrideO] = int_arg(p.part_stride_o);
  a[kPartStrideL] = int_arg(p.part_stride_l);
  a[kVarlen] = int_arg(p.varlen);
  a[kHasBand] = int_arg(opt.mask.band.has_value());
  a[kUseBlockMask] = int_arg(bm != nullptr);
  a[kLarge] = int_arg(p.large);
  const ScoreFrame frame = score_frame(opt, p.pack_gqa, !p.frame_for_any_captures);
  a[kScoreFrame] = int_arg(frame.kind);
  a[kScoreRef] = float_arg(frame.reference);
  a[kPaged] = int_arg(p.paged);
  a[kPageSize] = int_arg(p.paged ? p.cache.page_size : 0);
  a[kPackGqa] = int_arg(p.pack_gqa);
  a[kSplit] = int_arg(p.num_splits > 1);
  a[kSmallPositions] = int_arg(small_positions(s));
  return a;
}

Grid grid(const Plan &p, const FlexShape &s) {
  return Grid{uint32_t(p.nqb * p.num_splits), uint32_t(p.pack_gqa ? p.heads_kv : s.heads_q), uint32_t(s.batch)};
}

void pack_gqa(Plan &p, const FlexShape &s, int block_m, const char *op) {
  int group = s.heads_q / std::max(p.heads_kv, 1);
  if (group > block_m)
    throw TraceError(fmt::format("{}: GQA packing needs BLOCK_M ({}) ≥ the group's query heads ({})", op, block_m,
                                 group));
  p.pack_gqa = true;
  int tokens = block_m / group;
  p.nqb = (s.seqlen_q + tokens - 1) / tokens;
}

/// The flex kernel's arguments for ir() / ptx() dumps and compiles: placeholder addresses, and a placeholder
/// block mask of the right block counts when the launch would use one.
std::vector<detail::ArgValue> placeholder_kernel_args(const Plan &p, const FlexShape &s, const FlexOptions &opt) {
  const DevicePtr fake{256, 0};
  BlockMask placeholder;
  placeholder.num_q_blocks = p.nqb;
  placeholder.num_k_blocks = p.nkb;
  bool use_bm = !p.paged && (opt.block_mask || (opt.mask.fn && opt.block_mask_mode == BlockMaskMode::Auto));
  return kernel_args(p, s, opt, fake, fake, fake, fake, fake, use_bm ? &placeholder : nullptr);
}

}  // namespace flex

using namespace flex;

namespace {
// A block mask given in the options: made for this call's mask, shape and blocks, and not with a paged cache.
void check_given_block_mask(const FlexShape &s, const FlexOptions &opt, const Plan &p) {
  if (!opt.block_mask) return;
  if (p.paged)
    throw TraceError("attention::flex_forward: a block mask cannot be combined with a paged KV cache (the mask "
                     "function is evaluated on every visited key block instead)");
  check_block_mask(*opt.block_mask, s, opt, p.nqb, p.nkb, "attention::flex_forward");
}
}  // namespace

void flex_forward(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse, const FlexShape &s,
                  const FlexOptions &options) {
  const FlexOptions opt = with_implied_band(options);
  Plan p = plan(s, opt);
  if (!p.work) return;
  // Everything is checked before tuning too: the tuner copies out/lse aside and times launches on them.
  check_extent(q, p.last_q, 2, "q");
  if (p.paged) {
    if (k.address != 0 || v.address != 0)
      throw TraceError("attention::flex_forward: with FlexOptions::kv_cache, K and V come from the cache: pass null "
                       "k and v");
    k = opt.kv_cache->k_pages;
    v = opt.kv_cache->v_pages;
    paged::check_cache_buffers(*opt.kv_cache, p.cache, s.batch, "attention::flex_forward");
  } else {
    check_extent(k, p.last_k, 2, "k");
    check_extent(v, p.last_v, 2, "v");
  }
  check_extent(out, p.last_o, 2, "out");
  check_extent(lse, p.last_lse, 4, "lse");
  const BlockMask *bm = opt.block_mask;
  check_given_block_mask(s, opt, p);
  if (opt.autotune && !p.paged && resolve_backend(opt.backend) == Backend::GPU) {
    flex_forward(q, k, v, out, lse, s, tuned_flex_options(q, k, v, out, lse, s, opt));
    return;
  }
  std::shared_ptr<const BlockMask> computed;  // released after the launch: cuMemFree waits for the kernel
  if (!bm && !p.paged && opt.mask.fn && opt.block_mask_mode == BlockMaskMode::Auto) {
    computed = auto_block_mask(opt.mask, s, opt);
    bm = computed.get();
  }
  auto args = kernel_args(p, s, opt, q, k, v, out, lse, bm);
  flex_kernel(opt.dtype, opt.score_mod, opt.mask)->launch(grid(p, s), launch_config(opt), args);
}

void flex_check(const FlexShape &s, const FlexOptions &options) {
  const FlexOptions opt = with_implied_band(options);
  const Plan p = plan(s, opt);
  check_given_block_mask(s, opt, p);
  // The mods' and the mask's errors come from tracing them into the kernel (as flex_forward_ir does).
  flex_kernel(opt.dtype, opt.score_mod, opt.mask)->function(placeholder_kernel_args(p, s, opt));
}

void flex_forward(const Buffer &q, const Buffer &k, const Buffer &v, Buffer &out, Buffer &lse, const FlexShape &s,
                  const FlexOptions &opt) {
  flex::check_buffer_backends({{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}, {"lse", &lse}}, opt, "attention::flex_forward");
  auto ptr = [](const Buffer &b) { return DevicePtr{b.address(), b.bytes()}; };
  flex_forward(ptr(q), ptr(k), ptr(v), ptr(out), ptr(lse), s, opt);
}

std::string flex_forward_ir(const FlexShape &s, const FlexOptions &options) {
  const FlexOptions opt = with_implied_band(options);
  return flex_kernel(opt.dtype, opt.score_mod, opt.mask)->ir(placeholder_kernel_args(plan(s, opt), s, opt));
}

std::string flex_forward_ptx(const FlexShape &s, const FlexOptions &options, bool block_mask) {
  const FlexOptions opt = with_implied_band(options);
  LaunchConfig cfg = launch_config(opt);
  if (cfg.arch.empty()) cfg.arch = "sm_90a";
  Plan p = plan(s, opt);
  if (block_mask) {
    const DevicePtr fake{256, 0};
    BlockMaskLaunches L = block_mask_launches(opt.mask, s, opt, fake, fake, fake, 1, 1, p.nqb, p.nkb);
    L.tile_cfg.arch = L.list_cfg.arch = cfg.arch;
    return L.tiles->ptx(L.tile_cfg, L.tile_args).ptx + L.lists->ptx(L.list_cfg, L.list_args).ptx;
  }
  return flex_kernel(opt.dtype, opt.score_mod, opt.mask)->ptx(cfg, placeholder_kernel_args(p, s, opt)).ptx;
}

}  // namespace tilejit::attention
