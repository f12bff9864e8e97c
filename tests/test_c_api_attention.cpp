// The attention C ABI (tilejit_attention_forward) on the CPU interpreter (TILEJIT_INTERPRET=1: the raw
// pointers are host memory) against a float64 reference: causal and not, NULL lse, and the softmax_scale
// contract (<= 0 selects 1/sqrt(head_dim)).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "test_runtime_scoped_env.h"
#include "tilejit/c_api.h"
#include "tilejit/numerics.h"

using namespace tilejit;
using tilejit::testing::ScopedEnv;

namespace {

// out[b,h,i,:] and lse[b,h,i] in float64 from bf16 inputs laid out [b, h, s, d].
void reference(const std::vector<uint16_t> &q, const std::vector<uint16_t> &k, const std::vector<uint16_t> &v, int B,
               int H, int S, int D, bool causal, double scale, std::vector<double> &out, std::vector<double> &lse) {
  out.assign(size_t(B) * H * S * D, 0.0);
  lse.assign(size_t(B) * H * S, 0.0);
  auto at = [&](const std::vector<uint16_t> &t, int bh, int s, int d) {
    return double(bf16_to_float(t[(size_t(bh) * S + s) * D + d]));
  };
  for (int bh = 0; bh < B * H; ++bh)
    for (int i = 0; i < S; ++i) {
      std::vector<double> p(size_t(S), -std::numeric_limits<double>::infinity());
      double m = -std::numeric_limits<double>::infinity();
      for (int j = 0; j < (causal ? i + 1 : S); ++j) {
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += at(q, bh, i, d) * at(k, bh, j, d);
        p[size_t(j)] = dot * scale;
        m = std::max(m, p[size_t(j)]);
      }
      double l = 0;
      for (double &x : p) l += (x = std::exp(x - m));
      for (int d = 0; d < D; ++d) {
        double acc = 0;
        for (int j = 0; j < S; ++j) acc += p[size_t(j)] * at(v, bh, j, d);
        out[(size_t(bh) * S + i) * D + d] = acc / l;
      }
      lse[size_t(bh) * S + i] = m + std::log(l);
    }
}

}  // namespace

TEST_CASE("C ABI attention on the interpreter matches float64 (bf16 tolerance 1e-2 relative)", "[c_api]") {
  ScopedEnv interpret("TILEJIT_INTERPRET", "1");
  const int B = 2, H = 2, S = 37, D = 32;
  std::mt19937 rng(1234);
  std::normal_distribution<float> dist(0.f, 1.f);
  auto fresh = [&] {
    std::vector<uint16_t> t(size_t(B) * H * S * D);
    for (auto &x : t) x = float_to_bf16(dist(rng));
    return t;
  };
  std::vector<uint16_t> q = fresh(), k = fresh(), v = fresh();
  const int64_t strides[4] = {int64_t(H) * S * D, int64_t(S) * D, D, 1};
  for (bool causal : {false, true})
    for (float scale : {0.f, -1.f, 0.3f}) {
      INFO("causal " << causal << ", softmax_scale " << scale);
      std::vector<uint16_t> out(q.size(), 0xffff);  // poisoned: NaN in bf16
      std::vector<float> lse(size_t(B) * H * S, std::nanf(""));
      int rc = tilejit_attention_forward(q.data(), k.data(), v.data(), out.data(), lse.data(), TILEJIT_DTYPE_BF16, B,
                                         H, S, S, D, strides, strides, strides, strides, causal, scale, 0, nullptr);
      INFO(tilejit_last_error());
      REQUIRE(rc == TILEJIT_OK);
      REQUIRE(std::string(tilejit_last_error()).empty());
      std::vector<double> ro, rl;
      reference(q, k, v, B, H, S, D, causal, scale > 0 ? scale : 1.0 / std::sqrt(double(D)), ro, rl);
      double num = 0, den = 0, lse_err = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        double x = bf16_to_float(out[i]);
        REQUIRE(std::isfinite(x));
        num += (x - ro[i]) * (x - ro[i]);
        den += ro[i] * ro[i];
      }
      for (size_t i = 0; i < lse.size(); ++i) lse_err = std::max(lse_err, std::abs(double(lse[i]) - rl[i]));
      REQUIRE(std::sqrt(num / den) <= 1e-2);  // bf16 output
      REQUIRE(lse_err <= 1e-3);               // lse is f32
    }
  // A NULL lse is allowed (scratch on the interpreter's side), and bad input is an error code with text.
  std::vector<uint16_t> out(q.size());
  REQUIRE(tilejit_attention_forward(q.data(), k.data(), v.data(), out.data(), nullptr, TILEJIT_DTYPE_BF16, B, H, S, S,
                                    D, strides, strides, strides, strides, 0, 0.f, 0, nullptr) == TILEJIT_OK);
  REQUIRE(tilejit_attention_forward(q.data(), k.data(), v.data(), out.data(), nullptr, TILEJIT_DTYPE_BF16, B, H, S, S,
                                    D, strides, strides, strides, strides, 0, std::nanf(""), 0, nullptr) ==
          TILEJIT_ERROR_INVALID_ARGUMENT);
  REQUIRE_THAT(tilejit_last_error(), Catch::Contains("softmax_scale"));
  // A batch stride whose product with batch − 1 wraps int64 around is an error, not a small offset.
  if (B > 1) {
    const int64_t huge[4] = {std::numeric_limits<int64_t>::max(), strides[1], strides[2], 1};
    REQUIRE(tilejit_attention_forward(q.data(), k.data(), v.data(), out.data(), nullptr, TILEJIT_DTYPE_BF16, B, H, S, S,
                                      D, huge, strides, strides, strides, 0, 0.f, 0, nullptr) ==
            TILEJIT_ERROR_INVALID_ARGUMENT);
    REQUIRE_THAT(tilejit_last_error(), Catch::Contains("strides") && Catch::Contains("2^62"));
  }
}

TEST_CASE("C ABI matmul on the interpreter matches float64 (bf16 and f32)", "[c_api]") {
  ScopedEnv interpret("TILEJIT_INTERPRET", "1");
  const int M = 40, N = 24, K = 72;  // not multiples of the blocks
  std::mt19937 rng(99);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> af(size_t(M) * K), bf(size_t(K) * N);
  for (auto &x : af) x = round_bf16(dist(rng));
  for (auto &x : bf) x = round_bf16(dist(rng));
  std::vector<double> ref(size_t(M) * N, 0.0);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      for (int k = 0; k < K; ++k) ref[size_t(i) * N + j] += double(af[size_t(i) * K + k]) * bf[size_t(k) * N + j];
  auto rel_err = [&](auto value_of) {
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      double d = value_of(i) - ref[i];
      num += d * d;
      den += ref[i] * ref[i];
    }
    return std::sqrt(num / den);
  };
  {  // f32: exact f32 accumulation
    std::vector<float> c(size_t(M) * N, std::nanf(""));
    REQUIRE(tilejit_matmul(af.data(), bf.data(), c.data(), M, N, K, TILEJIT_DTYPE_F32, nullptr) == TILEJIT_OK);
    REQUIRE(rel_err([&](size_t i) { return double(c[i]); }) <= 1e-6);
  }
  {  // bf16 in and out
    std::vector<uint16_t> a(af.size()), b(bf.size()), c(size_t(M) * N, 0xffff);
    for (size_t i = 0; i < a.size(); ++i) a[i] = float_to_bf16(af[i]);
    for (size_t i = 0; i < b.size(); ++i) b[i] = float_to_bf16(bf[i]);
    REQUIRE(tilejit_matmul(a.data(), b.data(), c.data(), M, N, K, TILEJIT_DTYPE_BF16, nullptr) == TILEJIT_OK);
    REQUIRE(rel_err([&](size_t i) { return double(bf16_to_float(c[i])); }) <= 1e-2);
  }
}
