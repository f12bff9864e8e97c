// specialize_uniform_sign, distribute_uniform_factor and fold_axis_terms: the shapes they give a loop over key
// blocks with a distance |q − kv| (in the IR), results bit for bit the written ones on the interpreter where the
// split is exact (wrapping positions included), and the distributed bias within its stated error.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ir/passes.h"
#include "test_dsl_helpers.h"
#include "text_matches.h"
#include "tilejit/kernel.h"
#include "tilejit/launch.h"
#include "tilejit/ops.h"

using namespace tilejit;
using namespace tilejit::dsl_testing;
using testing::count_matches;

namespace {

constexpr int kRows = 8, kCols = 16, kBlocks = 6;

/// For each of 8 rows at positions base + r and 6 blocks of 16 keys at positions 16·j + c: the row max over every
/// key of s − slope·|q − kv| (out[r]) and the number of keys with q − kv > 0 (out[8 + r]), the distance in i32
/// (wrapping as C++ unsigned arithmetic does) and converted to f32.
Tile alibi_like_body(Ptr<f32> s, Ptr<f32> out, I32 base, F32 slope) {
  Tile r = arange(0, kRows);
  Tile q = (base + r)(_, None);
  Tile best = full({kRows}, -INFINITY, DType::f32), ahead = zeros({kRows}, DType::f32);
  for_range(0, kBlocks * kCols, kCols, [&](I32 start) {
    Tile kv = (start + arange(0, kCols))(None, _);
    Tile x = load(s + (r * (kBlocks * kCols))(_, None) + kv);
    Tile d = q - kv;
    Tile score = x - slope * abs(d).to(DType::f32);
    best = maximum(best, max(score, 1));
    ahead = ahead + sum(where(d > 0, 1.f, 0.f), 1);
  });
  store(out + r, best);
  store(out + kRows + r, ahead);
  return best;
}

std::vector<float> run_alibi_like(int32_t base, float slope, const std::vector<float> &s, bool exact) {
  KernelOptions opts;
  opts.exact_floats = exact;
  auto k = Kernel(
      "alibi_like", [](Ptr<f32> s, Ptr<f32> out, I32 base, F32 slope) { alibi_like_body(s, out, base, slope); }, {}, opts);
  Buffer bs(s.size() * 4, Backend::Interpreter), out(2 * kRows * 4, Backend::Interpreter);
  bs.upload(s);
  out.fill_bytes(0xff);
  LaunchConfig cfg;
  cfg.backend = Backend::Interpreter;
  k.launch(Grid{1}, cfg, bs, out, base, slope);
  return out.download_as<float>(2 * kRows);
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

}  // namespace

TEST_CASE("specialize_uniform_sign: the sign-dependent work of a key block splits on whether its distance has one sign",
          "[ir][passes]") {
  auto fn = trace(
      [&] {
        Ptr<f32> s = param(0), out = param(1);
        I32 base = param(2);
        F32 slope = param(3);
        alibi_like_body(s, out, base, slope);
      },
      {P(DType::f32), P(DType::f32), S(DType::i32), S(DType::f32)});
  ir::optimize(*fn, ir::FloatRewrites::Exact);  // the split keeps every bit: it runs in Exact mode too
  const std::string ir = ir::print(*fn);
  INFO(ir);
  REQUIRE(count_matches(ir, R"(= if )") == 1);
  const std::string then_arm = ir.substr(ir.find("= if "), ir.find("} else {") - ir.find("= if "));
  const std::string else_arm = ir.substr(ir.find("} else {"));
  // Then: no abs or comparison per element (a sign per block), the abs kept in the else arm, marked.
  CHECK(count_matches(then_arm, R"(= abs [^\n]*tensor<8x16x)") == 0);
  CHECK(count_matches(then_arm, R"(= cmp [^\n]*: tensor<8x16xi1>)") == 0);
  CHECK(count_matches(else_arm, R"(= abs [^\n]*\{either_sign\} : tensor<8x16x)") == 1);
  // The base may be anything: the i32 rows may wrap, so the test asks their i64 bounds to lie in i32.
  CHECK(count_matches(ir, R"(= cmp [^\n]*\{pred = le\} : i1)") >= 1);
  CHECK_NOTHROW(ir::verify(*fn));
}

TEST_CASE("specialize_uniform_sign: results bit for bit the written ones, on one side, across and wrapping",
          "[ir][passes]") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-8.f, 8.f);
  std::vector<float> s(size_t(kRows) * kBlocks * kCols);
  for (float &x : s) x = d(rng);
  // Bases: rows below, across and above the keys (0..95), and rows whose positions wrap past INT32_MAX.
  for (int32_t base : {-40, 0, 37, 90, 500, INT32_MAX - 3}) {
    for (float slope : {0.375f, 1e-3f}) {
      INFO("base " << base << ", slope " << slope);
      for (bool exact : {true, false}) {
        std::vector<float> got = run_alibi_like(base, slope, s, exact);
        for (int r = 0; r < kRows; ++r) {
          float best = -INFINITY, ahead = 0;
          for (int kv = 0; kv < kBlocks * kCols; ++kv) {
            const int32_t dist = int32_t(uint32_t(base) + uint32_t(r) - uint32_t(kv));  // the kernel's wrapping i32
            const int32_t magnitude = dist < 0 ? int32_t(0u - uint32_t(dist)) : dist;  // i32's abs: INT32_MIN stays
            const float bias = slope * float(magnitude);
            best = std::max(best, s[size_t(r * kBlocks * kCols + kv)] - bias);
            ahead += dist > 0 ? 1.f : 0.f;
          }
          INFO("row " << r << (exact ? ", exact" : ", fast"));
          // Exact: every bit. Fast: the subtraction may become an fma (contract_fma), within an ulp of the score.
          if (exact) CHECK(same_bits(got[size_t(r)], best));
          else CHECK(std::fabs(got[size_t(r)] - best) <= 2e-7f * std::max(1.f, std::fabs(best)) * 64);
          CHECK(got[size_t(kRows + r)] == ahead);
        }
      }
    }
  }
}

TEST_CASE("distribute_uniform_factor and fold_axis_terms: a one-signed block's bias is a column term per score and "
          "a row term per row",
          "[ir][passes]") {
  auto fn = trace(
      [&] {
        Ptr<f32> s = param(0), out = param(1);
        I32 base = param(2);
        F32 slope = param(3);
        Tile r = arange(0, kRows);
        // Clamped positions below 2^24, as the flex kernels give mods: the distance converts exactly.
        Tile q = minimum(maximum(base + r, 0), (1 << 24) - 1)(_, None);
        Tile m = full({kRows}, -INFINITY, DType::f32), l = zeros({kRows}, DType::f32);
        for_range(0, kBlocks * kCols, kCols, [&](I32 start) {
          Tile kv = minimum(maximum(start + arange(0, kCols), 0), (1 << 24) - 1)(None, _);
          Tile x = load(s + (r * (kBlocks * kCols))(_, None) + kv);
          Tile score = x * 0.125f - slope * abs(q - kv).to(DType::f32);
          Tile m_new = maximum(m, max(score, 1));
          Tile p = exp2(fma(score, 1.4426950f, -m_new(_, None)));  // the softmax's one fma per score
          l = l * exp2(m - m_new) + sum(p, 1);
          m = m_new;
        });
        store(out + r, l);
        store(out + kRows + r, m);
      },
      {P(DType::f32), P(DType::f32), S(DType::i32), S(DType::f32)});
  ir::optimize(*fn);
  const std::string ir = ir::print(*fn);
  INFO(ir);
  REQUIRE(count_matches(ir, R"(= if )") == 1);
  const std::string then_arm = ir.substr(ir.find("= if "), ir.find("} else {") - ir.find("= if "));
  auto per_score = [&](const char *op) { return count_matches(then_arm, std::string("= ") + op + R"( [^\n]*: tensor<8x16xf32>)"); };
  // x·0.125 + slope·s·(kv − t) in one fma, the softmax's fma, exp2; the row term slope·s·(q − t) after the max.
  CHECK(per_score("fma") == 2);
  CHECK(per_score("exp2") == 1);
  CHECK(per_score("sub") + per_score("add") + per_score("mul") + per_score("abs") == 0);
  CHECK(count_matches(then_arm, R"(= sub [^\n]*: tensor<8xf32>)") >= 2);  // rebased rows; the max less the row term
  CHECK_NOTHROW(ir::verify(*fn));
}
