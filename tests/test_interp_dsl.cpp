// End to end through the DSL: kernels traced from C++ lambdas, optimized, and run on the interpreter with
// host Buffers. Checks results against plain loops and that interpreter faults name the user's line.
#include <catch2/catch.hpp>

#include "test_interp_helpers.h"
#include "tilejit/buffer.h"
#include "tilejit/error.h"
#include "tilejit/kernel.h"
#include "tilejit/ops.h"

using namespace tilejit;
using namespace tilejit::interp_testing;

namespace {
const LaunchConfig kInterp{.backend = Backend::Interpreter};

}  // namespace

TEST_CASE("DSL: row sums of a matrix with a carried loop accumulator", "[interp][dsl]") {
  Rng rng;
  INFO("seed " << rng.seed);
  constexpr int R = 40, C = 100, BR = 16, BC = 32;
  auto x = rng.floats(R * C);
  Buffer bx = host_buffer(x), out(R * 4, Backend::Interpreter);
  out.fill_bytes(0xff);
  auto k = Kernel("row_sums", [](Ptr<f32> x, Ptr<f32> out, I32 rows, I32 cols, Constexpr<int> BR, Constexpr<int> BC) {
    auto r = program_id(0) * BR + arange(0, BR);
    auto acc = zeros({BR}, DType::f32);
    for_range(0, cols, BC, [&](I32 c0) {
      auto c = c0 + arange(0, BC);
      auto mask = r(_, None) < rows && c(None, _) < cols;
      auto t = load(x + r(_, None) * cols + c(None, _), mask, 0.f);
      acc = acc + sum(t, 1);
    });
    store(out + r, acc, r < rows);
  });
  k.launch(Grid{uint32_t((R + BR - 1) / BR)}, kInterp, bx, out, R, C, BR, BC);
  auto got = out.download_as<float>(R);
  for (int i = 0; i < R; ++i) {
    // The kernel sums each 32-column block in f32, then adds the block sums: same association here.
    float acc = 0;
    for (int c0 = 0; c0 < C; c0 += BC) {
      float blk = 0;
      for (int c = c0; c < std::min(C, c0 + BC); ++c) blk += x[size_t(i * C + c)];
      acc += blk;
    }
    INFO("row " << i);
    REQUIRE(got[size_t(i)] == acc);
  }
}

TEST_CASE("DSL: dot of bf16 tiles and a branch on program_id", "[interp][dsl]") {
  Rng rng;
  INFO("seed " << rng.seed);
  constexpr int M = 32, N = 16, K = 64;
  auto a = rng.floats(M * K, -1, 1), b = rng.floats(K * N, -1, 1);
  Buffer ba(M * K * 2, Backend::Interpreter), bb(K * N * 2, Backend::Interpreter), out(2 * M * N * 4, Backend::Interpreter);
  ba.upload(buf_of(a, DType::bf16).bytes);
  bb.upload(buf_of(b, DType::bf16).bytes);
  auto k = Kernel("dot_branch", [](Ptr<bf16> a, Ptr<bf16> b, Ptr<f32> out, Constexpr<int> M, Constexpr<int> N,
                                   Constexpr<int> K) {
    auto rm = arange(0, M), rn = arange(0, N), rk = arange(0, K);
    auto ta = load(a + rm(_, None) * K + rk(None, _));
    auto tb = load(b + rk(_, None) * N + rn(None, _));
    auto c = dot(ta, tb);
    if_(program_id(0) == 1, [&] { c = c * 2.f; });
    store(out + program_id(0) * (int(M) * int(N)) + rm(_, None) * N + rn(None, _), c);
  });
  k.launch(Grid{2}, kInterp, ba, bb, out, M, N, K);
  auto got = out.download_as<float>(2 * M * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float acc = 0;
      for (int p = 0; p < K; ++p) acc += ref_round_bf16(a[size_t(i * K + p)]) * ref_round_bf16(b[size_t(p * N + j)]);
      REQUIRE(got[size_t(i * N + j)] == acc);  // bf16 products are exact in f32: same sum, same order
      REQUIRE(got[size_t(M * N + i * N + j)] == 2 * acc);
    }
}

TEST_CASE("DSL: an unmasked out-of-bounds load names this file and line", "[interp][dsl]") {
  Buffer x(100 * 4, Backend::Interpreter), out(128 * 4, Backend::Interpreter);
  x.fill_bytes(0);
  auto k = Kernel("oob", [](Ptr<f32> x, Ptr<f32> out) {
    auto offs = arange(0, 128);
    store(out + offs, load(x + offs));  // the line the error must name
  });
  const int line = __LINE__ - 2;
  try {
    k.launch(Grid{1}, kInterp, x, out);
    FAIL("expected InterpError");
  } catch (const InterpError &e) {
    const std::string m = e.what();
    INFO(m);
    CHECK_THAT(m, Catch::Contains("load at "));
    CHECK_THAT(m, Catch::Contains("test_interp_dsl.cpp:" + std::to_string(line)));
    CHECK_THAT(m, Catch::Contains("element [100] of the 128 tile"));
    CHECK_THAT(m, Catch::Contains("is 0 bytes past the end of argument 0 ('arg0') (400 bytes)"));
  }
}

TEST_CASE("DSL: fma_index on the interpreter is the fma of index_to_f32, rounded once", "[interp][dsl]") {
  // Positions up to 2^26 (past f32's exact integers: the conversion itself rounds) and factors of either
  // sign; the interpreter's result is the one correctly rounded fma of the converted index, bit for bit.
  Rng rng;
  INFO("seed " << rng.seed);
  constexpr int R = 16, C = 32;
  std::vector<int32_t> q(R);
  for (auto &v : q) v = int32_t(rng.integer(-(1 << 26), 1 << 26));
  auto s = rng.floats(R * C, -100, 100);
  const float a = rng.uniform(-3, 3);
  Buffer bq(R * 4, Backend::Interpreter), bs = host_buffer(s), out(R * C * 4, Backend::Interpreter);
  bq.upload(q);
  out.fill_bytes(0xff);
  auto k = Kernel("fma_index_rows", [](Ptr<i32> q, Ptr<f32> s, Ptr<f32> out, F32 a, Constexpr<int> R, Constexpr<int> C) {
    auto r = arange(0, R), c = arange(0, C);
    auto offs = r(_, None) * C + c(None, _);
    store(out + offs, fma_index(load(q + r)(_, None) - c(None, _), a, load(s + offs)));
  });
  k.launch(Grid{1}, kInterp, bq, bs, out, a, R, C);
  auto got = out.download_as<float>(R * C);
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      INFO("row " << i << " column " << j);
      REQUIRE(got[size_t(i * C + j)] == std::fma(float(q[size_t(i)] - j), a, s[size_t(i * C + j)]));
    }
}

TEST_CASE("DSL: fma_index of an index that folds to a constant runs as the plain fma", "[interp][dsl]") {
  // The index cast of a constant tile folds to a constant; the fma {split} then lost the cast the verifier
  // requires as its first operand, and every launch failed with a VerifyError (a "pass bug").
  auto s = std::vector<float>{1.5f, -2.f, 0.25f, 8.f, -0.5f, 3.f, 7.f, -9.f, 0.f, 1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f};
  Buffer bs = host_buffer(s), out(3 * 16 * 4, Backend::Interpreter);
  out.fill_bytes(0xff);
  auto k = Kernel("fma_index_const", [](Ptr<f32> s, Ptr<f32> out, F32 a) {
    auto i = arange(0, 16);
    auto c = load(s + i);
    store(out + i, fma_index(full({16}, 7, DType::i32), a, c));
    store(out + 16 + i, fma_index(i - i, a, c));  // canonicalized to 0, then folded
    store(out + 32 + i, fma_index(zeros({16}, DType::i32), a, 1.f));
  });
  const float a = -0.75f;
  REQUIRE_NOTHROW(k.launch(Grid{1}, kInterp, bs, out, a));
  CHECK(k.ir(bs, out, a).find("{split}") == std::string::npos);
  auto got = out.download_as<float>(48);
  for (int j = 0; j < 16; ++j) {
    INFO("element " << j);
    CHECK(got[size_t(j)] == std::fma(7.f, a, s[size_t(j)]));
    CHECK(got[size_t(16 + j)] == s[size_t(j)]);
    CHECK(got[size_t(32 + j)] == 1.f);
  }
}
