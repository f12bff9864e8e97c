// The C ABI's flex attention backward (tilejit_flex_attention_backward) on the CPU interpreter
// (TILEJIT_INTERPRET=1: raw pointers are host memory): built-in variants with GQA against the float64
// gradients; its argument errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "test_runtime_scoped_env.h"
#include "tilejit/c_api.h"
#include "tilejit/flex_variants.h"
#include "tilejit/numerics.h"
#include "tools/attention_check.h"

using namespace tilejit;
using namespace tilejit::testing;
using Catch::Matchers::Contains;

TEST_CASE("C ABI: tilejit_flex_attention_backward matches float64 gradients (interpreter)", "[c_api][flex][backward]") {
  ScopedEnv interpret("TILEJIT_INTERPRET", "1");
  const int B = 2, Hq = 4, Hkv = 2, Sq = 29, Sk = 41, D = 32, group = Hq / Hkv;
  const DType dt = DType::bf16;
  const size_t nq = size_t(B) * Hq * Sq * D, nk = size_t(B) * Hkv * Sk * D, nl = size_t(B) * Hq * Sq;
  auto q = random_values(nq, dt), k = random_values(nk, dt), v = random_values(nk, dt), dout = random_values(nq, dt);
  auto bits = [](const std::vector<float> &x) {
    std::vector<uint16_t> b(x.size());
    for (size_t i = 0; i < x.size(); ++i) b[i] = float_to_bf16(x[i]);
    return b;
  };
  auto hq = bits(q), hk = bits(k), hv = bits(v), hdo = bits(dout);
  std::vector<uint16_t> out(nq, 0xffff), dq(nq, 0xffff), dk(nk, 0xffff), dv(nk, 0xffff);
  std::vector<float> lse(nl, NAN);
  tilejit_flex_variant var;
  tilejit_flex_variant_init(&var);
  var.causal = 1;
  var.bottom_right = 1;
  var.alibi = 1;
  var.softcap = 5.f;
  var.block_m = var.block_n = 16;
  var.atomics = 1;
  const int64_t qs[4] = {int64_t(Hq) * Sq * D, int64_t(Sq) * D, D, 1}, ks[4] = {int64_t(Hkv) * Sk * D, int64_t(Sk) * D, D, 1};
  REQUIRE(tilejit_flex_attention_forward(hq.data(), hk.data(), hv.data(), out.data(), lse.data(), 0, B, Hq, Hkv, Sq, Sk,
                                         D, qs, ks, ks, qs, 0.f, &var, nullptr) == TILEJIT_OK);
  INFO(tilejit_last_error());
  // dq by atomics first, then the default (dq in its own pass) over it: both must match float64.
  REQUIRE(tilejit_flex_attention_backward(hq.data(), hk.data(), hv.data(), out.data(), lse.data(), hdo.data(), dq.data(),
                                          dk.data(), dv.data(), 0, B, Hq, Hkv, Sq, Sk, D, qs, ks, ks, qs, 0.f, &var,
                                          nullptr) == TILEJIT_OK);
  const std::vector<uint16_t> atomics_dq = dq;
  std::fill(dq.begin(), dq.end(), uint16_t(0xffff));
  var.atomics = 0;
  REQUIRE(tilejit_flex_attention_backward(hq.data(), hk.data(), hv.data(), out.data(), lse.data(), hdo.data(), dq.data(),
                                          dk.data(), dv.data(), 0, B, Hq, Hkv, Sq, Sk, D, qs, ks, ks, qs, 0.f, &var,
                                          nullptr) == TILEJIT_OK);
  // float64: score = softcap(alibi(s)) with the paper's slopes, bottom-right causal.
  const auto slopes = attention::alibi_slopes(Hq);
  std::vector<double> rq(nq, 0.0), rk(nk, 0.0), rv(nk, 0.0);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < Hq; ++h) {
      tools::RefMods ref{[&](double x, int, int hh, int i, int j) {
                           return 5.0 * std::tanh((x - slopes[size_t(hh)] * std::abs(i - j)) / 5.0);
                         },
                         [](int, int, int i, int j, int sq, int sk) { return j <= i + (sk - sq); }};
      const size_t qo = (size_t(b) * Hq + h) * Sq * D, ko = (size_t(b) * Hkv + h / group) * Sk * D;
      tools::reference_head_backward(ref, b, h, Sq, Sk, D, D, 1.0 / std::sqrt(double(D)), {q.data() + qo, D},
                                     {k.data() + ko, D}, {v.data() + ko, D}, {dout.data() + qo, D}, rq.data() + qo,
                                     rk.data() + ko, rv.data() + ko);
    }
  auto widen = [](const std::vector<uint16_t> &x) {
    std::vector<float> f(x.size());
    for (size_t i = 0; i < x.size(); ++i) f[i] = bf16_to_float(x[i]);
    return f;
  };
  CHECK(rel_error(widen(atomics_dq), rq) <= tolerance(dt));
  CHECK(rel_error(widen(dq), rq) <= tolerance(dt));
  CHECK(rel_error(widen(dk), rk) <= tolerance(dt));
  CHECK(rel_error(widen(dv), rv) <= tolerance(dt));

  // Errors: lse NULL, a null gradient, a bad dtype.
  CHECK(tilejit_flex_attention_backward(hq.data(), hk.data(), hv.data(), out.data(), nullptr, hdo.data(), dq.data(),
                                        dk.data(), dv.data(), 0, B, Hq, Hkv, Sq, Sk, D, qs, ks, ks, qs, 0.f, &var,
                                        nullptr) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tilejit_last_error()), Contains("lse is NULL"));
  CHECK(tilejit_flex_attention_backward(hq.data(), hk.data(), hv.data(), out.data(), lse.data(), hdo.data(), nullptr,
                                        dk.data(), dv.data(), 0, B, Hq, Hkv, Sq, Sk, D, qs, ks, ks, qs, 0.f, &var,
                                        nullptr) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tilejit_last_error()), Contains("dq"));
  CHECK(tilejit_flex_attention_backward(hq.data(), hk.data(), hv.data(), out.data(), lse.data(), hdo.data(), dq.data(),
                                        dk.data(), dv.data(), 7, B, Hq, Hkv, Sq, Sk, D, qs, ks, ks, qs, 0.f, &var,
                                        nullptr) == TILEJIT_ERROR_INVALID_ARGUMENT);
}
