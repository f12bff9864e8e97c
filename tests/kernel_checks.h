// The kernel checks, shared by the CPU (interpreter) and GPU test binaries: each runs a built-in kernel on
// fresh random inputs with poisoned outputs and compares with a float64 reference.
#pragma once
#include <catch2/catch.hpp>

#include "kernel_test_util.h"
#include "tilejit/attention.h"
#include "tilejit/kernels.h"
#include "tools/attention_check.h"

namespace tilejit::testing {

inline void check_vector_add(Backend be, int64_t n, int num_warps = 4) {
  auto x = random_values(n, DType::f32), y = random_values(n, DType::f32);
  auto bx = upload_as(x, DType::f32, be), by = upload_as(y, DType::f32, be);
  Buffer out(n * 4, be);
  out.fill_bytes(0xff);
  kernels::vector_add(bx, by, out, n, LaunchConfig{.num_warps = num_warps, .backend = be});
  auto got = out.download_as<float>(n);
  for (int64_t i = 0; i < n; ++i) {
    INFO("element " << i << " of " << n);
    REQUIRE(got[i] == x[i] + y[i]);  // f32 add is exact to the same rounding on both sides
  }
}

inline void check_softmax(Backend be, int rows, int cols, DType dt) {
  auto x = random_values(size_t(rows) * cols, dt, -4.f, 4.f);
  auto bx = upload_as(x, dt, be);
  Buffer out(x.size() * dtype_bytes(dt), be);
  out.fill_bytes(0xff);
  kernels::softmax(bx, out, rows, cols, dt, LaunchConfig{.backend = be});
  auto got = download_as_float(out, x.size(), dt);
  double err = rel_error(got, ref_softmax(x, rows, cols));
  INFO("softmax " << rows << "x" << cols << " " << dtype_name(dt) << " rel error " << err);
  REQUIRE(err <= tolerance(dt));
}

inline void check_matmul(Backend be, int M, int N, int K, DType dt, kernels::MatmulBlocks bl = {}) {
  auto a = random_values(size_t(M) * K, dt), b = random_values(size_t(K) * N, dt);
  auto ba = upload_as(a, dt, be), bb = upload_as(b, dt, be);
  Buffer c(size_t(M) * N * dtype_bytes(dt), be);
  c.fill_bytes(0xff);
  kernels::matmul(ba, bb, c, M, N, K, dt, LaunchConfig{.backend = be}, bl);
  auto got = download_as_float(c, size_t(M) * N, dt);
  double err = rel_error(got, ref_matmul(a, b, M, N, K));
  INFO("matmul " << M << "x" << N << "x" << K << " " << dtype_name(dt) << " rel error " << err);
  REQUIRE(err <= tolerance(dt));
}

/// Full attention check: every output row against float64 (rel. Frobenius error) and lse (abs error, relative
/// beyond 100). softmax_scale 0: 1/sqrt(head_dim). exact_qk: q and k from quarter_values.
inline void check_attention(Backend be, attention::Shape s, bool causal, DType dt, int block_m = 64,
                            int block_n = 64, int head_rows_limit = 1 << 30, float softmax_scale = 0.f,
                            bool exact_qk = false) {
  size_t nq = size_t(s.batch) * s.heads * s.seqlen_q * s.head_dim;
  size_t nk = size_t(s.batch) * s.heads * s.seqlen_k * s.head_dim;
  size_t nl = size_t(s.batch) * s.heads * s.seqlen_q;
  auto q = exact_qk ? quarter_values(nq) : random_values(nq, dt);
  auto k = exact_qk ? quarter_values(nk) : random_values(nk, dt), v = random_values(nk, dt);
  auto bq = upload_as(q, dt, be), bk = upload_as(k, dt, be), bv = upload_as(v, dt, be);
  Buffer out(nq * 2, be), lse(nl * 4, be);
  out.fill_bytes(0xff);
  lse.fill_bytes(0xff);
  attention::Options opt;
  opt.causal = causal;
  opt.dtype = dt;
  opt.block_m = block_m;
  opt.block_n = block_n;
  opt.backend = be;
  opt.softmax_scale = softmax_scale;
  attention::forward(bq, bk, bv, out, lse, s, opt);
  auto got = download_as_float(out, nq, dt);
  auto got_lse = lse.download_as<float>(nl);
  std::vector<double> ref(nq);
  std::vector<float> got_rows;
  std::vector<double> ref_rows;
  double lse_err = 0;
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h)
      for (int i = 0; i < std::min(s.seqlen_q, head_rows_limit); ++i) {
        double scale = softmax_scale > 0 ? softmax_scale : 1.0 / std::sqrt(double(s.head_dim));
        auto r = tools::reference_row(q, k, v, s.heads, s.seqlen_q, s.seqlen_k, s.head_dim, scale, causal, b, h, i);
        size_t row = (size_t(b) * s.heads + h) * s.seqlen_q + i;
        for (int d = 0; d < s.head_dim; ++d) {
          got_rows.push_back(got[row * s.head_dim + d]);
          ref_rows.push_back(r.out[d]);
        }
        // lse is f32, computed from f32 scores: within 1e-3, or 1e-5 relative (the f32 q·k's rounding) where it
        // is beyond 100 (a huge softmax scale).
        lse_err = std::max(lse_err, std::abs(double(got_lse[row]) - r.lse) / std::max(1.0, 1e-2 * std::abs(r.lse)));
      }
  // Every element must have been written: the NaN poison fails rel_error, checked over all of out.
  for (size_t i = 0; i < nq; ++i) {
    INFO("output element " << i << " was not written or is not finite");
    REQUIRE(std::isfinite(got[i]));
  }
  double err = rel_error(got_rows, ref_rows);
  INFO("attention b" << s.batch << " h" << s.heads << " sq" << s.seqlen_q << " sk" << s.seqlen_k << " d"
                     << s.head_dim << (causal ? " causal " : " ") << dtype_name(dt) << ", softmax_scale "
                     << softmax_scale << ": rel error " << err << ", max lse error / max(1, |lse|/100) " << lse_err);
  REQUIRE(err <= tolerance(dt));
  REQUIRE(lse_err <= 1e-3);
}

}  // namespace tilejit::testing
