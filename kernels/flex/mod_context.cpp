// The context a mod sees while traced (mod_seqlen_q/k) and the visibility test band ∧ fn.
#include <fmt/format.h>

#include <cstdint>
#include <unordered_map>
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

namespace {

/// Which axes of each value carry the position of a score (bit i: axis i varies with q_idx, kv_idx or, packed,
/// the query head): the mod's tile arguments' axes longer than 1, followed through the ops a mod traces. An op
/// that contracts or moves such an axis (a reduction or dot over it, trans, a reshape that is more than adding
/// or dropping 1s) makes a score depend on its neighbours in the block, so on the block sizes the kernel chose.
class PositionAxes {
 public:
  explicit PositionAxes(const std::vector<Tile> &args) {
    for (const Tile &a : args)
      if (a.valid() && !a.is_literal()) mark(dsl::TileAccess::value(a), own_axes(dsl::TileAccess::value(a)));
  }
  /// The first op (in trace order) of `ops` that mixes positions, or null.
  const ir::Op *first_mixing(const std::vector<const ir::Op *> &ops) {
    for (const ir::Op *op : ops)
      if (const ir::Op *m = visit(*op)) return m;
    return nullptr;
  }

 private:
  using Mask = uint32_t;
  std::unordered_map<const ir::Value *, Mask> axes_;

  static Mask own_axes(const ir::Value *v) {  // the axes longer than 1
    Mask m = 0;
    for (size_t i = 0; i < v->type.shape.size(); ++i)
      if (v->type.shape[i] > 1) m |= Mask(1) << i;
    return m;
  }
  Mask of(const ir::Value *v) const {
    auto it = axes_.find(v);
    return it == axes_.end() ? 0 : it->second;
  }
  void mark(const ir::Value *v, Mask m) {
    if (m) axes_[v] |= m & own_axes(v);
  }
  /// v's axes in a result of rank `rank`, aligned from the right (broadcasting).
  Mask aligned(const ir::Value *v, size_t rank) const {
    const size_t r = v->type.shape.size();
    return r <= rank ? of(v) << (rank - r) : 0;
  }
  /// Whether anything in `ops` (recursively) reads a value with position axes.
  bool reads_position(const ir::Block &blk) const {
    for (const auto &op : blk.ops) {
      for (const ir::Value *v : op->operands)
        if (of(v)) return true;
      for (const auto &r : op->regions)
        if (reads_position(*r)) return true;
    }
    return false;
  }

  const ir::Op *visit(const ir::Op &o) {
    using K = ir::OpKind;
    const ir::Value *res = o.num_results() ? o.result() : nullptr;
    const size_t rank = res ? res->type.shape.size() : 0;
    switch (o.kind) {
      case K::Reduce: case K::ArgReduce: {
        const Mask in = of(o.operand(0));
        if (in & (Mask(1) << o.attrs.axis)) return &o;
        const Mask low = in & ((Mask(1) << o.attrs.axis) - 1), high = in >> (o.attrs.axis + 1) << o.attrs.axis;
        mark(res, low | high);
        return nullptr;
      }
      case K::Dot: {
        const Mask a = of(o.operand(0)), b = of(o.operand(1));
        if ((a & 2) || (b & 1)) return &o;  // the contracted axis K varies with the position
        mark(res, (a & 1) | (b & 2) | of(o.operand(2)));
        return nullptr;
      }
      case K::Trans:
        if (of(o.operand(0))) return &o;
        return nullptr;
      case K::Reshape: {
        // Adding or dropping axes of 1 keeps every element where it is: the long axes stay in order.
        const ir::Value *in = o.operand(0);
        const Mask m = of(in);
        if (!m) return nullptr;
        std::vector<int64_t> long_in, long_out;
        for (int64_t d : in->type.shape)
          if (d > 1) long_in.push_back(d);
        for (int64_t d : res->type.shape)
          if (d > 1) long_out.push_back(d);
        if (long_in != long_out) return &o;
        Mask out = 0;
        size_t j = 0;  // the k-th long axis of the input is the k-th long axis of the result
        for (size_t i = 0; i < in->type.shape.size(); ++i) {
          if (in->type.shape[i] <= 1) continue;
          while (res->type.shape[j] <= 1) ++j;
          if (m & (Mask(1) << i)) out |= Mask(1) << j;
          ++j;
        }
        mark(res, out);
        return nullptr;
      }
      case K::ExpandDims: {
        const Mask m = of(o.operand(0)), a = Mask(o.attrs.axis);
        mark(res, (m & ((Mask(1) << a) - 1)) | ((m >> a) << (a + 1)));
        return nullptr;
      }
      case K::For: case K::If: {
        // Control flow: conservatively, every result and region argument varies along all its long axes when
        // anything it reads does.
        bool reads = false;
        for (const ir::Value *v : o.operands) reads |= of(v) != 0;
        for (const auto &r : o.regions) reads |= reads_position(*r);
        if (reads) {
          for (const auto &r : o.regions)
            for (const auto &a : r->args) mark(a.get(), own_axes(a.get()));
          for (const auto &r : o.results) mark(r.get(), own_axes(r.get()));
        }
        for (const auto &r : o.regions)
          for (const auto &op : r->ops)
            if (const ir::Op *m = visit(*op)) return m;
        return nullptr;
      }
      default: {
        // Elementwise ops, loads, broadcasts, casts: each result element reads its operands' elements at the
        // same position (broadcast from the right).
        Mask m = 0;
        for (const ir::Value *v : o.operands) m |= aligned(v, rank);
        for (const auto &r : o.results) mark(r.get(), m);
        return nullptr;
      }
    }
  }
};

}  // namespace

Tile traced_user_fn(const char *what, const std::vector<Tile> &args, const std::function<Tile()> &f) {
  ir::Block *block = dsl::TraceContext::current()->builder.block();
  std::unordered_set<const ir::Op *> before;
  for (const auto &op : block->ops) before.insert(op.get());
  Tile out = f();
  std::vector<const ir::Op *> added;
  bool program_ids = false;
  for (const auto &op : block->ops) {
    if (before.count(op.get())) continue;
    added.push_back(op.get());
    auto check = [&](ir::Op &o) { program_ids |= o.kind == ir::OpKind::ProgramId || o.kind == ir::OpKind::NumPrograms; };
    check(*op);
    for (auto &region : op->regions) ir::walk(*region, check);
  }
  if (program_ids)
    throw TraceError(fmt::format("flex attention: the {} calls program_id() or num_programs(); a mod sees its "
                                 "position only through its arguments b, h, q_idx and kv_idx", what));
  if (const ir::Op *mixing = PositionAxes(args).first_mixing(added))
    throw TraceError(fmt::format("flex attention: the {} applies {} at {} across an axis that varies with the "
                                 "position (q_idx, kv_idx, the score): a mod computes each score from its own position "
                                 "and what it loads, while this combines or moves the elements of a block, whose "
                                 "size the kernel chooses",
                                 what, ir::op_name(mixing->kind), mixing->loc.str()));
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
