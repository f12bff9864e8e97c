// The flex attention backward kernels: FlashAttention-2's backward (arXiv 2307.08691, Algorithm 2) with the
// user's score_mod and mask traced into its loops, and the score_mod's derivative traced from the mod's own
// ops by vjp (tilejit/autodiff.h).
//
// With s = q·kᵀ·scale, z = score_mod(s) (−inf where masked), P = exp(z − lse) and D = rowsum(dO ∘ O):
//   dV = Pᵀ·dO,   dP = dO·Vᵀ,   dZ = P ∘ (dP − D),   dS = vjp(z, s, dZ) (0 where masked),
//   dQ = dS·K·scale,   dK = dSᵀ·Q·scale.
// Three kernels; by default every sum is bitwise reproducible: dQ, dK and dV are summed without atomics, and
// learnable captures' gradients as 64-bit fixed-point integers (fixed_point_grads.h), whose sums do not
// depend on the order. With ATOMICS (FlexOptions::atomics) the dK/dV kernel adds each tile's dQ into an f32
// accumulator, and the captures' gradients into their buffers, with f32 atomics instead:
//   delta: D per query row, and (ATOMICS) the dQ accumulator zeroed (program: query block, query head, batch);
//   dkdv:  a key block's dK, dV in registers (program: key block, KV head, batch), walking the query blocks
//          that see it for every query head of its GQA group (the group's sum is taken in the program); the
//          gradients of learnable captures the mod reads are added here;
//   dq:    a query block's dQ (program: query block, query head, batch), walking the key blocks it sees, or
//          (ATOMICS) converted from the accumulator.
// Both main kernels recompute P from the forward's logsumexp (the dK/dV kernel as Pᵀ, a key per row, except with
// ATOMICS). Bands bound both walks in closed form; with a mask function (USE_BLOCK_MASK) the dQ kernel walks
// its query block's list of a block mask and the dK/dV kernel its key block's transposed list, so wholly
// masked tiles are skipped. Only the tiles that may hide entries (partial blocks of the band or block mask,
// the blocks at a sequence's end; every tile of a mask function walked without a block mask) run the mask and
// the bounds tests; the others take straight-line code without them. Varlen: each program's sequence comes from
// cu_seqlens. Rows that see no key (lse −inf) get P = 0: zero gradients.
#include <limits>
#include <tuple>

#include <fmt/format.h>

#include "ir/ir.h"
#include "kernels/flex/flex_backward.h"
#include "kernels/flex/kernel_lru.h"
#include "kernels/log2_units.h"
#include "kernels/online_softmax.h"
#include "tilejit/autodiff.h"
#include "tilejit/error.h"
#include "tilejit/ops.h"

namespace tilejit::attention::flex {
namespace {

using kernels::kLog2e;

ParamTable backward_params(DType dt) {
  using K = detail::ParamKind;
  ParamTable t;
  for (const char *n : {"Q", "K", "V", "O", "DO", "DQ", "DK", "DV"}) t.add(n, K::Ptr, dt);
  for (const char *n : {"LSE", "DELTA"}) t.add(n, K::Ptr, DType::f32);
  for (const char *n : {"CU_SEQLENS_Q", "CU_SEQLENS_K"}) t.add(n, K::Ptr, DType::i32);
  t.add("DQ_ACC", K::Ptr, DType::f32);
  for (const char *n : {"KV_BLOCKS", "KV_COUNTS", "Q_BLOCKS", "Q_COUNTS"}) t.add(n, K::Ptr, DType::i32);
  t.add("scale", K::F32, DType::f32);
  t.add("group", K::I32);
  t.add("seqlen_q", K::I32, DType::i32, false);
  t.add("seqlen_k", K::I32);
  if (add_stride_params(t) != bQb || add_band_params(t) != bBandLeft)
    throw TraceError("internal: flex backward parameters");
  // Block counts and list strides change with the lengths and gain nothing from divisibility (scalar offsets):
  // not specialized, as the forward's.
  for (const char *n : {"num_q_blocks", "num_k_blocks", "lists_stride_b", "lists_stride_h", "tlists_stride_b",
                        "tlists_stride_h"})
    t.add(n, K::I32, DType::i32, /*specialize=*/false);
  if (add_tile_params(t) != bBlockM) throw TraceError("internal: flex backward parameters");
  for (const char *n : {"HAS_BAND", "LARGE", "VARLEN", "ATOMICS", "USE_BLOCK_MASK", "SMALL_POSITIONS", "EXACT_FRAMES"})
    t.add(n, K::ConstBool, DType::i1);
  return t;
}

// What the three kernels share: parameters, offsets, and the recomputation of one (query block, key block)
// tile's probabilities and score gradients.
struct Tracer {
  DType dt;
  const ScoreMod &score_mod;
  const Mask &mask;
  std::span<const detail::ArgValue> a;
  int BM, BN, DQK, DV, PQK, PV;
  bool has_band, large, varlen, atomics, use_block_mask, small_positions, exact_frames;
  // The program's sequence (bind_sequence): its lengths, its first query / key token in the packed layout
  // (varlen; 0 for dense layouts, whose batch stride moves b) and the band's offset.
  Tile seqlen_q, seqlen_k, q_start, k_start;
  Tile dq_cols, dv_cols, kq_cols, v_cols;
  BandTiles band;

  Tracer(DType dt, const ScoreMod &sm, const Mask &m, std::span<const detail::ArgValue> args)
      : dt(dt), score_mod(sm), mask(m), a(args) {
    auto C = [&](int i) { return int(a[size_t(i)].i); };
    BM = C(bBlockM), BN = C(bBlockN), DQK = C(bDimQK), DV = C(bDimV), PQK = C(bPadQK), PV = C(bPadV);
    has_band = C(bHasBand);
    large = C(bLarge);
    varlen = C(bVarlen);
    atomics = C(bAtomics);
    use_block_mask = C(bUseBlockMask);
    small_positions = C(bSmallPositions);
    exact_frames = C(bExactFrames);
    dq_cols = arange(0, PQK);
    dv_cols = arange(0, PV);
    if (DQK != PQK) kq_cols = (dq_cols < DQK)(None, _);  // padded head dim: lanes past DIM_QK read 0
    if (DV != PV) v_cols = (dv_cols < DV)(None, _);
  }

  /// Binds batch b's sequence (call first in each kernel); returns it for the mods' ModScope.
  Sequence bind_sequence(const Tile &b) {
    Sequence sq = sequence(varlen, b, P(bSeqlenQ), P(bSeqlenK), P(bCuQ), P(bCuK));
    seqlen_q = sq.seqlen_q;
    seqlen_k = sq.seqlen_k;
    q_start = varlen ? sq.q_start : Tile(0);
    k_start = varlen ? sq.k_start : Tile(0);
    if (has_band) band = {P(bBandLeft), P(bBandRight), P(bBandBottomRight) * (seqlen_k - seqlen_q)};
    return sq;
  }

  static Tile P(int i) { return detail::param_tile(i); }

  /// Walks the blocks of list (b, h, block) of a block mask (entries: block index · 2 + full) while `live`:
  /// body(start, full) gets each listed block's first row / key, `block_size` apart, and whether the mask
  /// shows every entry of the tile (i1 scalar).
  template <class Body>
  void walk_list(int blocks, int counts, int stride_b, int stride_h, int list_len, const Tile &b, const Tile &h,
                 const Tile &block, const Tile &live, int block_size, Body body) const {
    Tile row = b * P(stride_b) + h * P(stride_h) + block;
    Tile count = where(live, load(P(counts) + row), 0);
    Tile list = P(blocks) + row.to(DType::i64) * P(list_len);
    for_range(0, count, 1, [&](I32 i) {
      Tile code = load(list + i);
      body((code >> 1) * block_size, (code & 1) != 0);
    });
  }
  Tile stride(int i) const { return offset_param(i, large); }
  Tile wide(const Tile &t) const { return large ? t.to(DType::i64) : t; }

  // [rows, PAD] tile of a [batch, head, seq, d] tensor (strides at first_stride: batch, head, seq); rows count
  // from the sequence's first token `start` (varlen).
  Tile rows_ptr(int ptr, int first_stride, const Tile &b, const Tile &h, const Tile &start, const Tile &rows,
                const Tile &cols) const {
    Tile base = wide(b) * stride(first_stride) + wide(h) * stride(first_stride + 1);
    return P(ptr) + base + (wide(start + rows) * stride(first_stride + 2))(_, None) + cols(None, _);
  }
  Tile mask_cols(const Tile &row_ok, const Tile &cols_mask) const {
    Tile m = row_ok(_, None);
    return cols_mask.valid() ? m & cols_mask : m;
  }
  Tile q_ptr(int t, const Tile &b, const Tile &h, const Tile &rows) const {
    return rows_ptr(t, bQb, b, h, q_start, rows, dq_cols);
  }
  Tile k_ptr(int t, const Tile &b, const Tile &h, const Tile &rows) const {
    return rows_ptr(t, bKb, b, h, k_start, rows, dq_cols);
  }
  Tile v_ptr(int t, const Tile &b, const Tile &h, const Tile &rows) const {
    return rows_ptr(t, bVb, b, h, k_start, rows, dv_cols);
  }
  Tile o_ptr(int t, const Tile &b, const Tile &h, const Tile &rows) const {
    return rows_ptr(t, bOb, b, h, q_start, rows, dv_cols);
  }
  Tile row_offsets(const Tile &b, const Tile &h, const Tile &rows) const {
    return (wide(b) * stride(bLb) + wide(h) * stride(bLh)) + wide(q_start + rows) * stride(bLs);
  }
  Tile row_ptr(int t, const Tile &b, const Tile &h, const Tile &rows) const { return P(t) + row_offsets(b, h, rows); }
  // [rows, PAD_QK] of the f32 dQ accumulator: PAD_QK values per query row, rows laid out as lse's.
  Tile acc_ptr(const Tile &b, const Tile &h, const Tile &rows) const {
    return P(bDqAcc) + (row_offsets(b, h, rows) * PQK)(_, None) + dq_cols(None, _);
  }

  // A query block's rows of query head h from start_m: q [BM, PQK], dO [BM, PV], lse and delta [BM].
  struct Rows {
    Tile start, rows, ok, q, dout, lse, delta;
  };
  Rows query_rows(const Tile &b, const Tile &h, const Tile &start_m) const {
    Rows r;
    r.start = start_m;
    r.rows = start_m + arange(0, BM);
    r.ok = r.rows < seqlen_q;
    r.q = load(q_ptr(bQ, b, h, r.rows), mask_cols(r.ok, kq_cols), 0.f);
    r.dout = load(o_ptr(bDO, b, h, r.rows), mask_cols(r.ok, v_cols), 0.f);
    r.lse = load(row_ptr(bLse, b, h, r.rows), r.ok, -std::numeric_limits<float>::infinity());
    r.delta = load(row_ptr(bDelta, b, h, r.rows), r.ok, 0.f);
    return r;
  }
  // A key block's keys of KV head hk from start_n: k [BN, PQK], v [BN, PV].
  struct Keys {
    Tile start, cols, ok, k, v;
  };
  Keys key_cols(const Tile &b, const Tile &hk, const Tile &start_n) const {
    Keys c;
    c.start = start_n;
    c.cols = start_n + arange(0, BN);
    c.ok = c.cols < seqlen_k;
    c.k = load(k_ptr(bK, b, hk, c.cols), mask_cols(c.ok, kq_cols), 0.f);
    c.v = load(v_ptr(bV, b, hk, c.cols), mask_cols(c.ok, v_cols), 0.f);
    return c;
  }

  /// Whether tile (r, c) may hold an entry to mask (i1 scalar): it crosses a sequence's end or is not wholly
  /// visible — `full` says that for a block mask's entry; else, with a band alone, the tile must lie inside it
  /// for every row and key. An empty Tile: always (a mask function without a block mask).
  Tile need_mask(const Rows &r, const Keys &c, const Tile &full = {}) const {
    Tile need = (r.start + BM > seqlen_q) | (c.start + BN > seqlen_k);
    if (full.valid()) return need | !full;
    if (mask.fn) return Tile();
    if (!has_band) return need;
    return need | !band_holds_tile(band, r.start, r.start + (BM - 1), c.start, BN);
  }

  /// Which way a tile's rows run. The dQ kernel's tiles are [BM, BN], a query per row. The dK/dV kernel's are
  /// transposed, [BN, BM], a key per row (as FlashAttention-3's backward computes Sᵀ = K·Qᵀ): Pᵀ and dSᵀ then
  /// come out of their dots in the accumulator layout, which is the register A operand of dV += Pᵀ·dO and
  /// dK += dSᵀ·Q, instead of going through shared memory to be read transposed. The mods see q_idx and kv_idx
  /// broadcast the other way round; they are elementwise, so their values do not change.
  enum class RowsAre { Queries, Keys };
  struct Grad {
    Tile p, ds;  // f32 [BM, BN] or [BN, BM]: probabilities and d(score before the mod), 0 where masked or outside
  };
  // One tile's P and dS. captures: whether loads from learnable captures add their gradients (in exactly one
  // of the two sweeps). `need` (an i1 scalar from need_mask; empty: always) chooses between two arms, each
  // straight-line code from the scores to dS: one that zeroes what the tile hides, and one for the tiles
  // wholly visible (most tiles of a band or block mask, all but the last of an unmasked sequence), whose P
  // and dS come straight from the scores.
  Grad tile(const Tile &b, const Tile &h, const Rows &r, const Keys &c, CaptureGrads captures, const Tile &need,
            RowsAre orient) const {
    const Tile &rows = r.rows, &cols = c.cols, &q = r.q, &k = c.k, &v = c.v, &dout = r.dout, &lse = r.lse,
               &delta = r.delta;
    const float neg_inf = -std::numeric_limits<float>::infinity();
    const bool by_key = orient == RowsAre::Keys;
    // A per-query vector and a per-key vector, broadcast along the tile's other axis.
    auto per_q = [&](const Tile &t) { return by_key ? t(None, _) : t(_, None); };
    auto per_k = [&](const Tile &t) { return by_key ? t(_, None) : t(None, _); };
    Tile q_idx = per_q(mod_position(minimum(rows, maximum(seqlen_q - 1, 0)), small_positions));
    Tile kv_idx = per_k(mod_position(minimum(cols, maximum(seqlen_k - 1, 0)), small_positions));
    Tile qk = by_key ? dot(k, trans(q)) : dot(q, trans(k));
    Tile dp = by_key ? dot(v, trans(dout)) : dot(dout, trans(v));
    // p = exp(z − lse) = exp2(z·log2e − lse·log2e): lse goes to log2 units once per query, so each score costs
    // one fma and an exp2 (the scale folds into the fma's factor). A row that saw no key in the forward (lse
    // −inf: a mod made every score −inf) gets p = exp2(z·log2e − ∞) = 0 in the unmasked arm; the masked arm
    // zeroes it.
    // EXACT_FRAMES (the mod may return any finite score, e.g. a soft mask of −1e30 over a whole row): rows the
    // forward took in its exact frame (|lse|·log2e past the ordinary bound, online_softmax.h) are where the
    // rounding of lse·log2e can exceed 2^7, so z·log2e − lse·log2e for the row's largest z could be far above 0
    // and exp2 overflow. There p = 2^(z − lse) instead (factor 1: the subtraction exact for scores near lse, p ≤ 1
    // as lse ≥ max z); the base does not matter there, as the forward's exact frame found: scores differ by at
    // least their spacing (2^7), where e^−d and 2^−d are both 0 in f32. Ties get p = 1 each, not 1/ties: lse
    // cannot carry log(ties) at that magnitude (FlexAttention's gradient too). Below the bound the fma form
    // stays, its p off by at most 2^32 through lse·log2e's rounding, as lse's own rounding already makes it.
    Tile to_log2 = Tile(kLog2e);
    if (exact_frames)
      to_log2 = where(abs(lse) < float(OnlineSoftmax::ordinary_bound(dt) / kLog2e), kLog2e, 1.f);
    Tile neg_lse_log2 = where(lse > neg_inf, lse, std::numeric_limits<float>::infinity()) * -to_log2;
    if (exact_frames) to_log2 = per_q(to_log2);
    Grad g{qk, qk};  // placeholders of the arms' types, reassigned in both
    auto arm = [&](bool masked) {
      Tile s = qk * P(bScale);  // in the arm: vjp differentiates within one block
      Tile z = score_mod ? traced_score_mod("flex attention backward", score_mod, s, b, h, q_idx, kv_idx) : s;
      Tile vis;  // outside the sequence, masked, or in a row that saw no key: hidden
      if (masked) {
        vis = per_q(rows < seqlen_q) & per_k(cols < seqlen_k) & per_q(lse > neg_inf);
        Tile m = visible(mask, has_band, band, b, h, q_idx, kv_idx);
        if (m.valid()) vis = vis & m;
      }
      Tile p = exp2(fma(z, to_log2, per_q(neg_lse_log2)));
      if (masked) p = where(vis, p, 0.f);
      Tile dz = p * (dp - per_q(delta));
      Tile ds = score_mod ? vjp(z, s, dz, captures) : dz;
      // dS zeroed again: dZ is 0·(dP − D) where p is, not 0 where a hidden key's dP or the mod's derivative is
      // not finite.
      if (masked) ds = where(vis, ds, 0.f);
      g = {p, ds};
    };
    if (need.valid()) if_(need, [&] { arm(true); }, [&] { arm(false); });
    else arm(true);
    return g;
  }
};

// D = rowsum(dO ∘ O) per query row.
void trace_delta(DType dt, std::span<const detail::ArgValue> a) {
  static const ScoreMod none;
  static const Mask no_mask;
  Tracer t(dt, none, no_mask, a);
  Tile m = program_id(0), h = program_id(1), b = program_id(2);
  t.bind_sequence(b);
  Tile rows = m * t.BM + arange(0, t.BM);
  Tile row_ok = rows < t.seqlen_q, ld = t.mask_cols(row_ok, t.v_cols);
  Tile o = load(t.o_ptr(bO, b, h, rows), ld, 0.f).to(DType::f32);
  Tile dout = load(t.o_ptr(bDO, b, h, rows), ld, 0.f).to(DType::f32);
  store(t.row_ptr(bDelta, b, h, rows), sum(o * dout, 1), row_ok);
  if (t.atomics) store(t.acc_ptr(b, h, rows), zeros({t.BM, t.PQK}, DType::f32), row_ok(_, None));
}

// A key block's dK and dV over every query head of its group and every query block that sees it.
void trace_dkdv(DType dt, const ScoreMod &score_mod, const Mask &mask, std::span<const detail::ArgValue> a) {
  Tracer t(dt, score_mod, mask, a);
  Tile n = program_id(0), hk = program_id(1), b = program_id(2);
  Sequence sq = t.bind_sequence(b);
  ModScope scope(sq.seqlen_q, sq.seqlen_k, sq.q_start, sq.k_start);
  Tile start_n = n * t.BN;
  const Tracer::Keys keys = t.key_cols(b, hk, start_n);
  Tile dk = zeros({t.BN, t.PQK}, DType::f32), dv = zeros({t.BN, t.PV}, DType::f32);
  auto query_block = [&](const Tile &h, const Tile &start_m, const Tile &full = {}) {
    const Tracer::Rows rows = t.query_rows(b, h, start_m);
    const CaptureGrads captures = t.atomics ? CaptureGrads::Scatter : CaptureGrads::ScatterFixedPoint;
    // A key per row, except with ATOMICS: the tile's dQ = dS·K wants dS a query per row.
    const auto orient = t.atomics ? Tracer::RowsAre::Queries : Tracer::RowsAre::Keys;
    Tracer::Grad gr = t.tile(b, h, rows, keys, captures, t.need_mask(rows, keys, full), orient);
    Tile p = gr.p.to(dt);
    dv = dot(t.atomics ? trans(p) : p, rows.dout, dv);  // Pᵀ·dO
    Tile ds = gr.ds.to(dt);
    dk = dot(t.atomics ? trans(ds) : ds, rows.q, dk);  // dSᵀ·Q
    if (t.atomics) atomic_add(t.acc_ptr(b, h, rows.rows), dot(ds, keys.k), rows.ok(_, None));
  };
  Tile live = start_n < t.seqlen_k;  // a block past its sequence's keys (varlen) visits nothing
  Tile group = Tracer::P(bGroup);
  for_range(0, group, 1, [&](I32 g) {
    Tile h = hk * group + g;
    if (t.use_block_mask) {
      t.walk_list(bQBlocks, bQCounts, bTListsStrideB, bTListsStrideH, bNumQBlocks, b, h, n, live, t.BM,
                  [&](const Tile &start_m, const Tile &full) { query_block(h, start_m, full); });
      return;
    }
    // The queries that can see keys [start_n, start_n + BN): q + off − left ≤ kv and kv ≤ q + off + right.
    Tile lo = Tile(0), hi = t.seqlen_q;
    if (t.has_band) {
      lo = maximum(start_n - t.band.off - t.band.right, 0);
      hi = minimum(t.seqlen_q, start_n + (t.BN - 1) - t.band.off + t.band.left + 1);
    }
    for_range((lo / t.BM) * t.BM, where(live, hi, 0), t.BM, [&](I32 start_m) { query_block(h, start_m); });
  });
  store(t.k_ptr(bDK, b, hk, keys.cols), (dk * Tracer::P(bScale)).to(dt), t.mask_cols(keys.ok, t.kq_cols));
  store(t.v_ptr(bDV, b, hk, keys.cols), dv.to(dt), t.mask_cols(keys.ok, t.v_cols));
}

// A query block's dQ over every key block it sees.
void trace_dq(DType dt, const ScoreMod &score_mod, const Mask &mask, std::span<const detail::ArgValue> a) {
  Tracer t(dt, score_mod, mask, a);
  Tile m = program_id(0), h = program_id(1), b = program_id(2);
  // Under a causal band or a sliding window a later query block sees at least as many key blocks; programs start
  // in order of program_id(0), so the longest start first and the grid's tail is made of short ones (a band
  // open only to the right, rare, runs shortest first instead: correct, only ordered worse).
  if (t.has_band) m = num_programs(0) - 1 - m;
  Sequence sq = t.bind_sequence(b);
  ModScope scope(sq.seqlen_q, sq.seqlen_k, sq.q_start, sq.k_start);
  Tile hk = h / Tracer::P(bGroup);
  Tile start_m = m * t.BM;
  if (t.atomics) {  // the dK/dV kernel accumulated dQ: scale and convert
    Tile rows = start_m + arange(0, t.BM);
    Tile ok = rows < t.seqlen_q;
    Tile dq = load(t.acc_ptr(b, h, rows), ok(_, None), 0.f);
    store(t.q_ptr(bDQ, b, h, rows), (dq * Tracer::P(bScale)).to(dt), t.mask_cols(ok, t.kq_cols));
    return;
  }
  const Tracer::Rows rows = t.query_rows(b, h, start_m);
  Tile dq = zeros({t.BM, t.PQK}, DType::f32);
  auto key_block = [&](const Tile &start_n, const Tile &full = {}) {
    const Tracer::Keys keys = t.key_cols(b, hk, start_n);
    Tracer::Grad gr =
        t.tile(b, h, rows, keys, CaptureGrads::Ignore, t.need_mask(rows, keys, full), Tracer::RowsAre::Queries);
    dq = dot(gr.ds.to(dt), keys.k, dq);
  };
  Tile live = start_m < t.seqlen_q;  // a block past its sequence's queries (varlen) visits nothing
  if (t.use_block_mask) {
    t.walk_list(bKvBlocks, bKvCounts, bListsStrideB, bListsStrideH, bNumKBlocks, b, h, m, live, t.BN, key_block);
  } else {
    Tile lo = Tile(0), hi = t.seqlen_k;
    if (t.has_band) {
      Tile last_q = minimum(start_m + t.BM, t.seqlen_q) - 1;
      lo = maximum(start_m + t.band.off - t.band.left, 0);
      hi = minimum(t.seqlen_k, last_q + t.band.off + t.band.right + 1);
    }
    for_range((lo / t.BN) * t.BN, where(live, hi, 0), t.BN, [&](I32 start_n) { key_block(start_n); });
  }
  store(t.q_ptr(bDQ, b, h, rows.rows), (dq * Tracer::P(bScale)).to(dt), t.mask_cols(rows.ok, t.kq_cols));
}

using BackwardKey = std::tuple<int, DType, const void *, const void *>;
KernelLru<BackwardKey> &backward_kernels() {
  static KernelLru<BackwardKey> kernels(kMaxCachedModKernels);
  return kernels;
}

}  // namespace

std::shared_ptr<KernelBase> backward_kernel(BackwardKernel which, DType dt, const ScoreMod &score_mod,
                                            const Mask &mask) {
  const bool mods = which != BackwardKernel::Delta;
  BackwardKey key{int(which), dt, mods ? score_mod.identity() : nullptr, mods ? mask.fn.identity() : nullptr};
  return backward_kernels().get(key, [&]() -> std::shared_ptr<KernelBase> {
    ParamTable t = backward_params(dt);
    switch (which) {
      case BackwardKernel::Delta:
        return std::make_shared<KernelBase>("flex_attention_bwd_delta", std::move(t.decls), std::move(t.names),
                                            [dt](std::span<const detail::ArgValue> a) { trace_delta(dt, a); });
      case BackwardKernel::DkDv:
        return std::make_shared<KernelBase>(
            "flex_attention_bwd_dkdv", std::move(t.decls), std::move(t.names),
            [dt, score_mod, mask](std::span<const detail::ArgValue> a) { trace_dkdv(dt, score_mod, mask, a); });
      case BackwardKernel::Dq:
        return std::make_shared<KernelBase>(
            "flex_attention_bwd_dq", std::move(t.decls), std::move(t.names),
            [dt, score_mod, mask](std::span<const detail::ArgValue> a) { trace_dq(dt, score_mod, mask, a); });
    }
    throw TraceError("internal: unknown backward kernel");
  });
}

}  // namespace tilejit::attention::flex
