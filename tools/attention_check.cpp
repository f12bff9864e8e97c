#include "tools/attention_check.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tilejit::tools {

RowRef reference_row(const std::vector<float> &q, const std::vector<float> &k, const std::vector<float> &v,
                     int heads, int seqlen_q, int seqlen_k, int head_dim, double scale, bool causal, int b,
                     int h, int i) {
  const float *qr = &q[((size_t(b) * heads + h) * seqlen_q + i) * head_dim];
  const float *kb = &k[(size_t(b) * heads + h) * size_t(seqlen_k) * head_dim];
  const float *vb = &v[(size_t(b) * heads + h) * size_t(seqlen_k) * head_dim];
  int visible = causal ? std::min(seqlen_k, i + 1) : seqlen_k;
  std::vector<double> s(visible);
  double mx = -std::numeric_limits<double>::infinity();
  for (int j = 0; j < visible; ++j) {
    double dot = 0;
    for (int d = 0; d < head_dim; ++d) dot += double(qr[d]) * kb[size_t(j) * head_dim + d];
    s[j] = dot * scale;
    mx = std::max(mx, s[j]);
  }
  RowRef r;
  r.out.assign(head_dim, 0.0);
  if (visible == 0) {
    r.lse = -std::numeric_limits<double>::infinity();
    return r;
  }
  double sum = 0;
  for (int j = 0; j < visible; ++j) {
    double p = std::exp(s[j] - mx);
    sum += p;
    for (int d = 0; d < head_dim; ++d) r.out[d] += p * vb[size_t(j) * head_dim + d];
  }
  for (auto &o : r.out) o /= sum;
  r.lse = mx + std::log(sum);
  return r;
}

int reference_head(const RefMods &mods, int b, int h, int sq, int sk, int q_pos0, int dq, int dv, double scale,
                   RefRows q, RefRows k, RefRows v, double *out, int64_t out_stride, double *lse, int64_t lse_stride) {
  int empty = 0;
  std::vector<double> p(size_t(std::max(sk, 1)));
  for (int i = 0; i < sq; ++i) {
    const int pos = q_pos0 + i;
    const float *qr = q.data + i * q.row_stride;
    double *o = out + i * out_stride;
    double mx = -std::numeric_limits<double>::infinity();
    if (pos < 0) {  // a query before the sequence's first position (a paged sequence shorter than its queries)
      ++empty;
      for (int d = 0; d < dv; ++d) o[d] = 0.0;
      lse[i * lse_stride] = mx;
      continue;
    }
    for (int j = 0; j < sk; ++j) {
      const float *kr = k.data + j * k.row_stride;
      double dot = 0;
      for (int d = 0; d < dq; ++d) dot += double(qr[d]) * kr[d];
      double sc = dot * scale;
      if (mods.score) sc = mods.score(sc, b, h, pos, j);
      if (mods.visible && !mods.visible(b, h, pos, j, sq, sk)) sc = -std::numeric_limits<double>::infinity();
      p[size_t(j)] = sc;
      mx = std::max(mx, sc);
    }
    if (mx == -std::numeric_limits<double>::infinity()) {
      ++empty;
      for (int d = 0; d < dv; ++d) o[d] = 0.0;
      lse[i * lse_stride] = mx;
      continue;
    }
    double sum = 0;
    for (int j = 0; j < sk; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
    for (int d = 0; d < dv; ++d) o[d] = 0.0;
    for (int j = 0; j < sk; ++j) {
      if (p[size_t(j)] == 0.0) continue;
      const float *vr = v.data + j * v.row_stride;
      for (int d = 0; d < dv; ++d) o[d] += p[size_t(j)] * vr[d];
    }
    for (int d = 0; d < dv; ++d) o[d] /= sum;
    lse[i * lse_stride] = mx + std::log(sum);
  }
  return empty;
}

int reference_head_backward(const RefMods &mods, int b, int h, int sq, int sk, int dq_dim, int dv_dim, double scale,
                            RefRows q, RefRows k, RefRows v, RefRows dout, double *dq, double *dk, double *dv,
                            const std::function<void(int i, int j, double dz)> &on_dz, RefGradMagnitudes magnitudes) {
  auto score = [&](double x, int i, int j) { return mods.score ? mods.score(x, b, h, i, j) : x; };
  int empty = 0;
  std::vector<double> s(size_t(std::max(sk, 1))), p(size_t(std::max(sk, 1))), o(size_t(std::max(dv_dim, 1)));
  for (int i = 0; i < sq; ++i) {
    const float *qr = q.data + i * q.row_stride, *dor = dout.data + i * dout.row_stride;
    double mx = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < sk; ++j) {
      const float *kr = k.data + j * k.row_stride;
      double dot = 0;
      for (int d = 0; d < dq_dim; ++d) dot += double(qr[d]) * kr[d];
      s[size_t(j)] = dot * scale;
      const bool vis = !mods.visible || mods.visible(b, h, i, j, sq, sk);
      p[size_t(j)] = vis ? score(s[size_t(j)], i, j) : -std::numeric_limits<double>::infinity();
      mx = std::max(mx, p[size_t(j)]);
    }
    if (mx == -std::numeric_limits<double>::infinity()) {
      ++empty;
      continue;
    }
    double sum = 0;
    for (int j = 0; j < sk; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
    // O = P·V, D = dO·O, dP_j = dO·V_j, dZ = P ∘ (dP − D), dS = dZ · score'(S).
    std::fill(o.begin(), o.end(), 0.0);
    for (int j = 0; j < sk; ++j) {
      p[size_t(j)] /= sum;
      for (int d = 0; d < dv_dim; ++d) o[size_t(d)] += p[size_t(j)] * v.data[j * v.row_stride + d];
    }
    double D = 0;
    for (int d = 0; d < dv_dim; ++d) D += o[size_t(d)] * dor[d];
    for (int j = 0; j < sk; ++j) {
      const double pj = p[size_t(j)];
      if (pj == 0.0) continue;
      const float *kr = k.data + j * k.row_stride, *vr = v.data + j * v.row_stride;
      double dp = 0;
      for (int d = 0; d < dv_dim; ++d) dp += double(dor[d]) * vr[d];
      const double dz = pj * (dp - D);
      if (on_dz) on_dz(i, j, dz);
      const double x = s[size_t(j)], step = 1e-6 * std::max(1.0, std::fabs(x));
      const double dscore = (score(x + step, i, j) - score(x - step, i, j)) / (2 * step) * scale;
      const double ds = dz * dscore, ds_mag = pj * (std::fabs(dp) + std::fabs(D)) * std::fabs(dscore);
      for (int d = 0; d < dq_dim; ++d) {
        dq[size_t(i) * dq_dim + d] += ds * kr[d];
        dk[size_t(j) * dq_dim + d] += ds * qr[d];
        if (magnitudes.dq) magnitudes.dq[size_t(i) * dq_dim + d] += ds_mag * std::fabs(kr[d]);
        if (magnitudes.dk) magnitudes.dk[size_t(j) * dq_dim + d] += ds_mag * std::fabs(qr[d]);
      }
      for (int d = 0; d < dv_dim; ++d) dv[size_t(j) * dv_dim + d] += pj * dor[d];
    }
  }
  return empty;
}

double gradient_error(double err2, double ref2, double mag2, double tol) {
  return std::sqrt(err2) / std::max({std::sqrt(ref2), tol * std::sqrt(mag2), 1e-300});
}

}  // namespace tilejit::tools
