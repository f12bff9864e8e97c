// dot: a [M,K] × b [K,N] + acc [M,N] → [M,N] (a leading batch dimension is also accepted: [B,M,K] ...).
//
// Each output element starts from acc and adds the products a[m,k]·b[k,n] in increasing k, in f32.
// Operands are converted to f32 first (exact for f16/bf16/i8); with allow_tf32 (attrs.flag) f32 operands
// are rounded to tf32. Products of ≤ 12-bit significands are exact in f32, so `acc += a*b` equals the
// fused form; f32 × f32 products use fmaf (one rounding per step, as the GPU's FMA-based f32 dot).
#include <fmt/format.h>

#include <cmath>

#include "interp/frame.h"
#include "interp/numerics.h"

namespace tilejit::interp {
namespace {

std::vector<float> to_f32(const Tile &t, const ir::Type &type, bool tf32) {
  std::vector<float> v;
  if (stores_float(type)) {
    v.resize(t.f.size());
    for (size_t k = 0; k < v.size(); ++k) v[k] = tf32 ? round_to_tf32(float(t.f[k])) : float(t.f[k]);
  } else {
    v.resize(t.i.size());
    for (size_t k = 0; k < v.size(); ++k) v[k] = float(t.i[k]);
  }
  return v;
}

/// True when every product of two such operands is exact in f32 (significands of at most 12 bits).
bool narrow(DType t, bool tf32) {
  return t == DType::f16 || t == DType::bf16 || t == DType::i8 || t == DType::i1 || (t == DType::f32 && tf32);
}

template <bool kFused>
void matmul(const float *a, const float *b, float *c, int64_t m_, int64_t n_, int64_t k_) {
  // i-k-j order: every c[i][j] still receives its products in increasing k, and the inner loop is
  // contiguous in b and c.
  for (int64_t i = 0; i < m_; ++i) {
    float *crow = c + i * n_;
    for (int64_t k = 0; k < k_; ++k) {
      const float av = a[i * k_ + k];
      const float *brow = b + k * n_;
      if constexpr (kFused)
        for (int64_t j = 0; j < n_; ++j) crow[j] = std::fma(av, brow[j], crow[j]);
      else
        for (int64_t j = 0; j < n_; ++j) crow[j] += av * brow[j];
    }
  }
}

}  // namespace

void exec_dot(Frame &fr, const Instr &in) {
  const ir::Type &ta = fr.type(in.in[0]), &tb = fr.type(in.in[1]), &tc = fr.type(in.in[2]);
  const ir::Type &rt = fr.type(in.out[0]);
  const int r = ta.rank();
  const bool shapes_ok = (r == 2 || r == 3) && tb.rank() == r && tc.rank() == r && rt.shape == tc.shape &&
                         ta.shape[size_t(r - 1)] == tb.shape[size_t(r - 2)] &&
                         tc.shape[size_t(r - 2)] == ta.shape[size_t(r - 2)] &&
                         tc.shape[size_t(r - 1)] == tb.shape[size_t(r - 1)] && (r == 2 || (ta.shape[0] == tb.shape[0] && ta.shape[0] == tc.shape[0]));
  if (!shapes_ok)
    fr.fail(in, fmt::format("operand shapes {} × {} + {} → {} do not form a matrix product", ta.str(), tb.str(),
                            tc.str(), rt.str()));
  const bool tf32 = in.op->attrs.flag;
  const int64_t batch = r == 3 ? ta.shape[0] : 1;
  const int64_t m = ta.shape[size_t(r - 2)], k = ta.shape[size_t(r - 1)], n = tb.shape[size_t(r - 1)];
  const std::vector<float> a = to_f32(fr.at(in.in[0]), ta, tf32), b = to_f32(fr.at(in.in[1]), tb, tf32);
  std::vector<float> c = to_f32(fr.at(in.in[2]), tc, false);
  const bool fused = !(narrow(ta.dtype(), tf32) && narrow(tb.dtype(), tf32));
  for (int64_t s = 0; s < batch; ++s) {
    const float *pa = a.data() + s * m * k, *pb = b.data() + s * k * n;
    float *pc = c.data() + s * m * n;
    if (fused) matmul<true>(pa, pb, pc, m, n, k);
    else matmul<false>(pa, pb, pc, m, n, k);
  }
  auto &out = fr.at(in.out[0]).f;
  out.resize(c.size());
  for (size_t i = 0; i < c.size(); ++i) out[i] = round_float(c[i], rt.dtype());
}

}  // namespace tilejit::interp
