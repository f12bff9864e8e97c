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
};

struct FlexResult {
  std::vector<float> out, lse;
  std::vector<double> ref_out, ref_lse;
  int empty_rows = 0;
};

/// Runs `opt` (score_mod/mask already set) on `be` with random inputs and the float64 reference.
inline FlexResult run_flex_case(Backend be, const FlexCase &c, attention::FlexOptions opt, const RefMods &ref) {
  attention::FlexShape s = c.shape;
  const bool varlen = !c.seqlens_q.empty();
  std::vector<int> cu_q{0}, cu_k{0};
  if (varlen) {
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
  const int B = s.batch, Hq = s.heads_q, Hkv = s.heads_kv ? s.heads_kv : s.heads_q;
  const int Dq = s.head_dim_qk, Dv = s.head_dim_v ? s.head_dim_v : s.head_dim_qk;
  // Token rows per tensor: dense [B, H, S, D]; varlen [total, H, D].
  auto q_index = [&](int b, int h, int i, int d) -> size_t {
    return varlen ? (size_t(cu_q[b] + i) * Hq + h) * Dq + d : ((size_t(b) * Hq + h) * s.seqlen_q + i) * Dq + d;
  };
  auto k_index = [&](int b, int h, int j, int d, int D) -> size_t {
    return varlen ? (size_t(cu_k[b] + j) * Hkv + h) * D + d : ((size_t(b) * Hkv + h) * s.seqlen_k + j) * D + d;
  };
  auto o_index = [&](int b, int h, int i, int d) -> size_t {
    return varlen ? (size_t(cu_q[b] + i) * Hq + h) * Dv + d : ((size_t(b) * Hq + h) * s.seqlen_q + i) * Dv + d;
  };
  auto l_index = [&](int b, int h, int i) -> size_t {
    return varlen ? size_t(h) * s.total_q + cu_q[b] + i : (size_t(b) * Hq + h) * s.seqlen_q + i;
  };
  size_t rows_q = varlen ? size_t(s.total_q) : size_t(B) * s.seqlen_q;
  size_t rows_k = varlen ? size_t(s.total_k) : size_t(B) * s.seqlen_k;
  size_t nq = rows_q * Hq * Dq, nk = rows_k * Hkv * Dq, nv = rows_k * Hkv * Dv, no = rows_q * Hq * Dv;
  size_t nl = rows_q * Hq;
  auto q = c.exact_qk ? quarter_values(nq) : random_values(nq, c.dtype);
  auto k = c.exact_qk ? quarter_values(nk) : random_values(nk, c.dtype), v = random_values(nv, c.dtype);
  auto bq = upload_as(q, c.dtype, be), bk = upload_as(k, c.dtype, be), bv = upload_as(v, c.dtype, be);
  Buffer out(std::max<size_t>(no, 1) * 2, be), lse(std::max<size_t>(nl, 1) * 4, be);
  out.fill_bytes(0xff);
  lse.fill_bytes(0xff);
  Buffer bcq, bck;
  if (varlen) {
    bcq = Buffer(cu_q.size() * 4, be);
    bck = Buffer(cu_k.size() * 4, be);
    bcq.upload(cu_q);
    bck.upload(cu_k);
    opt.cu_seqlens_q = {bcq.address(), bcq.bytes()};
    opt.cu_seqlens_k = {bck.address(), bck.bytes()};
  }
  opt.dtype = c.dtype;
  opt.block_m = c.block_m;
  opt.block_n = c.block_n;
  opt.backend = be;
  opt.softmax_scale = c.softmax_scale;
  opt.block_mask_mode = c.block_mask_mode;
  attention::flex_forward(bq, bk, bv, out, lse, s, opt);

  FlexResult r;
  r.out = download_as_float(out, no, c.dtype);
  r.lse = lse.download_as<float>(nl);
  r.ref_out.assign(no, 0.0);
  r.ref_lse.assign(nl, -INFINITY);
  double scale = c.softmax_scale > 0 ? c.softmax_scale : 1.0 / std::sqrt(double(Dq));
  for (int b = 0; b < B; ++b) {
    int sq = varlen ? c.seqlens_q[b] : s.seqlen_q, sk = varlen ? c.seqlens_k[b] : s.seqlen_k;
    if (sq == 0) continue;
    // Row strides: dense [B, H, S, D] rows are D apart, varlen [total, H, D] rows H·D.
    for (int h = 0; h < Hq; ++h) {
      int kh = h / (Hq / Hkv);
      tools::RefRows qr{q.data() + q_index(b, h, 0, 0), varlen ? int64_t(Hq) * Dq : Dq};
      tools::RefRows kr{k.data() + k_index(b, kh, 0, 0, Dq), varlen ? int64_t(Hkv) * Dq : Dq};
      tools::RefRows vr{v.data() + k_index(b, kh, 0, 0, Dv), varlen ? int64_t(Hkv) * Dv : Dv};
      r.empty_rows += tools::reference_head(ref, b, h, sq, sk, 0, Dq, Dv, scale, qr, kr, vr,
                                            r.ref_out.data() + o_index(b, h, 0, 0), varlen ? int64_t(Hq) * Dv : Dv,
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
