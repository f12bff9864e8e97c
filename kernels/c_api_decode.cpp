// The C ABI's paged KV cache and decode entries (include/tilejit/c_api.h): tilejit_paged_kv →
// attention::PagedKVCache, the built-in variants of the shared registry (c_api_builtin.h) → the plan's mods,
// and a plan handle that owns an attention::DecodePlan.
//
// A plan keeps its variant's settings (the band, the cap) and sets the shared captures (slopes, cap) under
// the registry's mutex before each launch, since plans and flex calls with the same combination of mods
// share one traced kernel and its captures.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "kernels/c_api_builtin.h"
#include "kernels/c_api_guard.h"
#include "kernels/paged/paged_cache.h"
#include "tilejit/buffer.h"
#include "tilejit/c_api.h"
#include "tilejit/error.h"
#include "tilejit/paged_attention.h"

using namespace tilejit;
using tilejit::c_api_detail::guarded;
using tilejit::c_api_detail::pointer_arg;

struct tilejit_decode_plan {
  std::optional<attention::DecodePlan> plan;  // set once created
  attention::flex::BuiltinVariant *variant = nullptr;  // in the registry (never erased)
  attention::flex::BuiltinSettings settings;
  float softcap = 0.f;
  const Buffer *slopes = nullptr;  // in the registry; ALiBi only
  Backend backend = Backend::GPU;
  int batch = 0, heads_q = 0, seqlen_q = 0;
};

namespace {

/// The cache as the library takes it. Sizes and strides are checked by the library (DecodePlan /
/// paged_kv_append); here only the pointers (non-null) and the dtype. `batch` (−1: unknown, e.g. for an
/// append) sizes the block table and lengths, so that the interpreter bounds every access to them.
attention::PagedKVCache cache_of(const tilejit_paged_kv *c, int batch) {
  if (!c) throw TraceError("cache is null (a tilejit_paged_kv describing the pages is needed)");
  attention::PagedKVCache p;
  p.dtype = c_api_detail::attention_dtype(c->dtype);
  p.num_pages = c->num_pages;
  p.page_size = c->page_size;
  p.heads_kv = c->heads_kv;
  p.head_dim = c->head_dim;
  p.max_pages_per_seq = c->max_pages_per_seq;
  p.page_stride = c->page_stride;
  p.token_stride = c->token_stride;
  p.head_stride = c->head_stride;
  p.block_table_stride = c->block_table_stride;
  p.k_pages = pointer_arg(c->k_pages, "k_pages", 0);
  p.v_pages = pointer_arg(c->v_pages, "v_pages", 0);
  p.block_table = pointer_arg(c->block_table, "block_table", 0);
  p.seq_lens = pointer_arg(c->seq_lens, "seq_lens", 0);
  // Byte extents for the interpreter's bounds checks, from the library's own reading of the layout; a layout it
  // rejects leaves them unknown (0, unchecked), and the library call that follows reports what is wrong.
  try {
    const attention::paged::CacheLayout l = attention::paged::cache_layout(p, "tilejit_paged_kv");
    const size_t esz = size_t(dtype_bytes(p.dtype));
    p.k_pages.bytes = size_t(l.last_k + 1) * esz;
    p.v_pages.bytes = size_t(l.last_v + 1) * esz;
    if (batch > 0 && p.max_pages_per_seq > 0) {
      p.block_table.bytes = size_t(int64_t(batch - 1) * l.bt_stride + p.max_pages_per_seq) * 4;
      p.seq_lens.bytes = size_t(batch) * 4;
    }
  } catch (const TraceError &) {
  }
  return p;
}

/// Points the plan's shared captures at its values (call with the registry's mutex held).
void set_captures(const tilejit_decode_plan &p) {
  if (p.settings.alibi) p.variant->slopes.set(*p.slopes);
  if (p.settings.softcap) p.variant->cap.set(double(p.softcap));
}

void check_plan(const tilejit_decode_plan *plan) {
  if (!plan) throw TraceError("plan is null (create one with tilejit_decode_plan_create)");
}

}  // namespace

extern "C" {

int tilejit_paged_kv_append(const tilejit_paged_kv *cache, const void *k_new, const void *v_new,
                            const int32_t *slot_mapping, int tokens, void *stream) {
  return guarded("tilejit_paged_kv_append", [&] {
    attention::PagedKVCache c = cache_of(cache, -1);
    if (tokens < 0) throw TraceError(fmt::format("tokens {} must be ≥ 0", tokens));
    const size_t elems = size_t(tokens) * size_t(std::max(c.heads_kv, 0)) * size_t(std::max(c.head_dim, 0));
    DevicePtr k = pointer_arg(k_new, "k_new", elems * 2), v = pointer_arg(v_new, "v_new", elems * 2);
    DevicePtr slots = pointer_arg(slot_mapping, "slot_mapping", size_t(tokens) * 4);
    attention::AppendOptions opt;
    opt.backend = resolve_backend(Backend::Auto);
    std::optional<Stream> s;  // the interpreter has no streams
    if (opt.backend == Backend::GPU) opt.stream = &s.emplace(Stream::Borrow{}, stream);
    attention::paged_kv_append(c, k, v, slots, tokens, opt);
  });
}

int tilejit_decode_plan_create(tilejit_decode_plan **plan, const tilejit_paged_kv *cache, int batch, int heads_q,
                               int seqlen_q, int max_seq_len, const tilejit_flex_variant *variant,
                               float softmax_scale, int num_splits, int block_n, int num_warps, int num_stages) {
  return guarded("tilejit_decode_plan_create", [&] {
    if (!plan) throw TraceError("plan is null (the address where the new plan's handle is stored)");
    *plan = nullptr;
    tilejit_flex_variant vs;
    tilejit_flex_variant_init(&vs);
    if (variant) vs = *variant;
    if (vs.doc_ids)
      throw TraceError("doc_ids (document masking) is not supported by decode: the cache has no per-token ids");
    if (block_n < 0 || num_warps < 0 || num_stages < 0)
      throw TraceError(fmt::format("block_n {}, num_warps {}, num_stages {} must be ≥ 0 (0: the library's choice)",
                                   block_n, num_warps, num_stages));
    auto p = std::make_unique<tilejit_decode_plan>();
    p->settings = c_api_detail::builtin_settings(vs);
    p->softcap = vs.softcap;
    p->backend = resolve_backend(Backend::Auto);
    p->batch = batch;
    p->heads_q = heads_q;
    p->seqlen_q = seqlen_q;
    attention::PagedKVCache c = cache_of(cache, batch);
    attention::DecodeShape shape{.batch = batch, .heads_q = heads_q, .seqlen_q = seqlen_q, .max_seq_len = max_seq_len};
    attention::DecodeOptions opt;
    opt.softmax_scale = softmax_scale < 0 ? 0.f : softmax_scale;  // <= 0: the default; NaN/inf are rejected
    opt.num_splits = num_splits;
    opt.block_n = block_n;
    opt.num_warps = num_warps;
    opt.num_stages = num_stages;
    opt.backend = p->backend;

    c_api_detail::BuiltinRegistry &reg = c_api_detail::builtin_registry();
    std::lock_guard lock(reg.mu);
    p->variant = &c_api_detail::builtin_variant(reg, p->settings);
    opt.score_mod = p->variant->score_mod;
    opt.mask = p->variant->mask;
    opt.mask.band = attention::flex::builtin_band(p->settings);  // the plan's own: its sides are kernel arguments
    if (p->settings.alibi) {
      if (heads_q <= 0) throw TraceError(fmt::format("heads_q {} must be > 0 with ALiBi", heads_q));
      p->slopes = &c_api_detail::builtin_slopes(reg, p->backend, heads_q);
    }
    set_captures(*p);  // the plan may choose its kernel by the captures' values (the cap)
    p->plan.emplace(shape, c, opt);
    *plan = p.release();
  });
}

int tilejit_decode_plan_run(const tilejit_decode_plan *plan, const void *q, void *out, float *lse,
                            const tilejit_paged_kv *cache, void *stream) {
  return guarded("tilejit_decode_plan_run", [&] {
    check_plan(plan);
    attention::PagedKVCache c = cache_of(cache, plan->batch);
    const size_t rows = size_t(std::max(plan->batch, 0)) * size_t(std::max(plan->seqlen_q, 0)) *
                        size_t(std::max(plan->heads_q, 0));
    const size_t row_bytes = size_t(std::max(c.head_dim, 0)) * 2;
    DevicePtr pq = pointer_arg(q, "q", rows * row_bytes), po = pointer_arg(out, "out", rows * row_bytes);
    DevicePtr pl = lse ? pointer_arg(lse, "lse", rows * 4) : DevicePtr{};
    std::optional<Stream> s;
    if (plan->backend == Backend::GPU) s.emplace(Stream::Borrow{}, stream);
    c_api_detail::BuiltinRegistry &reg = c_api_detail::builtin_registry();
    std::lock_guard lock(reg.mu);
    set_captures(*plan);
    plan->plan->run(pq, po, pl, c, s ? &*s : nullptr);
  });
}

int tilejit_decode_plan_info(const tilejit_decode_plan *plan, int *num_splits, int *block_n, int64_t *scratch_bytes) {
  return guarded("tilejit_decode_plan_info", [&] {
    check_plan(plan);
    if (num_splits) *num_splits = plan->plan->num_splits();
    if (block_n) *block_n = plan->plan->block_n();
    if (scratch_bytes) *scratch_bytes = int64_t(plan->plan->scratch_bytes());
  });
}

int tilejit_decode_plan_destroy(tilejit_decode_plan *plan) {
  return guarded("tilejit_decode_plan_destroy", [&] {
    if (!plan) return;
    c_api_detail::wait_for_device(plan->backend);  // a queued run may still use the plan's scratch
    delete plan;
  });
}

}  // extern "C"
