// Codegen values without a GPU: hand-built kernels' LLVM IR runs on the CPU under lli (tests/sim_lli.h, one
// pthread per GPU thread, real barriers and warp shuffles) beside the interpreter, on fresh inputs with the
// outputs poisoned first. Exact where the lowering promises exactness (position conversions, reductions'
// max/argmax, data movement); fma_index within the bound ops.h states. Tensor-core, cp.async and inline-PTX
// paths cannot run here: they stay with the GPU tests.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>

#include "sim_lli.h"
#include "test_codegen_kernels.h"
#include "last_arrival_kernel.h"
#include "test_codegen_util.h"
#include "test_dsl_helpers.h"

using namespace tilejit;
using namespace tilejit::codegen::testing;

namespace {

std::vector<float> floats_of(const std::vector<uint8_t> &b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

/// Same bits everywhere (NaN poison included: an element one side writes and the other does not fails).
void require_bitwise(const std::vector<uint8_t> &interp, const std::vector<uint8_t> &simulated, const std::string &what) {
  REQUIRE(interp.size() == simulated.size());
  std::vector<uint32_t> a(interp.size() / 4), b(a.size());
  std::memcpy(a.data(), interp.data(), a.size() * 4);
  std::memcpy(b.data(), simulated.data(), b.size() * 4);
  size_t written = 0;
  for (uint32_t u : a) written += u != 0xffffffffu;
  INFO(what << ": " << written << " of " << a.size() << " words written by the interpreter");
  REQUIRE(written > 0);
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(what << " word " << i << ": interpreter 0x" << std::hex << a[i] << ", simulated 0x" << b[i]);
    REQUIRE(a[i] == b[i]);
  }
}

}  // namespace

TEST_CASE("codegen simulated on the CPU: index_to_f32 of positions equals the interpreter bit for bit",
          "[codegen][sim]") {
  const int64_t M = 64, N = 64;
  std::mt19937 gen(31);
  std::uniform_int_distribution<int32_t> d(-(1 << 23), 1 << 23);
  std::vector<int32_t> x(M);
  for (auto &v : x) v = d(gen);
  for (int warps : {1, 4, 8}) {
    INFO("num_warps " << warps);
    std::vector<sim::SimArg> args{sim::buffer(x), sim::poisoned(5 * M * N * 4), sim::i32(d(gen))};
    Function fn = index_floats(M, N);
    auto interp = sim::run_interpreted(fn, Grid{1}, args);
    auto simulated = sim::run_simulated(fn, Grid{1}, warps, args);
    require_bitwise(interp[1], simulated[1], "index_to_f32");
  }
}

TEST_CASE("codegen simulated on the CPU: fma_index's split and its folds stay within ops.h's bound",
          "[codegen][sim]") {
  // As the GPU test: distances below 2^11 and |a| ≤ 0.75 keep every part of the split below 2^11, each extra
  // rounding ≤ 2^-13; folded fmas with c < 2 at most 3e-3 apart; −inf where masked, on both sides.
  const int64_t M = 64, N = 64;
  const double tol_z = 4 * 0x1p-13, tol_fma = 3e-3;
  std::mt19937 gen(37);
  std::vector<int32_t> x(M);
  for (auto &v : x) v = std::uniform_int_distribution<int32_t>(-2000, 2000)(gen);
  std::vector<float> s(M * N);
  for (auto &v : s) v = std::uniform_real_distribution<float>(-16, 16)(gen);
  for (int warps : {1, 4, 8}) {
    INFO("num_warps " << warps);
    const float a = std::uniform_real_distribution<float>(-0.75f, 0.75f)(gen);
    const float c = std::uniform_real_distribution<float>(1.f, 2.f)(gen);
    std::vector<sim::SimArg> args{sim::buffer(x),      sim::buffer(s),     sim::buffer(std::vector<uint16_t>(16 * N)),
                                  sim::poisoned(size_t(index_fma_outputs(M, N)) * 4), sim::f32(a), sim::i32(37),
                                  sim::f32(c)};
    Function fn = index_fma(M, N, false);
    auto interp = floats_of(sim::run_interpreted(fn, Grid{1}, args)[3]);
    auto simulated = floats_of(sim::run_simulated(fn, Grid{1}, warps, args)[3]);
    const size_t mn = size_t(M * N), m = size_t(M);
    // Output ranges and their tolerances: z, max(z), fma(z, c, −m), max(where), fma(where, …), max over rows.
    const std::vector<std::tuple<size_t, size_t, double>> parts{{0, mn, tol_z},
                                                                {mn, m, tol_z},
                                                                {mn + m, mn, tol_fma},
                                                                {2 * mn + m, m, tol_z},
                                                                {2 * mn + 2 * m, mn, tol_fma},
                                                                {3 * mn + 2 * m, size_t(N), tol_z}};
    size_t masked = 0;
    for (auto [begin, n, tol] : parts)
      for (size_t i = begin; i < begin + n; ++i) {
        float r = interp[i], g = simulated[i];
        INFO("element " << i << ": interpreter " << r << ", simulated " << g);
        REQUIRE(!std::isnan(r));  // every element written
        if (std::isinf(r) || std::isinf(g)) {
          REQUIRE(r == g);
          ++masked;
          continue;
        }
        REQUIRE(std::abs(double(r) - double(g)) <= tol);
      }
    REQUIRE(masked == size_t(M * (N - 37)));  // where: columns ≥ 37 of every row, −inf on both sides
  }
}

TEST_CASE("codegen simulated on the CPU: an fma_index of a zero index keeps a NaN or infinite factor",
          "[codegen][sim]") {
  // index = arange(0, 1) stretched: 0 in every register, nothing per thread. fma(0, a, c) is NaN for a NaN
  // or infinite a; the split once returned c there (found by this simulator).
  Function fn = fma_index_zero(128);
  std::vector<float> s(128);
  for (size_t i = 0; i < s.size(); ++i) s[i] = float(i) - 60.5f;
  for (float av : {NAN, INFINITY, -2.5f}) {
    INFO("a = " << av);
    std::vector<sim::SimArg> args{sim::buffer(s), sim::poisoned(128 * 4), sim::f32(av)};
    auto interp = sim::run_interpreted(fn, Grid{1}, args);
    auto simulated = sim::run_simulated(fn, Grid{1}, 4, args);
    auto r = floats_of(interp[1]), g = floats_of(simulated[1]);
    for (size_t i = 0; i < r.size(); ++i) {
      INFO("element " << i << ": interpreter " << r[i] << ", simulated " << g[i]);
      REQUIRE(((std::isnan(r[i]) && std::isnan(g[i])) || r[i] == g[i]));
    }
  }
}

TEST_CASE("codegen simulated on the CPU: reductions across lanes and warps, transposes through shared memory",
          "[codegen][sim]") {
  // argmax/argmin and max are exact in any order; the sum's order is the lowering's own (a few ulps from the
  // interpreter's), checked to 1e-5 relative. Transpose + reshape moves bits only.
  std::mt19937 gen(41);
  std::uniform_real_distribution<float> d(-8, 8);
  const int64_t B = 1024, R = 32, C = 64, P = 3;
  std::vector<float> x(size_t(B * P)), m(size_t(R * C));
  for (auto &v : x) v = d(gen);
  for (auto &v : m) v = d(gen);
  for (int warps : {1, 4, 8}) {
    INFO("num_warps " << warps);
    std::vector<sim::SimArg> args{sim::buffer(x), sim::poisoned(P * 4), sim::buffer(m), sim::poisoned(C * 4),
                                  sim::poisoned(P * 4)};
    Function fn = arg_reductions(B, R, C);
    auto interp = sim::run_interpreted(fn, Grid{uint32_t(P)}, args);
    auto simulated = sim::run_simulated(fn, Grid{uint32_t(P)}, warps, args);
    require_bitwise(interp[1], simulated[1], "argmax");
    require_bitwise(interp[3], simulated[3], "argmin along rows");
    auto rs = floats_of(interp[4]), gs = floats_of(simulated[4]);
    for (size_t i = 0; i < rs.size(); ++i) REQUIRE(std::abs(rs[i] - gs[i]) <= 1e-5 * (1 + std::abs(rs[i])));

    std::vector<float> t(size_t(R * C));
    for (auto &v : t) v = d(gen);
    std::vector<sim::SimArg> targs{sim::buffer(t), sim::poisoned(t.size() * 4)};
    Function tf = transpose_reshape(R, C);
    require_bitwise(sim::run_interpreted(tf, Grid{1}, targs)[1], sim::run_simulated(tf, Grid{1}, warps, targs)[1],
                    "transpose + reshape");
  }
}

TEST_CASE("codegen simulated on the CPU: masked add, softmax, branches, casts, atomics", "[codegen][sim]") {
  std::mt19937 gen(43);
  auto floats = [&](size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (auto &x : v) x = std::uniform_real_distribution<float>(lo, hi)(gen);
    return v;
  };
  auto close = [](const std::vector<float> &r, const std::vector<float> &g, double rtol, double atol,
                  const std::string &what) {
    REQUIRE(r.size() == g.size());
    for (size_t i = 0; i < r.size(); ++i) {
      INFO(what << " element " << i << ": interpreter " << r[i] << ", simulated " << g[i]);
      if (std::isnan(r[i]) || std::isnan(g[i])) {
        REQUIRE((std::isnan(r[i]) && std::isnan(g[i])));
        continue;
      }
      REQUIRE(std::abs(double(r[i]) - double(g[i])) <= atol + rtol * std::abs(double(r[i])));
    }
  };
  {  // masked vector add, the last program partial: f32 adds, bit for bit
    const int64_t n = 2000;
    std::vector<sim::SimArg> args{sim::buffer(floats(n, -10, 10)), sim::buffer(floats(n, -10, 10)),
                                  sim::poisoned(n * 4), sim::i32(int32_t(n))};
    Function fn = vector_add(512);
    Grid grid{uint32_t((n + 511) / 512)};
    require_bitwise(sim::run_interpreted(fn, grid, args)[2], sim::run_simulated(fn, grid, 4, args)[2], "vector_add");
  }
  // row softmax (f32): shuffles within a warp and partials across warps. exp and the sums' order differ from
  // the interpreter's (float64 exp): 2e-5 relative, as on the GPU.
  for (auto [bm, bn, warps, rows, cols] : {std::tuple{4, 128, 4, 37, 112}, std::tuple{1, 2048, 8, 3, 2000},
                                           std::tuple{2, 256, 1, 5, 256}}) {
    INFO("softmax " << bm << "x" << bn << " warps " << warps);
    std::vector<sim::SimArg> args{sim::buffer(floats(size_t(rows * bn), -4, 4)), sim::poisoned(size_t(rows * bn) * 4),
                                  sim::i32(rows), sim::i32(cols), sim::i32(bn)};
    Function fn = softmax(bm, bn, codegen::testing::F32);
    Grid grid{uint32_t((rows + bm - 1) / bm)};
    close(floats_of(sim::run_interpreted(fn, grid, args)[1]), floats_of(sim::run_simulated(fn, grid, warps, args)[1]),
          2e-5, 1e-7, "softmax");
  }
  {  // if/else with results, per program: bit for bit
    std::vector<sim::SimArg> args{sim::buffer(floats(256 * 4, -5, 5)), sim::poisoned(256 * 4 * 4)};
    Function fn = branchy();
    require_bitwise(sim::run_interpreted(fn, Grid{4}, args)[1], sim::run_simulated(fn, Grid{4}, 4, args)[1], "branchy");
  }
  {  // round trips through bf16/f16/f32/i32/i64/i1/i8/f64: bit for bit
    std::vector<sim::SimArg> args{sim::buffer(floats(128, -100, 100)), sim::poisoned(128 * 64 * 4)};
    Function fn = casts();
    require_bitwise(sim::run_interpreted(fn, Grid{1}, args)[1], sim::run_simulated(fn, Grid{1}, 4, args)[1], "casts");
  }
  {  // atomics: the accumulators and counters (the old values depend on the threads' order)
    std::vector<int32_t> cnt(64);
    for (int i = 0; i < 64; ++i) cnt[size_t(i)] = i * 7 - 100;
    std::vector<sim::SimArg> args{sim::buffer(floats(64, -10, 10)), sim::buffer(cnt), sim::poisoned(128 * 4),
                                  sim::i32(50)};
    Function fn = atomics();
    auto r = sim::run_interpreted(fn, Grid{1}, args), g = sim::run_simulated(fn, Grid{1}, 4, args);
    require_bitwise(r[0], g[0], "atomic accumulators");
    require_bitwise(r[1], g[1], "atomic counters");
  }
  // unary_math is not here: lli-19's x86 backend aborts on its IR (X86 FP Stackifier); the GPU test covers it.
}

TEST_CASE("codegen simulated on the CPU: the last program to count its arrival (AcqRel) merges the others' parts",
          "[codegen][sim]") {
  auto fn = tilejit::testing::last_arrival_merge(64);
  REQUIRE(ir::print(*fn).find("{acq_rel}") != std::string::npos);
  const int n = 6;
  std::mt19937 gen(47);
  std::vector<float> x(64 * n);
  for (auto &v : x) v = std::uniform_real_distribution<float>(-3, 3)(gen);
  std::vector<sim::SimArg> args{sim::buffer(x), sim::poisoned(64 * n * 4), sim::poisoned(64 * 4),
                                sim::buffer(std::vector<int32_t>{0}), sim::poisoned(n * 4), sim::f32(1.5f)};
  auto interp = sim::run_interpreted(*fn, Grid{uint32_t(n)}, args);
  for (int warps : {1, 4}) {
    INFO("num_warps " << warps);
    auto simulated = sim::run_simulated(*fn, Grid{uint32_t(n)}, warps, args);
    require_bitwise(interp[2], simulated[2], "merged parts");
    REQUIRE(simulated[3] == std::vector<uint8_t>(4, 0));  // the counter is back to 0
    require_bitwise(interp[4], simulated[4], "arrivals");
  }
  REQUIRE(interp[3] == std::vector<uint8_t>(4, 0));
  std::vector<float> merged = floats_of(interp[2]);
  for (int i = 0; i < 64; ++i) {
    float want = 0;
    for (int p = 0; p < n; ++p) want += x[size_t(p * 64 + i)] * 1.5f * 2.f;
    REQUIRE(merged[size_t(i)] == want);
  }
  // The arrivals' old values are 0 … n − 1, each once.
  std::vector<int32_t> arrivals(interp[4].size() / 4);
  std::memcpy(arrivals.data(), interp[4].data(), interp[4].size());
  std::sort(arrivals.begin(), arrivals.end());
  for (int p = 0; p < n; ++p) REQUIRE(arrivals[size_t(p)] == p);
}

namespace {

// out[M, N] = Σ_i a·x_i − 0.5·b·x_i over n iterations: a and b [M, K] f32 are loop-invariant dot operands,
// x_i [K, N] is loaded in the loop.
std::unique_ptr<ir::Function> invariant_operands_kernel(int64_t M, int64_t K, int64_t N) {
  using dsl_testing::param;
  return dsl_testing::trace(
      [&] {
        Tile a = param(0), b = param(1), x = param(2), out = param(3), n = param(4);
        Tile r = arange(0, M), k = arange(0, K), c = arange(0, N);
        Tile ta = load(a + r(_, None) * K + k(None, _)), tb = load(b + r(_, None) * K + k(None, _));
        Tile acc = zeros({M, N}, DType::f32);
        for_range(0, n, 1, [&](tilejit::I32 i) {
          Tile tx = load(x + i * (K * N) + k(_, None) * N + c(None, _));
          acc = dot(ta, tx, acc) - dot(tb, tx) * 0.5f;
        });
        store(out + r(_, None) * N + c(None, _), acc);
      },
      {dsl_testing::P(DType::f32), dsl_testing::P(DType::f32), dsl_testing::P(DType::f32), dsl_testing::P(DType::f32),
       dsl_testing::S(DType::i32)});
}

}  // namespace

TEST_CASE("codegen simulated on the CPU: loop-invariant dot operands past the static shared-memory budget",
          "[codegen][sim]") {
  // Two f32 [64, 128] operands (32 KB each) read by dots in a loop: the first is staged in a static array; the
  // second does not fit the 48 KB static limit and is staged in the dynamic buffer, below the scratch where
  // each iteration stages x. Both stay there across iterations while x's staging comes and goes.
  const int64_t M = 64, K = 128, N = 16;
  const int iters = 3;
  auto fn = invariant_operands_kernel(M, K, N);
  codegen::CodegenOptions opts;
  opts.arch = "sm_80";
  opts.num_warps = 4;
  codegen::PtxResult ptx = codegen::compile_to_ptx(*fn, opts);
  auto n_static = codegen::testing::count_lines(ptx.ptx, [](auto &l) {
    return codegen::testing::contains(l, ".shared .align") && codegen::testing::contains(l, "tilejit_staged");
  });
  REQUIRE(n_static == 1);
  REQUIRE(ptx.shared_bytes >= M * K * 4 + K * N * 4);  // b and x's staging above it

  std::mt19937 gen(53);
  auto floats = [&](size_t len) {
    std::vector<float> v(len);
    for (auto &e : v) e = std::uniform_real_distribution<float>(-2, 2)(gen);
    return v;
  };
  std::vector<float> av = floats(size_t(M * K)), bv = floats(size_t(M * K)), xv = floats(size_t(iters * K * N));
  std::vector<sim::SimArg> args{sim::buffer(av), sim::buffer(bv), sim::buffer(xv), sim::poisoned(size_t(M * N) * 4),
                                sim::i32(iters)};
  auto interp = floats_of(sim::run_interpreted(*fn, Grid{1}, args)[3]);
  auto simulated = floats_of(sim::run_simulated(*fn, Grid{1}, 4, args)[3]);
  // Against float64: an f32 sum of n = 2·iters·K products, in any order, is within n·2⁻²⁴·Σ|terms|.
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double want = 0, magnitude = 0;
      for (int it = 0; it < iters; ++it)
        for (int64_t kk = 0; kk < K; ++kk) {
          double xe = xv[size_t(it * K * N + kk * N + j)];
          double ta = double(av[size_t(i * K + kk)]) * xe, tb = 0.5 * double(bv[size_t(i * K + kk)]) * xe;
          want += ta - tb;
          magnitude += std::abs(ta) + std::abs(tb);
        }
      const double bound = 2.0 * iters * K * std::ldexp(1.0, -24) * magnitude;
      INFO("element (" << i << ", " << j << "): want " << want << ", interpreter " << interp[size_t(i * N + j)]
                       << ", simulated " << simulated[size_t(i * N + j)] << ", bound " << bound);
      REQUIRE(std::abs(interp[size_t(i * N + j)] - want) <= bound);
      REQUIRE(std::abs(simulated[size_t(i * N + j)] - want) <= bound);
    }
}

TEST_CASE("codegen: loop-invariant operands stay in registers where the dynamic buffer would outgrow a block",
          "[codegen]") {
  // Two f32 [64, 256] operands (64 KB each, past the static budget) and x's staging (16 KB): 144 KB of shared
  // memory fits a block on sm_80 (163 KB) but not on sm_86 (99 KB), where both operands stay in registers and
  // each dot stages its operand in the scratch (64 KB + 16 KB).
  auto fn = invariant_operands_kernel(64, 256, 16);
  codegen::CodegenOptions opts;
  opts.num_warps = 4;
  opts.arch = "sm_80";
  CHECK(codegen::compile_to_ptx(*fn, opts).shared_bytes >= 2 * 64 * 256 * 4 + 256 * 16 * 4);
  opts.arch = "sm_86";
  const int sm86 = codegen::compile_to_ptx(*fn, opts).shared_bytes;
  CHECK(sm86 <= 99 * 1024);
  CHECK(sm86 < 2 * 64 * 256 * 4);
}
