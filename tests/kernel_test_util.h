// Helpers shared by the kernel tests (CPU interpreter and GPU): random inputs, float64 references,
// relative Frobenius error, and the tolerances per dtype.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tilejit/buffer.h"
#include "tilejit/numerics.h"
#include "tilejit/types.h"

namespace tilejit::testing {

inline std::mt19937_64 &rng() {
  static std::mt19937_64 r{std::random_device{}()};
  return r;
}

/// Relative Frobenius-norm error bounds per dtype of the inputs/outputs (f32 accumulation everywhere).
inline double tolerance(DType dt) {
  switch (dt) {
    case DType::f32: return 1e-5;
    case DType::f16: return 5e-3;
    default: return 1e-2;  // bf16
  }
}

/// n values uniform in [lo, hi), already rounded to dt (returned as float).
inline std::vector<float> random_values(size_t n, DType dt, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto &x : v) {
    x = d(rng());
    if (dt == DType::bf16) x = round_bf16(x);
    if (dt == DType::f16) x = round_f16(x);
  }
  return v;
}

/// n random multiples of 1/4 in [−1, 1]: exact in bf16 and f16, and so are their dot products in f32 (up to
/// 2^20 terms), whatever the order of summation. For checks whose result would flip on a rounding of q·k: with
/// a huge softmax scale the softmax is one-hot on a row's largest q·k (all its ties alike).
inline std::vector<float> quarter_values(size_t n) {
  std::uniform_int_distribution<int> d(-4, 4);
  std::vector<float> v(n);
  for (auto &x : v) x = float(d(rng())) * 0.25f;
  return v;
}

/// Uploads float values as dt (f32, f16 or bf16) into a new buffer on `where`.
inline Buffer upload_as(const std::vector<float> &v, DType dt, Backend where) {
  Buffer b(v.size() * dtype_bytes(dt), where);
  if (dt == DType::f32) {
    b.upload(v);
  } else {
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i) bits[i] = dt == DType::bf16 ? float_to_bf16(v[i]) : float_to_f16(v[i]);
    b.upload(bits);
  }
  return b;
}

/// Downloads n elements of dt as floats.
inline std::vector<float> download_as_float(const Buffer &b, size_t n, DType dt) {
  if (dt == DType::f32) return b.download_as<float>(n);
  auto bits = b.download_as<uint16_t>(n);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = dt == DType::bf16 ? bf16_to_float(bits[i]) : f16_to_float(bits[i]);
  return v;
}

/// ‖got − ref‖ / ‖ref‖; NaN or inf anywhere in `got` gives +inf (never passes).
inline double rel_error(const std::vector<float> &got, const std::vector<double> &ref) {
  double e = 0, r = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    e += (got[i] - ref[i]) * (got[i] - ref[i]);
    r += ref[i] * ref[i];
  }
  return std::sqrt(e / std::max(r, 1e-300));
}

inline std::vector<double> ref_softmax(const std::vector<float> &x, int rows, int cols) {
  std::vector<double> y(x.size());
  for (int r = 0; r < rows; ++r) {
    double mx = -INFINITY, s = 0;
    for (int c = 0; c < cols; ++c) mx = std::max(mx, double(x[size_t(r) * cols + c]));
    for (int c = 0; c < cols; ++c) s += std::exp(double(x[size_t(r) * cols + c]) - mx);
    for (int c = 0; c < cols; ++c) y[size_t(r) * cols + c] = std::exp(double(x[size_t(r) * cols + c]) - mx) / s;
  }
  return y;
}

inline std::vector<double> ref_matmul(const std::vector<float> &a, const std::vector<float> &b, int M, int N, int K) {
  std::vector<double> c(size_t(M) * N, 0.0);
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < K; ++k) {
      double av = a[size_t(m) * K + k];
      for (int n = 0; n < N; ++n) c[size_t(m) * N + n] += av * b[size_t(k) * N + n];
    }
  return c;
}

}  // namespace tilejit::testing
