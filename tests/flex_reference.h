// A float64 reference for flex attention (score_mod / mask evaluated in double) and a harness that runs
// flex_forward on fresh random inputs and compares. Shared by the CPU (interpreter) and GPU flex tests.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "kernel_test_util.h"
#include "tilejit/flex_attention.h"
#include "tilejit/error.h"
#include "tilejit/flex_variants.h"
#include "tools/attention_check.h"

namespace tilejit::testing {

/// Host versions of the mods (shared with the CLI's checks, tools/attention_check.h).
using RefMods = tools::RefMods;

inline bool ref_band(const attention::Band &band, int q, int kv, int sq, int sk) {
  int64_t diag = q + (band.align == attention::Align::BottomRight ? sk - sq : 0);
  if (band.left >= 0 && kv < diag - band.left) return false;
  if (band.right >= 0 && kv > diag + band.right) return false;
  return true;
}

struct FlexCase {
  attention::FlexShape shape;
  std::vector<int> seqlens_q, seqlens_k;  // non-empty: varlen (shape.batch = size)
  DType dtype = DType::bf16;
  int block_m = 16, block_n = 16;
  float softmax_scale = 0.f;
  attention::BlockMaskMode block_mask_mode = attention::BlockMaskMode::Auto;
  bool exact_qk = false;  // q and k from quarter_values (kernel_test_util.h)
  /// Dense tensors token-major, [batch, seqlen, heads, d] (BSHD), handed to the kernels as strides: a sequence
  /// stride of heads·d instead of d.
  bool token_major = false;
};

struct FlexResult {
  std::vector<float> out, lse;
  std::vector<double> ref_out, ref_lse;
  int empty_rows = 0;
};

/// A case's batch layout: dense [batch, heads, seqlen, d] (or [batch, seqlen, heads, d] with token_major), or
/// varlen (c.seqlens_q given) with every sequence's tokens packed [total, heads, d] and the shape's lengths the
/// longest sequence's.
struct CaseLayout {
  attention::FlexShape s;
  bool varlen = false, token_major = false;
  std::vector<int> cu_q{0}, cu_k{0};
  Buffer cu_q_buf, cu_k_buf;

  explicit CaseLayout(const FlexCase &c)
      : s(c.shape), varlen(!c.seqlens_q.empty()), token_major(c.token_major && c.seqlens_q.empty()) {
    if (!varlen) return;
    s.batch = int(c.seqlens_q.size());
    s.seqlen_q = s.seqlen_k = 0;
    for (size_t i = 0; i < c.seqlens_q.size(); ++i) {
      cu_q.push_back(cu_q.back() + c.seqlens_q[i]);
      cu_k.push_back(cu_k.back() + c.seqlens_k[i]);
      s.seqlen_q = std::max(s.seqlen_q, c.seqlens_q[i]);
      s.seqlen_k = std::max(s.seqlen_k, c.seqlens_k[i]);
    }
    s.total_q = cu_q.back();
    s.total_k = cu_k.back();
  }
  /// Sequence b's query (keys false) or key (keys true) count.
  int seqlen(int b, bool keys) const {
    return varlen ? (keys ? cu_k : cu_q)[size_t(b) + 1] - (keys ? cu_k : cu_q)[size_t(b)]
                  : (keys ? s.seqlen_k : s.seqlen_q);
  }
  /// Token rows of the query- or key-side tensors.
  size_t rows(bool keys) const {
    return varlen ? size_t(keys ? s.total_k : s.total_q) : size_t(s.batch) * (keys ? s.seqlen_k : s.seqlen_q);
  }
  /// Element offset of sequence b's first row of head h in a tensor of `heads` heads of d elements.
  size_t row0(int b, int h, int heads, int d, bool keys) const {
    const size_t len = size_t(keys ? s.seqlen_k : s.seqlen_q);
    if (varlen) return (size_t((keys ? cu_k : cu_q)[size_t(b)]) * heads + h) * d;
    return token_major ? (size_t(b) * len * heads + h) * d : (size_t(b) * heads + h) * len * d;
  }
  /// Elements between consecutive rows of one head.
  int64_t row_stride(int heads, int d) const { return varlen || token_major ? int64_t(heads) * d : int64_t(d); }
  /// Varlen: uploads the offsets to `be` and points opt at them; token-major: sets the tensors' strides.
  void bind(attention::FlexOptions &opt, Backend be) {
    if (token_major) {
      const int hq = s.heads_q, hkv = s.heads_kv ? s.heads_kv : s.heads_q;
      const int dq = s.head_dim_qk, dv = s.head_dim_v ? s.head_dim_v : s.head_dim_qk;
      auto bshd = [](int64_t len, int64_t heads, int64_t d) { return attention::Strides{len * heads * d, d, heads * d, 1}; };
      opt.q_strides = bshd(s.seqlen_q, hq, dq);
      opt.k_strides = bshd(s.seqlen_k, hkv, dq);
      opt.v_strides = bshd(s.seqlen_k, hkv, dv);
      opt.o_strides = bshd(s.seqlen_q, hq, dv);
    }
    if (!varlen) return;
    cu_q_buf = Buffer(cu_q.size() * 4, be);
    cu_k_buf = Buffer(cu_k.size() * 4, be);
    cu_q_buf.upload(cu_q);
    cu_k_buf.upload(cu_k);
    opt.cu_seqlens_q = {cu_q_buf.address(), cu_q_buf.bytes()};
    opt.cu_seqlens_k = {cu_k_buf.address(), cu_k_buf.bytes()};
  }
};

/// The case's options on top of `opt` (its mods): dtype, block sizes, scale and block-mask mode, the backend,
/// and (varlen) the offsets, uploaded by lay.
inline void apply_case(attention::FlexOptions &opt, const FlexCase &c, CaseLayout &lay, Backend be) {
  lay.bind(opt, be);
  opt.dtype = c.dtype;
  opt.block_m = c.block_m;
  opt.block_n = c.block_n;
  opt.backend = be;
  opt.softmax_scale = c.softmax_scale;
  opt.block_mask_mode = c.block_mask_mode;
}

/// Runs `opt` (score_mod/mask already set) on `be` with random inputs and the float64 reference.
inline FlexResult run_flex_case(Backend be, const FlexCase &c, attention::FlexOptions opt, const RefMods &ref) {
  CaseLayout lay(c);
  const attention::FlexShape &s = lay.s;
  const bool varlen = lay.varlen;
  const std::vector<int> &cu_q = lay.cu_q;
  const int B = s.batch, Hq = s.heads_q, Hkv = s.heads_kv ? s.heads_kv : s.heads_q;
  const int Dq = s.head_dim_qk, Dv = s.head_dim_v ? s.head_dim_v : s.head_dim_qk;
  auto l_index = [&](int b, int h, int i) -> size_t {
    return varlen ? size_t(h) * s.total_q + cu_q[b] + i : (size_t(b) * Hq + h) * s.seqlen_q + i;
  };
  const size_t rows_q = lay.rows(false), rows_k = lay.rows(true);
  size_t nq = rows_q * Hq * Dq, nk = rows_k * Hkv * Dq, nv = rows_k * Hkv * Dv, no = rows_q * Hq * Dv;
  size_t nl = rows_q * Hq;
  auto q = c.exact_qk ? quarter_values(nq) : random_values(nq, c.dtype);
  auto k = c.exact_qk ? quarter_values(nk) : random_values(nk, c.dtype), v = random_values(nv, c.dtype);
  auto bq = upload_as(q, c.dtype, be), bk = upload_as(k, c.dtype, be), bv = upload_as(v, c.dtype, be);
  Buffer out(std::max<size_t>(no, 1) * 2, be), lse(std::max<size_t>(nl, 1) * 4, be);
  out.fill_bytes(0xff);
  lse.fill_bytes(0xff);
  apply_case(opt, c, lay, be);
  attention::flex_forward(bq, bk, bv, out, lse, s, opt);

  FlexResult r;
  r.out = download_as_float(out, no, c.dtype);
  r.lse = lse.download_as<float>(nl);
  r.ref_out.assign(no, 0.0);
  r.ref_lse.assign(nl, -INFINITY);
  double scale = c.softmax_scale > 0 ? c.softmax_scale : 1.0 / std::sqrt(double(Dq));
  for (int b = 0; b < B; ++b) {
    const int sq = lay.seqlen(b, false), sk = lay.seqlen(b, true);
    if (sq == 0) continue;
    for (int h = 0; h < Hq; ++h) {
      int kh = h / (Hq / Hkv);
      tools::RefRows qr{q.data() + lay.row0(b, h, Hq, Dq, false), lay.row_stride(Hq, Dq)};
      tools::RefRows kr{k.data() + lay.row0(b, kh, Hkv, Dq, true), lay.row_stride(Hkv, Dq)};
      tools::RefRows vr{v.data() + lay.row0(b, kh, Hkv, Dv, true), lay.row_stride(Hkv, Dv)};
      r.empty_rows += tools::reference_head(ref, b, h, sq, sk, 0, Dq, Dv, scale, qr, kr, vr,
                                            r.ref_out.data() + lay.row0(b, h, Hq, Dv, false), lay.row_stride(Hq, Dv),
                                            r.ref_lse.data() + l_index(b, h, 0), 1);
    }
  }
  return r;
}

/// Output within the dtype's tolerance (relative Frobenius), lse within 1e-3·max(1, |lse|) per row, and
/// rows that see no key exactly 0 with lse −inf.
inline void require_matches(const FlexResult &r, DType dt) {
  double err = rel_error(r.out, r.ref_out);
  INFO("output relative error " << err << ", empty rows " << r.empty_rows);
  REQUIRE(err <= tolerance(dt));
  for (size_t i = 0; i < r.lse.size(); ++i) {
    INFO("lse row " << i << ": got " << r.lse[i] << ", reference " << r.ref_lse[i]);
    if (std::isinf(r.ref_lse[i])) {
      REQUIRE((std::isinf(r.lse[i]) && r.lse[i] < 0));
    } else {
      REQUIRE(std::abs(r.lse[i] - r.ref_lse[i]) <= 1e-3 * std::max(1.0, std::abs(r.ref_lse[i])));
    }
  }
  for (size_t i = 0; i < r.out.size(); ++i)
    if (r.ref_out[i] == 0.0 && !std::isfinite(r.out[i])) FAIL("non-finite output at " << i);
}

}  // namespace tilejit::testing
