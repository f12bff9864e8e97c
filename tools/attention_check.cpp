#include "tools/attention_check.h"

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

}  // namespace tilejit::tools
