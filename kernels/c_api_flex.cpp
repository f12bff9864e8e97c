// The C ABI's flex attention entry (include/tilejit/c_api.h): built-in variants from a plain struct, on raw
// pointers. What makes repeated calls cheap: the variants and ALiBi slopes of the shared registry
// (c_api_builtin.h), and here the document block masks cached per (pointer, shape, band, blocks).
#include <cmath>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "kernels/c_api_builtin.h"
#include "kernels/c_api_flex_internal.h"
#include "kernels/c_api_guard.h"
#include "kernels/flex/flex_backward.h"
#include "kernels/flex/flex_internal.h"
#include "kernels/flex/variants_builtin.h"
#include "kernels/launch_options.h"
#include "runtime/driver.h"
#include "tilejit/buffer.h"
#include "tilejit/c_api.h"
#include "tilejit/error.h"
#include "tilejit/flex_attention.h"
#include "tilejit/flex_variants.h"

using namespace tilejit;
using tilejit::c_api_detail::pointer_arg;
using tilejit::c_api_detail::strides_of;
using tilejit::c_api_detail::wait_for_device;
using attention::flex::BuiltinSettings;
using attention::flex::BuiltinVariant;

namespace {

constexpr const char *kEntry = "tilejit_flex_attention_forward";
constexpr size_t kMaxBlockMasks = 16;

/// What a cached document block mask was built for (everything it depends on except the ids' contents).
struct BlockMaskKey {
  uint64_t doc_ids = 0;
  int batch = 0, heads = 0, seqlen_q = 0, seqlen_k = 0, block_m = 0, block_n = 0;
  bool causal = false;
  attention::Align align = attention::Align::TopLeft;
  int64_t window_left = -1, window_right = -1;
  Backend backend = Backend::GPU;
  auto operator<=>(const BlockMaskKey &) const = default;
};

/// What this entry keeps between calls beside the registry's variants; guarded by the registry's mutex
/// (captures are not thread-safe, so a call holds it from setting them until its launch has read them).
struct FlexState {
  std::map<BlockMaskKey, attention::BlockMask> block_masks;
  std::deque<BlockMaskKey> block_mask_order;                    // oldest first
  std::map<Backend, Buffer> scratch_lse;                        // for callers who pass lse = NULL
  size_t block_mask_builds = 0;
};

FlexState &state() {
  static FlexState s;
  return s;
}

DevicePtr scratch_lse(FlexState &st, Backend be, size_t bytes) {
  Buffer &b = st.scratch_lse[be];
  if (b.bytes() < bytes) {
    wait_for_device(be);  // a kernel may still be writing the old scratch
    b = Buffer();
    b = Buffer(bytes, be);
  }
  return DevicePtr{b.address(), b.bytes()};
}

const attention::BlockMask &block_mask_for(FlexState &st, const BlockMaskKey &key, const attention::Mask &mask,
                                           const attention::FlexShape &shape, const attention::FlexOptions &opt) {
  auto it = st.block_masks.find(key);
  if (it != st.block_masks.end()) return it->second;
  if (st.block_masks.size() >= kMaxBlockMasks) {
    wait_for_device(key.backend);
    st.block_masks.erase(st.block_mask_order.front());
    st.block_mask_order.pop_front();
  }
  attention::BlockMask bm = attention::create_block_mask(mask, shape, opt);
  ++st.block_mask_builds;
  st.block_mask_order.push_back(key);
  return st.block_masks.emplace(key, std::move(bm)).first->second;
}

/// The backward's extra tensors (tilejit_flex_attention_backward); null for the forward.
struct BackwardPtrs {
  const void *dout;
  void *dq, *dk, *dv;
};

/// One forward (bwd null) or backward call: the variant's mods from the registry, validated options, then the
/// launch under the registry's lock (the captures it sets are read by the launch).
void flex_call(const void *q, const void *k, const void *v, void *out, float *lse, int dtype, int batch,
               int heads_q, int heads_kv, int seqlen_q, int seqlen_k, int head_dim, const int64_t *q_strides,
               const int64_t *k_strides, const int64_t *v_strides, const int64_t *o_strides, float softmax_scale,
               const tilejit_flex_variant *variant_in, void *stream, const BackwardPtrs *bwd = nullptr) {
  tilejit_flex_variant vs;
  tilejit_flex_variant_init(&vs);
  if (variant_in) vs = *variant_in;

  // Checks that need no device, so that bad arguments fail the same way with or without a GPU.
  attention::FlexOptions opt;
  opt.dtype = c_api_detail::attention_dtype(dtype);
  opt.q_strides = strides_of(q_strides, "q_strides");
  opt.k_strides = strides_of(k_strides, "k_strides");
  opt.v_strides = strides_of(v_strides, "v_strides");
  opt.o_strides = strides_of(o_strides, "o_strides");
  DevicePtr pq = pointer_arg(q, "q"), pk = pointer_arg(k, "k"), pv = pointer_arg(v, "v"), po = pointer_arg(out, "out");
  DevicePtr pdo, pdq, pdk, pdv;
  if (bwd) {
    pdo = pointer_arg(bwd->dout, "dout");
    pdq = pointer_arg(bwd->dq, "dq");
    pdk = pointer_arg(bwd->dk, "dk");
    pdv = pointer_arg(bwd->dv, "dv");
    if (!lse) throw TraceError("lse is NULL: the backward needs the forward's logsumexp");
  }
  if (batch < 0 || heads_q < 0 || heads_kv < 0 || seqlen_q < 0 || seqlen_k < 0)
    throw TraceError(fmt::format("sizes must be non-negative (batch {}, heads_q {}, heads_kv {}, seqlen_q {}, "
                                 "seqlen_k {})", batch, heads_q, heads_kv, seqlen_q, seqlen_k));
  if (heads_q > 0 && (heads_kv == 0 || heads_q % heads_kv != 0))
    throw TraceError(fmt::format("heads_q ({}) must be a multiple of heads_kv ({}) for grouped-query attention",
                                 heads_q, heads_kv));
  if (vs.block_m < 0 || vs.block_n < 0 || vs.num_warps < 0 || vs.num_stages < 0)
    throw TraceError(fmt::format("block_m {}, block_n {}, num_warps {}, num_stages {} must be ≥ 0 (0: default)",
                                 vs.block_m, vs.block_n, vs.num_warps, vs.num_stages));
  if (vs.block_m) opt.block_m = vs.block_m;
  if (vs.block_n) opt.block_n = vs.block_n;
  if (vs.num_warps) opt.num_warps = vs.num_warps;
  if (vs.num_stages) opt.num_stages = vs.num_stages;
  opt.softmax_scale = softmax_scale < 0 ? 0.f : softmax_scale;  // <= 0: the default; NaN/inf are rejected
  opt.atomics = vs.atomics != 0;
  BuiltinSettings settings = c_api_detail::builtin_settings(vs);
  if (settings.documents && seqlen_q != seqlen_k)
    throw TraceError(fmt::format("doc_ids (document masking) needs seqlen_q == seqlen_k (got {} and {})", seqlen_q,
                                 seqlen_k));
  attention::FlexShape shape{.batch = batch, .heads_q = heads_q, .heads_kv = heads_kv, .seqlen_q = seqlen_q,
                             .seqlen_k = seqlen_k, .head_dim_qk = head_dim};
  if (head_dim < 16 || head_dim > 256)
    throw TraceError(fmt::format("head dim {} is not supported (16 to 256)", head_dim));
  // Every option is validated before a block mask is built (its kernel would otherwise report them first);
  // strides and extents are checked by flex_forward (an empty problem returns there before touching memory).
  attention::flex::plan(shape, opt);
  const Backend be = resolve_backend(Backend::Auto);
  opt.backend = be;

  c_api_detail::BuiltinRegistry &reg = c_api_detail::builtin_registry();
  FlexState &st = state();
  std::lock_guard lock(reg.mu);
  BuiltinVariant &variant = c_api_detail::builtin_variant(reg, settings);
  opt.score_mod = variant.score_mod;
  opt.mask = variant.mask;
  opt.mask.band = attention::flex::builtin_band(settings);  // per call: its sides are kernel arguments
  std::optional<Stream> borrowed;
  if (be == Backend::GPU) {
    borrowed.emplace(Stream::Borrow{}, stream);
    opt.stream = &*borrowed;
  }
  if (int64_t(batch) * heads_q * seqlen_q == 0) {  // validates (the backward also zeroes keys' dk, dv), returns
    if (bwd)
      attention::flex_backward(pq, pk, pv, po, DevicePtr{256, 0}, pdo, pdq, pdk, pdv, shape, opt);
    else
      attention::flex_forward(pq, pk, pv, po, DevicePtr{256, 0}, shape, opt);
    return;
  }
  DevicePtr plse = lse ? DevicePtr{uint64_t(reinterpret_cast<uintptr_t>(lse)), 0}
                       : scratch_lse(st, be, size_t(batch) * heads_q * seqlen_q * 4);
  if (settings.alibi) variant.slopes.set(c_api_detail::builtin_slopes(reg, be, heads_q));
  if (settings.softcap) variant.cap.set(double(vs.softcap));
  attention::BlockMask fresh_mask;  // freed after the launch: cuMemFree waits for the kernels using it
  if (settings.documents)
    variant.doc_ids.set(DevicePtr{uint64_t(reinterpret_cast<uintptr_t>(vs.doc_ids)), size_t(batch) * seqlen_q * 4});
  if (bwd) {  // a document mask's block mask is built by flex_backward itself (BlockMaskMode::Auto)
    // run_backward validates, tunes (autotune on the GPU) and returns the options it ran: what is reported.
    opt.autotune = vs.autotune && be == Backend::GPU;
    const attention::FlexOptions ran =
        attention::flex::run_backward(pq, pk, pv, po, plse, pdo, pdq, pdk, pdv, shape, opt);
    c_api_detail::set_last_launch_config("flex_attention_bwd", ran.block_m, ran.block_n, 0,
                                         kernels::launch_config_of(ran), opt.autotune);
    return;
  }
  if (vs.autotune && be == Backend::GPU) {
    // The tuned config first: the cached block masks below are keyed by its block sizes.
    opt.autotune = true;
    opt = attention::flex::tuned_flex_options(pq, pk, pv, po, plse, shape, opt);
  }
  if (settings.documents) {
    DevicePtr ids{uint64_t(reinterpret_cast<uintptr_t>(vs.doc_ids)), size_t(batch) * seqlen_q * 4};
    BlockMaskKey key{ids.address, batch, heads_q, seqlen_q, seqlen_k, opt.block_m, opt.block_n,
                     settings.causal, settings.align, settings.window_left, settings.window_right, be};
    if (vs.reuse_block_mask) {
      opt.block_mask = &block_mask_for(st, key, opt.mask, shape, opt);
    } else {
      fresh_mask = attention::create_block_mask(opt.mask, shape, opt);
      ++st.block_mask_builds;
      opt.block_mask = &fresh_mask;
    }
  }
  attention::flex_forward(pq, pk, pv, po, plse, shape, opt);
  c_api_detail::set_last_launch_config("flex_attention_fwd", opt.block_m, opt.block_n, 0,
                                       kernels::launch_config_of(opt), vs.autotune && be == Backend::GPU);
}

}  // namespace

namespace tilejit::c_api_detail {

FlexCacheStats flex_cache_stats() {
  BuiltinRegistry &reg = builtin_registry();
  FlexState &st = state();
  std::lock_guard lock(reg.mu);
  FlexCacheStats s;
  s.variants = reg.variants.size();
  s.slope_buffers = reg.slopes.size();
  s.block_masks = st.block_masks.size();
  s.block_mask_builds = st.block_mask_builds;
  for (auto &[key, v] : reg.variants)
    for (DType dt : {DType::bf16, DType::f16})
      s.traced_specializations += attention::flex::flex_kernel(dt, v.score_mod, v.mask)->num_specializations();
  return s;
}

}  // namespace tilejit::c_api_detail

extern "C" {

void tilejit_flex_variant_init(tilejit_flex_variant *v) {
  if (!v) return;
  *v = tilejit_flex_variant{};
  v->window_left = -1;
  v->window_right = -1;
}

int tilejit_flex_attention_forward(const void *q, const void *k, const void *v, void *out, float *lse, int dtype,
                                   int batch, int heads_q, int heads_kv, int seqlen_q, int seqlen_k, int head_dim,
                                   const int64_t *q_strides, const int64_t *k_strides, const int64_t *v_strides,
                                   const int64_t *o_strides, float softmax_scale,
                                   const tilejit_flex_variant *variant, void *stream) {
  return c_api_detail::guarded(kEntry, [&] {
    flex_call(q, k, v, out, lse, dtype, batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, q_strides, k_strides,
              v_strides, o_strides, softmax_scale, variant, stream);
  });
}

int tilejit_flex_attention_backward(const void *q, const void *k, const void *v, const void *out, const float *lse,
                                    const void *dout, void *dq, void *dk, void *dv, int dtype, int batch, int heads_q,
                                    int heads_kv, int seqlen_q, int seqlen_k, int head_dim, const int64_t *q_strides,
                                    const int64_t *k_strides, const int64_t *v_strides, const int64_t *o_strides,
                                    float softmax_scale, const tilejit_flex_variant *variant, void *stream) {
  return c_api_detail::guarded("tilejit_flex_attention_backward", [&] {
    const BackwardPtrs bwd{dout, dq, dk, dv};
    flex_call(q, k, v, const_cast<void *>(out), const_cast<float *>(lse), dtype, batch, heads_q, heads_kv, seqlen_q,
              seqlen_k, head_dim, q_strides, k_strides, v_strides, o_strides, softmax_scale, variant, stream, &bwd);
  });
}

int tilejit_flex_clear_cache(void) {
  return c_api_detail::guarded("tilejit_flex_clear_cache", [] {
    FlexState &st = state();
    std::lock_guard lock(c_api_detail::builtin_registry().mu);
    if (st.block_masks.empty()) return;
    for (auto &[key, bm] : st.block_masks) wait_for_device(key.backend);
    st.block_masks.clear();
    st.block_mask_order.clear();
  });
}

}  // extern "C"
