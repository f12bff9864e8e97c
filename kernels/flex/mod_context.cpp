// The context a mod sees while traced (mod_seqlen_q/k) and the visibility test band ∧ fn.
#include <fmt/format.h>

#include <unordered_set>

#include "dsl/trace_context.h"
#include "ir/ir.h"
#include "kernels/flex/flex_internal.h"
#include "kernels/launch_options.h"
#include "tilejit/error.h"
#include "tilejit/ops.h"

namespace tilejit::attention {

namespace flex {
namespace {
thread_local ModScope *g_scope = nullptr;
}

ModScope::ModScope(Tile q, Tile k, Tile qs, Tile ks)
    : seqlen_q(std::move(q)), seqlen_k(std::move(k)), q_start(std::move(qs)), k_start(std::move(ks)),
      previous_(g_scope) {
  g_scope = this;
}
ModScope::~ModScope() { g_scope = previous_; }

Tile in_band(const BandTiles &band, const Tile &q_idx, const Tile &kv_idx) {
  auto diag = q_idx + band.off;
  return (kv_idx >= diag - band.left) & (kv_idx <= diag + band.right);
}

Tile mod_position(const Tile &position, bool small_positions) {
  return small_positions ? minimum(maximum(position, 0), int(kSmallPositionLimit - 1)) : position;
}

Tile traced_user_fn(const char *what, const std::vector<Tile> &args, const std::function<Tile()> &f) {
  ir::Block *block = dsl::TraceContext::current()->builder.block();
  std::unordered_set<const ir::Op *> before;
  for (const auto &op : block->ops) before.insert(op.get());
  Tile out = f();
  // Values that vary with the position (computed from the mod's arguments): an op that moves or combines elements
  // of such a value (trans, reshape, a reduction, dot) would make a score depend on its neighbours in the block,
  // so on the block sizes the kernel was tuned to.
  std::unordered_set<const ir::Value *> positional;
  for (const Tile &a : args)
    if (a.valid() && !a.is_literal()) positional.insert(dsl::TileAccess::value(a));
  bool program_ids = false;
  const ir::Op *mixing = nullptr;
  auto check = [&](ir::Op &o) {
    program_ids |= o.kind == ir::OpKind::ProgramId || o.kind == ir::OpKind::NumPrograms;
    bool reads_position = false;
    for (const ir::Value *v : o.operands) reads_position |= positional.count(v) != 0;
    if (!reads_position) return;
    for (const auto &r : o.results) positional.insert(r.get());
    using K = ir::OpKind;
    if (!mixing && (o.kind == K::Trans || o.kind == K::Reshape || o.kind == K::Reduce || o.kind == K::ArgReduce ||
                    o.kind == K::Dot))
      mixing = &o;
  };
  for (const auto &op : block->ops) {
    if (before.count(op.get())) continue;
    check(*op);
    for (auto &region : op->regions) ir::walk(*region, check);
  }
  if (program_ids)
    throw TraceError(fmt::format("flex attention: the {} calls program_id() or num_programs(); a mod sees its "
                                 "position only through its arguments b, h, q_idx and kv_idx", what));
  if (mixing)
    throw TraceError(fmt::format("flex attention: the {} applies {} to a value computed from its arguments at {}: a "
                                 "mod computes each score from its own position (b, h, q_idx, kv_idx) and what it "
                                 "loads, while {} combines or moves the elements of a block, whose size the kernel "
                                 "chooses",
                                 what, ir::op_name(mixing->kind), mixing->loc.str(), ir::op_name(mixing->kind)));
  return out;
}

Tile traced_score_mod(const char *op, const ScoreMod &score_mod, const Tile &s, const Tile &b, const Tile &h,
                      const Tile &q_idx, const Tile &kv_idx) {
  Tile out = traced_user_fn("score_mod", {s, b, h, q_idx, kv_idx}, [&] { return score_mod(s, b, h, q_idx, kv_idx); });
  if (!out.valid() || out.shape() != s.shape() || !is_float(out.dtype()))
    throw TraceError(fmt::format(
        "{}: the score_mod returned {} (it must return the score tile's shape [{}] as a float, e.g. an expression "
        "of its `score` argument)",
        op, out.valid() ? fmt::format("{}[{}]", dtype_name(out.dtype()), ir::shape_str(out.shape())) : "nothing",
        ir::shape_str(s.shape())));
  return out.to(DType::f32);
}

Tile band_holds_tile(const BandTiles &band, const Tile &q_first, const Tile &q_last, const Tile &kv_first, int keys) {
  return (kv_first >= q_last + band.off - band.left) & (kv_first + (keys - 1) <= q_first + band.off + band.right);
}

Tile visible(const Mask &mask, bool has_band, const BandTiles &band, const Tile &b, const Tile &h,
             const Tile &q_idx, const Tile &kv_idx) {
  Tile vis;
  if (has_band) vis = in_band(band, q_idx, kv_idx);
  if (mask.fn) {
    Tile f = traced_user_fn("mask function", {b, h, q_idx, kv_idx}, [&] { return mask.fn(b, h, q_idx, kv_idx); });
    if (!f.valid() || f.shape().size() > 2)
      throw TraceError(fmt::format("flex attention: the mask function returned {} (it must return an i1 tile "
                                   "broadcastable to [query rows, key columns], e.g. q >= kv)",
                                   f.valid() ? fmt::format("{}[{}]", dtype_name(f.dtype()), ir::shape_str(f.shape()))
                                             : "nothing"));
    if (f.dtype() != DType::i1)
      throw TraceError(fmt::format("flex attention: the mask function returned {} (it must return i1, e.g. a "
                                   "comparison)", dtype_name(f.dtype())));
    vis = vis.valid() ? (vis & f) : f;
  }
  return vis;
}

BandArgs band_args(const std::optional<Band> &band) {
  BandArgs a;
  if (!band) return a;
  if (band->left >= 0) a.left = bounded_side(band->left);
  if (band->right >= 0) a.right = bounded_side(band->right);
  a.bottom_right = band->align == Align::BottomRight ? 1 : 0;
  return a;
}

LaunchConfig launch_config(const FlexOptions &opt) { return kernels::launch_config_of(opt); }

Sequence sequence(bool varlen, const Tile &b, const Tile &seqlen_q, const Tile &seqlen_k, const Tile &cu_q,
                  const Tile &cu_k, const Tile &seq_lens, const Tile &max_seq_len) {
  Sequence s;
  if (varlen) {
    s.q_start = load(cu_q + b);
    s.seqlen_q = load(cu_q + b + 1) - s.q_start;
  } else {
    s.seqlen_q = seqlen_q;
    s.q_start = b * seqlen_q;
  }
  if (seq_lens.valid()) {  // a paged cache: the lengths are the cache's; keys laid out as [batch, seqlen_k]
    s.seqlen_k = minimum(maximum(load(seq_lens + b), 0), max_seq_len);
    s.k_start = b * seqlen_k;
  } else if (varlen) {
    s.k_start = load(cu_k + b);
    s.seqlen_k = load(cu_k + b + 1) - s.k_start;
  } else {
    s.seqlen_k = seqlen_k;
    s.k_start = b * seqlen_k;
  }
  return s;
}

}  // namespace flex

Tile mod_seqlen_q() {
  if (!flex::g_scope) throw TraceError("mod_seqlen_q: called outside a flex attention mod's trace");
  return flex::g_scope->seqlen_q;
}
Tile mod_q_token(const Tile &q_idx) {
  if (!flex::g_scope) throw TraceError("mod_q_token: called outside a flex attention mod's trace");
  return flex::g_scope->q_start + q_idx;
}
Tile mod_k_token(const Tile &kv_idx) {
  if (!flex::g_scope) throw TraceError("mod_k_token: called outside a flex attention mod's trace");
  return flex::g_scope->k_start + kv_idx;
}
Tile mod_seqlen_k() {
  if (!flex::g_scope) throw TraceError("mod_seqlen_k: called outside a flex attention mod's trace");
  return flex::g_scope->seqlen_k;
}


}  // namespace tilejit::attention
