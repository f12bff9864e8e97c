// The flex attention forward kernel: FlashAttention-2's loop (arXiv 2307.08691, Algorithm 1) with the
// user's score_mod and mask traced into the inner loop.
//
// Program (query block, query head h, batch b). GQA: the key/value head is h / group. Varlen: the
// sequence's token range comes from cu_seqlens, and rows/keys are positions inside it. The key blocks a
// program visits are, in order of preference: the block mask's list for this (b, h, query block) (the mask
// is applied only on blocks flagged partial); the band's closed-form range (the band test only on blocks
// crossing the band's edge); every key block. The online softmax (kernels/online_softmax.h) works in log2
// units, exp2(s·c − R) with one fma per score (c = scale·log2e on raw scores without a score_mod, log2e after
// one; the built-in ALiBi keeps a factor in c, see BuiltinScoreForm). How it keeps scores in range is the
// launch's ScoreFrame (flex_internal.h). Rows seeing no key end
// with l = 0 → output 0 and lse −inf. Offsets are i64 when LARGE (a tensor spans ≥ 2^31 elements), i32
// otherwise.
#include <bit>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "kernels/flex/flex_internal.h"
#include "kernels/flex/kernel_lru.h"
#include "kernels/online_softmax.h"
#include "tilejit/error.h"
#include "tilejit/ops.h"
#include "kernels/log2_units.h"

namespace tilejit::attention::flex {
namespace {

using kernels::kLog2e;
using kernels::kLn2;

ParamTable flex_params(DType dt) {
  using K = detail::ParamKind;
  ParamTable t;
  for (const char *n : {"Q", "K", "V", "O"}) t.add(n, K::Ptr, dt);
  t.add("LSE", K::Ptr, DType::f32);
  for (const char *n : {"CU_SEQLENS_Q", "CU_SEQLENS_K", "KV_BLOCKS", "KV_COUNTS", "BLOCK_TABLE", "SEQ_LENS"})
    t.add(n, K::Ptr, DType::i32);
  for (const char *n : {"O_PART", "LSE_PART"}) t.add(n, K::Ptr, DType::f32);
  // Lengths and what derives from them (block counts, the logsumexp's strides) change from call to call and
  // gain nothing from divisibility (row masks and scalar offsets), so they are not specialized: any set of
  // lengths compiles at most two kernels per variant (seqlen_k divisible by 16 or not).
  constexpr bool kNoSpec = false;
  t.add("scale", K::F32, DType::f32);
  // The block mask's list strides (0 where one set of lists serves every batch / head): scalar offsets.
  for (const char *n : {"bm_stride_b", "bm_stride_h"}) t.add(n, K::I32, DType::i32, kNoSpec);
  t.add("group", K::I32);
  t.add("seqlen_q", K::I32, DType::i32, kNoSpec);
  t.add("seqlen_k", K::I32);
  if (add_stride_params(t) != kQb || add_band_params(t) != kBandLeft) throw TraceError("internal: flex parameters");
  for (const char *n : {"num_q_blocks", "num_k_blocks"}) t.add(n, K::I32, DType::i32, kNoSpec);
  t.add("block_table_stride", K::I64, DType::i64);
  t.add("num_splits", K::I32, DType::i32, kNoSpec);
  for (const char *n : {"part_stride_o", "part_stride_l"}) t.add(n, K::I64, DType::i64, kNoSpec);
  t.add("score_ref", K::F32, DType::f32);  // ScoreFrame::reference
  t.add("max_seq_len", K::I32, DType::i32, kNoSpec);  // paged: tokens a sequence's block-table row holds
  if (add_tile_params(t) != kBlockM) throw TraceError("internal: flex parameters");
  for (const char *n : {"VARLEN", "HAS_BAND", "USE_BLOCK_MASK", "LARGE"}) t.add(n, K::ConstBool, DType::i1);
  t.add("SCORE_FRAME", K::ConstInt);
  t.add("PAGED", K::ConstBool, DType::i1);
  t.add("PAGE_SIZE", K::ConstInt);
  for (const char *n : {"PACK_GQA", "SPLIT", "SMALL_POSITIONS"}) t.add(n, K::ConstBool, DType::i1);
  return t;
}

void trace_flex(DType dt, const ScoreMod &score_mod, const Mask &mask, std::span<const detail::ArgValue> a) {
  auto P = [](int i) { return detail::param_tile(i); };
  auto C = [&](int i) { return int(a[size_t(i)].i); };
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int BM = C(kBlockM), BN = C(kBlockN), DQK = C(kDimQK), DV = C(kDimV), PQK = C(kPadQK), PV = C(kPadV);
  const bool varlen = C(kVarlen), has_band = C(kHasBand), use_block_mask = C(kUseBlockMask), large = C(kLarge);
  const ScoreFrame::Kind frame = ScoreFrame::Kind(C(kScoreFrame));
  const bool fixed_ref = frame == ScoreFrame::FixedReference;
  const bool paged = C(kPaged), pack = C(kPackGqa), split = C(kSplit), small = C(kSmallPositions);
  const int page_size = C(kPageSize);

  Tile pid_m = program_id(0), h = program_id(1), b = program_id(2);
  Tile split_id;  // KV split: program_id(0) = query block · num_splits + split
  if (split) {
    split_id = pid_m % P(kNumSplits);
    pid_m = pid_m / P(kNumSplits);
  }
  Sequence sq = sequence(varlen, b, P(kSeqlenQ), P(kSeqlenK), P(kCuQ), P(kCuK), paged ? P(kSeqLens) : Tile(),
                         paged ? P(kMaxSeqLen) : Tile());
  ModScope scope(sq.seqlen_q, sq.seqlen_k, sq.q_start, sq.k_start);
  // The kernel's own offsets are the packed token's (varlen) or 0 (dense: the batch stride moves b; paged:
  // the block table does).
  Tile seqlen_q = sq.seqlen_q, seqlen_k = sq.seqlen_k;
  Tile q_start = varlen ? sq.q_start : Tile(0), k_start = varlen && !paged ? sq.k_start : Tile(0);
  // With GQA packing program_id(1) is the KV head and each row is a (token, query head of its group) pair.
  Tile kv_h = pack ? h : h / P(kGroup);
  auto stride = [&](int i) { return offset_param(i, large); };
  auto wide = [&](const Tile &t) { return large ? t.to(DType::i64) : t; };
  Tile q_start_w = varlen && large ? q_start.to(DType::i64) : q_start;
  Tile k_start_w = varlen && large ? k_start.to(DType::i64) : k_start;

  // rows: each row's token in the sequence; heads: its query head (a scalar without packing). tok0 / tok_hi:
  // the block's first and last token (tok_hi may lie past the sequence's end).
  Tile rows, heads = h, row_ok, tok0, tok_hi;
  if (pack) {
    Tile group = P(kGroup), r = arange(0, BM);
    Tile tokens = Tile(BM) / group;  // per block; BLOCK_M ≥ group (checked on the host)
    tok0 = pid_m * tokens;
    tok_hi = tok0 + (tokens - 1);
    rows = tok0 + r / group;
    heads = kv_h * group + r % group;
    row_ok = (rows < seqlen_q) & (r < tokens * group);
  } else {
    tok0 = pid_m * BM;
    tok_hi = tok0 + (BM - 1);
    rows = tok0 + arange(0, BM);
    row_ok = rows < seqlen_q;
  }
  Tile offs_n = arange(0, BN), dq = arange(0, PQK), dv = arange(0, PV);
  Tile q_mask = row_ok(_, None), kq_cols = Tile(), v_cols = Tile();
  if (DQK != PQK) kq_cols = (dq < DQK)(None, _);  // padded head dim: lanes past DIM_QK read 0
  if (DV != PV) v_cols = (dv < DV)(None, _);
  if (kq_cols.valid()) q_mask = q_mask & kq_cols;

  // A row's offset in q / out (its head's term per row with packing, else in the program's base) and lse.
  auto row_offsets = [&](int sb, int sh, int ss) {
    Tile base = b * stride(sb), per_row = (q_start_w + rows) * stride(ss);
    if (pack) per_row = per_row + wide(heads) * stride(sh);
    else base = base + h * stride(sh);
    return std::make_pair(base, per_row);
  };
  auto [q_base, q_rows] = row_offsets(kQb, kQh, kQs);
  Tile q = load(P(kQ) + q_base + q_rows(_, None) + dq(None, _), q_mask, 0.f);
  // Paged: K/V strides are (page, head, token) and each key block's rows come through the block table.
  Tile k_base = paged ? P(kK) + kv_h * stride(kKh)
                      : P(kK) + (b * stride(kKb) + kv_h * stride(kKh) + k_start_w * stride(kKs));
  Tile v_base = paged ? P(kV) + kv_h * stride(kVh)
                      : P(kV) + (b * stride(kVb) + kv_h * stride(kVh) + k_start_w * stride(kVs));
  Tile sks = stride(kKs), svs = stride(kVs);
  Tile block_table = paged ? P(kBlockTable) + b * P(kBtStride).to(DType::i32) : Tile();

  Tile l_i = zeros({BM}, DType::f32);
  Tile acc = zeros({BM, PV}, DType::f32);

  // Positions handed to the mods: clamped into the sequence so table lookups never leave it. Paged, the queries
  // are the sequence's last tokens: q_idx = seqlen_k − seqlen_q + token.
  Tile q_shift = paged ? seqlen_k - seqlen_q : Tile();
  auto position = [&](const Tile &tok) { return paged ? tok + q_shift : tok; };
  Tile q_idx = minimum(rows, maximum(seqlen_q - 1, 0));
  if (paged) q_idx = maximum(q_idx + q_shift, 0);
  q_idx = mod_position(q_idx, small)(_, None);
  Tile mod_h = pack ? heads(_, None) : h;
  auto kv_index = [&](const Tile &cols) { return mod_position(minimum(cols, maximum(seqlen_k - 1, 0)), small)(None, _); };
  BandTiles band;
  if (has_band) band = {P(kBandLeft), P(kBandRight), P(kBandBottomRight) * (seqlen_k - seqlen_q)};
  const bool any_mask = has_band || bool(mask.fn);

  // The built-in ALiBi's per-program scalars: the slope of head h and a = slope/scale (s stays in units of
  // the raw q·k, see below), clamped to ±2^100 (below) where slope/scale is huge or overflows (a tiny scale).
  // With GQA packing the head varies by row: the built-in ALiBi then runs as its function.
  const BuiltinScoreForm *form = pack ? nullptr : score_mod.builtin();
  // |a| ≤ 2^100 keeps the split form below finite: its parts a·C_r (|C_r| < 2^8 within a block) and
  // a·(q_idx − kv_idx − C_r) (< 2^24) stay under 2^124, where a clamp at FLT_MAX could make them +inf and
  // −inf and their sum NaN. Past 2^100 every unit of distance already costs more than any finite q·k
  // difference in bf16/f16 up to 2^100, so the softmax is the same one-hot on the nearest key.
  constexpr float kAlibiMaxFactor = 0x1p100f;
  Tile alibi_a;
  if (form && form->alibi_slopes.shared_state()) {
    Tile slope = load(form->alibi_slopes(form->alibi_loc) + h, {}, {}, form->alibi_loc).to(DType::f32);
    alibi_a = minimum(maximum(slope / P(kScale), -kAlibiMaxFactor), kAlibiMaxFactor);
  }
  // Where a key block lies wholly at or below every row's diagonal (kv_idx ≤ q_idx) or wholly at or above it,
  // q_idx − kv_idx has one sign over the block and ALiBi's −a·|q_idx − kv_idx| is linear in the positions.
  Tile q_first = position(tok0), q_last = position(minimum(tok_hi, seqlen_q - 1));  // a live program's q_idx range
  struct Side {
    Tile below, above;
  };
  auto diagonal_side = [&](const Tile &start_n) { return Side{start_n + (BN - 1) <= q_first, start_n >= q_last}; };
  // The fixed reference replaces the running max: p = exp2(score·log2e − R), logsumexp = R + log2 l (ScoreFrame).
  Tile bound_ref = fixed_ref ? P(kScoreRef) : Tile();

  // c: the factor from the scores s that mods returns to log2 units, taken inside the softmax's one fma per
  // score; `natural`: to natural units (the logsumexp's). Without a score_mod s is the raw q·k and c folds in the
  // softmax scale; the built-in ALiBi keeps s a positive multiple of the true score with the factor in c (see
  // mods); a user score_mod's output is the score itself (a scalar factor of it reaches the fma through the IR's
  // reassociate_scalar_factors). c > 0 (the scale is positive), so the row max of s is that of s·c.
  Tile natural = P(kScale);
  if (!form && score_mod) natural = Tile(1.f);
  const Tile c = natural * kLog2e;
  std::optional<OnlineSoftmax> online;
  // q·k and the built-in form are bounded; a user's score_mod is unless its traced range at this launch says it
  // may leave the ordinary frame (soft masks of −1e30, a value loaded from a table): then the exact frames.
  const auto range = frame == ScoreFrame::AnyFinite ? OnlineSoftmax::Range::AnyFinite : OnlineSoftmax::Range::Bounded;
  if (!fixed_ref) online.emplace(BM, c, natural, dt, range);

  enum class Masking { Never, Always, When };
  enum class Cols { Always, Never, WithMask };
  // The key block at start_n: its positions, whether each is inside the sequence, and the offsets of its rows
  // in K and V. Paged, a key's row is its page's (from the block table) plus its slot in the page: one lookup
  // per block when a page holds whole blocks, one per key otherwise (clamped into the sequence, so that no
  // block-table entry past its last page is read).
  struct Keys {
    Tile start, cols, col_ok, k_rows, v_rows;
  };
  auto keys = [&](const Tile &start_n) {
    Keys ks{start_n, start_n + offs_n, Tile(), Tile(), Tile()};
    ks.col_ok = ks.cols < seqlen_k;
    if (paged) {
      const int shift = std::countr_zero(unsigned(page_size));
      Tile page, slot;
      if (page_size >= BN) {
        page = load(block_table + (start_n >> shift));
        slot = (start_n & (page_size - 1)) + offs_n;
      } else {
        page = load(block_table + (minimum(ks.cols, seqlen_k - 1) >> shift));
        slot = ks.cols & (page_size - 1);
      }
      ks.k_rows = wide(page) * stride(kKb) + wide(slot) * sks;
      ks.v_rows = wide(page) * stride(kVb) + wide(slot) * svs;
    } else {
      Tile cols_w = wide(ks.cols);
      ks.k_rows = cols_w * sks;
      ks.v_rows = cols_w * svs;
    }
    return ks;
  };
  auto qk = [&](const Keys &ks) {
    Tile k_mask = ks.col_ok(_, None);
    if (kq_cols.valid()) k_mask = k_mask & kq_cols;
    Tile k = load(k_base + ks.k_rows(_, None) + dq(None, _), k_mask, 0.f);
    return dot(q, trans(k));  // [BM, BN] f32
  };
  auto load_v = [&](const Keys &ks) {
    Tile v_mask = ks.col_ok(_, None);
    if (v_cols.valid()) v_mask = v_mask & v_cols;
    return load(v_base + ks.v_rows(_, None) + dv(None, _), v_mask, 0.f);
  };
  // The mods and the mask applied to the raw q·k `s` of a block; returns the scores (in units of c).
  // Whether a key block crosses ALiBi's diagonal: tested inside mods, or known (the arms of block's if/else).
  enum class Crossing { Test, Yes, No };
  auto mods = [&](Tile s, const Keys &ks, Masking masking, const Tile &need_mask, Cols cols_check,
                  Crossing crossing) {
    const Tile &start_n = ks.start;
    Tile kv_idx = kv_index(ks.cols);
    if (form) {
      // The built-in mods in fewer operations per score, s staying a positive multiple of the true score so
      // that the softmax's max and fma take the factor in c. scale > 0 (validated), so max(s)·c = max(s·c).
      if (alibi_a.valid()) {
        // s − a·|d| with d = q_idx − kv_idx. Where d has one sign over the block it is s ∓ a·d, and
        // fma_index computes it as one fma with an immediate per score, the rest of a·d (one value per
        // thread and row) folded into the softmax's row max and exp2 offset (ops.h). A block crossing the
        // diagonal first adds 2a·min(d, 0), so that s − a·d then gives s − a·|d| there too.
        Tile d = (q_idx - start_n) - offs_n(None, _);
        Side side = diagonal_side(start_n);
        auto cross = [&] { s = fma(minimum(index_to_f32(d), 0.f), 2.f * alibi_a, s); };
        if (crossing == Crossing::Test) if_(!(side.below | side.above), cross);
        if (crossing == Crossing::Yes) cross();
        s = fma_index(d, where(side.above, alibi_a, -alibi_a), s);
      }
    } else if (score_mod) {
      s = traced_score_mod("flex attention", score_mod, s * P(kScale), b, mod_h, q_idx, kv_idx);
    }
    if (cols_check == Cols::Always) s = where(ks.col_ok(None, _), s, neg_inf);
    auto apply = [&] {
      Tile vis = visible(mask, has_band, band, b, mod_h, q_idx, kv_idx);
      if (cols_check == Cols::WithMask) vis = vis & ks.col_ok(None, _);
      s = where(vis, s, neg_inf);
    };
    if (masking == Masking::Always) apply();
    if (masking == Masking::When) if_(need_mask, apply);
    return s;
  };
  // The online softmax's step over one block's scores: returns p and alpha, the factor that rescales acc and l_i
  // (block updates l_i after p·v's issue). With the fixed reference, which never moves, there is no alpha and l_i
  // is updated here.
  auto softmax = [&](const Tile &s) {
    if (fixed_ref) {
      Tile p = exp2(fma(s, c, -bound_ref));
      l_i = l_i + sum(p, 1);
      return std::make_pair(p, Tile());
    }
    OnlineSoftmax::Step st = online->step(s);
    return std::make_pair(st.p, st.alpha);  // the caller updates l_i (after p·v is issued: see block)
  };
  // One key block, FlashAttention-2's order: q·k, its softmax, then p·v into the rescaled acc. The mask is
  // applied never, always, or when the i1 scalar `need_mask` is true. Keys past the sequence's end are masked
  // always (Cols::Always), never (a block wholly inside: Cols::Never), or together with the mask
  // (Cols::WithMask: need_mask must then also cover blocks crossing the end).
  auto block = [&](const Tile &start_n, Masking masking, const Tile &need_mask, Cols cols_check) {
    Keys ks = keys(start_n);
    Tile p, alpha;
    if (alibi_a.valid()) {
      // ALiBi: one if/else on whether the block crosses the diagonal, around the mods and the softmax, so each
      // arm is straight-line code from q·k's result on. An if inside the mods alone kept ptxas from moving
      // work across it and cost ~1% more at seqlen 1024 on the H200.
      Tile s = qk(ks);
      p = s;  // placeholders with the arms' types, reassigned in both
      alpha = l_i;
      auto arm = [&](Crossing crossing) {
        std::tie(p, alpha) = softmax(mods(s, ks, masking, need_mask, cols_check, crossing));
      };
      Side side = diagonal_side(start_n);
      if_(!(side.below | side.above), [&] { arm(Crossing::Yes); }, [&] { arm(Crossing::No); });
    } else {
      std::tie(p, alpha) = softmax(mods(qk(ks), ks, masking, need_mask, cols_check, Crossing::Test));
    }
    Tile v = load_v(ks);
    acc = dot(p.to(dt), v, alpha.valid() ? acc * alpha(_, None) : acc);
    // The row sum after p·v's issue: it is not needed by the wgmma, and ptxas keeps the order, so it runs in the
    // wgmma's shadow instead of between q·k's wait and p·v's issue (as the loop's SASS shows).
    if (alpha.valid()) l_i = l_i * alpha + sum(p, 1);
  };

  Tile block_live = tok0 < seqlen_q;  // programs past the sequence's end visit nothing
  // KV split: this program's share of [lo, hi), in whole steps (key blocks, or list entries).
  auto my_split = [&](const Tile &lo, const Tile &hi, int step) {
    if (!split) return std::make_pair(lo, hi);
    Tile steps = (maximum(hi - lo, 0) + (step - 1)) / step;
    Tile per = ((steps + P(kNumSplits) - 1) / P(kNumSplits)) * step;
    Tile s_lo = lo + split_id * per;
    return std::make_pair(s_lo, minimum(hi, s_lo + per));
  };
  if (use_block_mask) {
    Tile bh_q = b * P(kBmStrideB) + h * P(kBmStrideH) + pid_m;  // strides 0: lists shared by batches / heads
    Tile count = where(block_live, load(P(kKvCounts) + bh_q), 0);
    Tile list = P(kKvBlocks) + bh_q.to(DType::i64) * P(kNumKBlocks);
    auto [i_lo, i_hi] = my_split(Tile(0), count, 1);
    for_range(i_lo, i_hi, 1, [&](I32 i) {
      Tile code = load(list + i);
      Tile start_n = (code >> 1) * BN;
      if (!any_mask) {
        block(start_n, Masking::Never, {}, Cols::Always);
        return;
      }
      // As on the band's path: the mask and the sequence's end are tested together, only on partial blocks and
      // the block crossing the end; a full block inside the sequence runs straight through.
      block(start_n, Masking::When, ((code & 1) == 0) | (start_n + BN > seqlen_k), Cols::WithMask);
    });
  } else if (has_band) {
    // In positions (paged: the queries' positions in the sequence, with band.off = 0).
    Tile first_q = position(tok0), last_q = position(minimum(tok_hi + 1, seqlen_q) - 1), hi_q = position(tok_hi);
    Tile lo = maximum(first_q + band.off - band.left, 0);
    Tile hi = where(block_live, minimum(seqlen_k, last_q + band.off + band.right + 1), 0);
    auto [s_lo, s_hi] = my_split((lo / BN) * BN, hi, BN);
    for_range(s_lo, s_hi, BN, [&](I32 start_n) {
      if (mask.fn) {
        block(start_n, Masking::Always, {}, Cols::WithMask);
      } else {
        // Blocks wholly inside the band for every row of this block, and inside the sequence, need no test.
        Tile inside = band_holds_tile(band, first_q, hi_q, start_n, BN) & (start_n + BN <= seqlen_k);
        block(start_n, Masking::When, !inside, Cols::WithMask);
      }
    });
  } else {
    // Whole key blocks first (no test of the sequence's end), then the last, partial one.
    Tile hi = where(block_live, seqlen_k, 0);
    Tile full_end = (hi / BN) * BN;
    Masking m = any_mask ? Masking::Always : Masking::Never;
    auto [s_lo, s_hi] = my_split(Tile(0), hi, BN);
    if (split) {
      for_range(s_lo, minimum(s_hi, full_end), BN, [&](I32 start_n) { block(start_n, m, {}, Cols::Never); });
      for_range(maximum(s_lo, full_end), s_hi, BN, [&](I32 start_n) { block(start_n, m, {}, Cols::Always); });
    } else {
      for_range(0, full_end, BN, [&](I32 start_n) { block(start_n, m, {}, Cols::Never); });
      for_range(full_end, hi, BN, [&](I32 start_n) { block(start_n, m, {}, Cols::Always); });
    }
  }

  if (paged) {
    // A sequence shorter than its queries (its length must count them) puts the first ones before position
    // 0: they precede every key and see none (their mods were given position 0 to keep lookups in range).
    Tile before_start = (rows + q_shift) < 0;
    l_i = where(before_start, 0.f, l_i);
    acc = where(before_start(_, None), 0.f, acc);
  }
  Tile l_safe = where(l_i == 0.f, 1.f, l_i);
  Tile out = acc * (1.f / l_safe)(_, None);  // one division per row (see attention_fwd.cpp)
  Tile o_mask = row_ok(_, None);
  if (v_cols.valid()) o_mask = o_mask & v_cols;
  auto [o_base, o_rows] = row_offsets(kOb, kOh, kOs);
  Tile lse = fixed_ref ? where(l_i == 0.f, neg_inf, (bound_ref + log2(l_safe)) * kLn2) : online->lse(l_i);
  Tile lse_base = b * stride(kLb), lse_rows = (q_start_w + rows) * stride(kLs);
  if (pack) lse_rows = lse_rows + wide(heads) * stride(kLh);
  else lse_base = lse_base + h * stride(kLh);
  if (split) {
    // The split's partial result in f32, normalized by its own l (the combine kernel weighs it by its lse).
    Tile at = wide(split_id);
    store(P(kOPart) + (at * stride(kPartStrideO) + o_base) + o_rows(_, None) + dv(None, _), out, o_mask);
    store(P(kLsePart) + (at * stride(kPartStrideL) + lse_base) + lse_rows, lse, row_ok);
  } else {
    store(P(kO) + o_base + o_rows(_, None) + dv(None, _), out.to(dt), o_mask);
    store(P(kLse) + lse_base + lse_rows, lse, row_ok);
  }
}

}  // namespace

namespace {
// Key: dtype, the score_mod's function and built-in form (two mods may share a function and differ in form,
// ScoreMod::with_builtin), the mask's function.
using FlexKernelKey = std::tuple<DType, const void *, const void *, const void *>;
KernelLru<FlexKernelKey> &flex_kernels() {
  static KernelLru<FlexKernelKey> kernels(kMaxCachedModKernels);
  return kernels;
}
}  // namespace

size_t flex_kernels_cached() { return flex_kernels().size(); }

std::shared_ptr<KernelBase> flex_kernel(DType dt, const ScoreMod &score_mod, const Mask &mask) {
  return flex_kernels().get(FlexKernelKey{dt, score_mod.identity(), score_mod.builtin(), mask.fn.identity()}, [&] {
    ParamTable t = flex_params(dt);
    // The trace function keeps copies of the mods, so their identities stay unique while cached.
    return std::make_shared<KernelBase>(
        "flex_attention_fwd", std::move(t.decls), std::move(t.names),
        [dt, score_mod, mask](std::span<const detail::ArgValue> a) { trace_flex(dt, score_mod, mask, a); });
  });
}

}  // namespace tilejit::attention::flex
