// A float64 reference for the flex attention backward (dense and varlen layouts) and a harness that runs flex_forward
// then flex_backward on fresh random inputs and compares dq, dk, dv. Shared by the CPU (interpreter) and GPU
// tests.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "flex_reference.h"
#include "kernel_test_util.h"
#include "tilejit/flex_attention.h"

namespace tilejit::testing {

/// Relative Frobenius bounds of the gradients per dtype: the forward's (tolerance(dt)). The backward rounds P
/// and dS to the dtype for its tensor-core products and computes D from the forward's rounded output, as the
/// forward rounds P: the same order of error.
inline double backward_tolerance(DType dt) { return tolerance(dt); }

struct BackwardResult {
  std::vector<float> dq, dk, dv;
  std::vector<double> ref_dq, ref_dk, ref_dv;
  std::vector<double> mag_dq, mag_dk;  ///< the reference's sums over its terms' magnitudes (RefGradMagnitudes)
  int empty_rows = 0;
};

/// Called by the reference with each visible score's dZ = P ∘ (dP − D), the gradient of the mod's output: a
/// test accumulates the gradients it expects for a learnable capture from it.
using OnScoreGrad = std::function<void(int b, int h, int i, int j, double dz)>;

/// Runs `opt` on `be`: flex_forward for out and lse (untuned), then flex_backward; the reference computes
/// everything in float64 from the same rounded inputs (the mod's derivative by central differences of ref.score).
inline BackwardResult run_backward_case(Backend be, const FlexCase &c, attention::FlexOptions opt, const RefMods &ref,
                                        const OnScoreGrad &on_dz = {}) {
  CaseLayout lay(c);
  const attention::FlexShape &s = lay.s;
  const int B = s.batch, Hq = s.heads_q, Hkv = s.heads_kv ? s.heads_kv : s.heads_q;
  const int Dq = s.head_dim_qk, Dv = s.head_dim_v ? s.head_dim_v : s.head_dim_qk, group = Hq / Hkv;
  const size_t rows_q = lay.rows(false), rows_k = lay.rows(true);
  const size_t nq = rows_q * Hq * Dq, nk = rows_k * Hkv * Dq, nv = rows_k * Hkv * Dv, no = rows_q * Hq * Dv;
  const size_t nl = rows_q * Hq;
  auto q = random_values(nq, c.dtype), k = random_values(nk, c.dtype), v = random_values(nv, c.dtype);
  auto dout = random_values(no, c.dtype);
  auto bq = upload_as(q, c.dtype, be), bk = upload_as(k, c.dtype, be), bv = upload_as(v, c.dtype, be);
  auto bdo = upload_as(dout, c.dtype, be);
  Buffer out(std::max<size_t>(no, 1) * 2, be), lse(std::max<size_t>(nl, 1) * 4, be);
  Buffer dq(std::max<size_t>(nq, 1) * 2, be), dk(std::max<size_t>(nk, 1) * 2, be), dv(std::max<size_t>(nv, 1) * 2, be);
  for (Buffer *b : {&out, &lse, &dq, &dk, &dv}) b->fill_bytes(0xff);  // poison: NaN in every dtype
  apply_case(opt, c, lay, be);
  attention::FlexOptions forward = opt;
  forward.autotune = false;  // a tuned call tunes the backward under test only
  attention::flex_forward(bq, bk, bv, out, lse, s, forward);
  attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dk, dv, s, opt);

  BackwardResult r;
  r.dq = download_as_float(dq, nq, c.dtype);
  r.dk = download_as_float(dk, nk, c.dtype);
  r.dv = download_as_float(dv, nv, c.dtype);
  r.ref_dq.assign(nq, 0.0);
  r.ref_dk.assign(nk, 0.0);
  r.ref_dv.assign(nv, 0.0);
  r.mag_dq.assign(nq, 0.0);
  r.mag_dk.assign(nk, 0.0);
  const double scale = c.softmax_scale > 0 ? c.softmax_scale : 1.0 / std::sqrt(double(Dq));
  for (int b = 0; b < B; ++b) {
    const int sq = lay.seqlen(b, false), sk = lay.seqlen(b, true);
    for (int h = 0; h < Hq; ++h) {
      const int kh = h / group;
      // The reference writes contiguous rows; they are added into the tensors' layout after.
      std::vector<double> gq(size_t(sq) * Dq, 0.0), gk(size_t(sk) * Dq, 0.0), gv(size_t(sk) * Dv, 0.0);
      std::vector<double> mq(gq.size(), 0.0), mk(gk.size(), 0.0);
      r.empty_rows += tools::reference_head_backward(
          ref, b, h, sq, sk, Dq, Dv, scale, {q.data() + lay.row0(b, h, Hq, Dq, false), lay.row_stride(Hq, Dq)},
          {k.data() + lay.row0(b, kh, Hkv, Dq, true), lay.row_stride(Hkv, Dq)},
          {v.data() + lay.row0(b, kh, Hkv, Dv, true), lay.row_stride(Hkv, Dv)},
          {dout.data() + lay.row0(b, h, Hq, Dv, false), lay.row_stride(Hq, Dv)}, gq.data(), gk.data(), gv.data(),
          on_dz ? std::function<void(int, int, double)>([&, b, h](int i, int j, double dz) { on_dz(b, h, i, j, dz); })
                : std::function<void(int, int, double)>(),
          {mq.data(), mk.data()});
      auto add_rows = [](std::vector<double> &dst, size_t at, int64_t stride, const std::vector<double> &src, int rows,
                         int d) {
        for (int i = 0; i < rows; ++i)
          for (int e = 0; e < d; ++e) dst[at + size_t(i * stride) + size_t(e)] += src[size_t(i) * d + e];
      };
      add_rows(r.ref_dq, lay.row0(b, h, Hq, Dq, false), lay.row_stride(Hq, Dq), gq, sq, Dq);
      add_rows(r.ref_dk, lay.row0(b, kh, Hkv, Dq, true), lay.row_stride(Hkv, Dq), gk, sk, Dq);
      add_rows(r.ref_dv, lay.row0(b, kh, Hkv, Dv, true), lay.row_stride(Hkv, Dv), gv, sk, Dv);
      add_rows(r.mag_dq, lay.row0(b, h, Hq, Dq, false), lay.row_stride(Hq, Dq), mq, sq, Dq);
      add_rows(r.mag_dk, lay.row0(b, kh, Hkv, Dq, true), lay.row_stride(Hkv, Dq), mk, sk, Dq);
    }
  }
  return r;
}

/// tools::gradient_error of got against ref (magnitudes: the reference's term magnitudes, or empty).
inline double gradient_error(const std::vector<float> &got, const std::vector<double> &ref,
                             const std::vector<double> &magnitudes, double tol) {
  double e = 0, r = 0, m = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    e += (got[i] - ref[i]) * (got[i] - ref[i]);
    r += ref[i] * ref[i];
    if (!magnitudes.empty()) m += magnitudes[i] * magnitudes[i];
  }
  return tools::gradient_error(e, r, m, tol);
}

/// dq, dk, dv within backward_tolerance(dt) (gradient_error) and finite everywhere.
inline void require_backward_matches(const BackwardResult &r, DType dt) {
  const std::vector<double> none;  // dv = Pᵀ·dO has no cancelling terms
  const struct {
    const char *name;
    const std::vector<float> &got;
    const std::vector<double> &ref, &magnitudes;
  } grads[] = {{"dq", r.dq, r.ref_dq, r.mag_dq}, {"dk", r.dk, r.ref_dk, r.mag_dk}, {"dv", r.dv, r.ref_dv, none}};
  for (const auto &g : grads) {
    for (size_t i = 0; i < g.got.size(); ++i)
      if (!std::isfinite(g.got[i])) FAIL(g.name << " is not finite at " << i << " (reference " << g.ref[i] << ")");
    const double err = gradient_error(g.got, g.ref, g.magnitudes, backward_tolerance(dt));
    INFO(g.name << " relative error " << err << " (bound " << backward_tolerance(dt) << "), rows seeing no key "
                << r.empty_rows);
    CHECK(err <= backward_tolerance(dt));
  }
}

}  // namespace tilejit::testing
