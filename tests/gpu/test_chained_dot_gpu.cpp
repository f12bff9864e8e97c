// The chained wgmma dot and the if-guarded loop of tests/chained_dot_kernel.h on the GPU, against the CPU
// interpreter and a float64 reference.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "chained_dot_kernel.h"
#include "codegen_gpu_harness.h"

using namespace tilejit;
using namespace tilejit::gpu_testing;

namespace {

/// n integers drawn uniformly from [lo, hi], times `unit`: values with few significant bits, so that the
/// dots' sums are exact in f32 and bf16 holds them exactly.
std::vector<float> grid_values(size_t n, int lo, int hi, float unit, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<float> v(n);
  for (auto &x : v) x = float(d(gen)) * unit;
  return v;
}

/// A bf16 buffer of v (exact for grid_values: truncation drops only zero bits).
Arg bf16_arg(const std::vector<float> &v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = uint16_t(std::bit_cast<uint32_t>(v[i]) >> 16);
  return buffer_arg(h);
}

}  // namespace

TEST_CASE("codegen on the GPU: a chained wgmma dot (K = 16 operands staged before the loop) and an if-guarded "
          "loop match the interpreter and float64",
          "[gpu][codegen]") {
  // s_j = q·k_jᵀ + af·bf (tests/chained_dot_kernel.h): af·bf's accumulators are continued by q·k's wgmmas;
  // the first loop runs only when flag ≠ 0, and the second must not read operands staged inside it.
  // Values are multiples of 1/8 (q, k) and small integers (af, bf): every sum is exact in f32, so the GPU,
  // the interpreter and float64 agree exactly.
  auto k = tilejit::testing::chained_dot_kernel();
  // BN = 128: af·bf's B is N-major in two panels, read by one m64n128k16 as q·k's is.
  for (int BN : {64, 128})
  for (int warps : {4, 8})
    for (int flag : {0, 1}) {
      const int BM = 16 * warps, D = 64, nblocks = 4, M = 2 * BM;
      uint32_t seed = uint32_t(40 + warps + flag + BN);
      auto q = grid_values(size_t(M * D), -8, 8, 0.125f, seed), kk = grid_values(size_t(nblocks * BN * D), -8, 8, 0.125f, seed + 1);
      auto af = grid_values(size_t(M * 16), -4, 4, 1, seed + 2), bf = grid_values(size_t(16 * BN), -4, 4, 1, seed + 3);
      std::vector<Arg> args;
      args.push_back(bf16_arg(q));
      args.push_back(bf16_arg(kk));
      args.push_back(bf16_arg(af));
      args.push_back(bf16_arg(bf));
      args.push_back(poisoned(size_t(M * BN) * 4));
      args.push_back(poisoned(size_t(M * BN) * 4));
      args.push_back(int_arg(flag));
      args.push_back(int_arg(nblocks));
      DevicePtr p{256, 1 << 20};
      const ir::Function &fn = k.function(p, p, p, p, p, p, flag, nblocks, BM, BN, D);
      run_both(fn, Grid{uint32_t(M / BM)}, args, warps, 2);
      std::string what = fmt::format("chained dot, BN {}, {} warps, flag {}", BN, warps, flag);
      auto [cpu_sum, gpu_sum] = outputs<float>(args[4]);
      auto [cpu_max, gpu_max] = outputs<float>(args[5]);
      require_close(cpu_sum, gpu_sum, 0, 0, what + " SUM");
      require_close(cpu_max, gpu_max, 0, 0, what + " MAX");
      for (int i = 0; i < M; ++i)
        for (int n = 0; n < BN; ++n) {
          double sum = 0, mx = -1e30;
          for (int j = 0; j < nblocks; ++j) {
            double s = 0;
            for (int d = 0; d < D; ++d) s += double(q[size_t(i * D + d)]) * kk[size_t((j * BN + n) * D + d)];
            for (int f = 0; f < 16; ++f) s += double(af[size_t(i * 16 + f)]) * bf[size_t(f * BN + n)];
            sum += s;
            mx = std::max(mx, s);
          }
          INFO(what << " row " << i << " column " << n);
          REQUIRE(double(gpu_sum[size_t(i * BN + n)]) == (flag ? sum : 0.0));
          REQUIRE(double(gpu_max[size_t(i * BN + n)]) == mx);
        }
    }
}

TEST_CASE("codegen on the GPU: a loop-invariant operand read by a wgmma dot and by one that cannot use wgmma",
          "[gpu][codegen]") {
  // shared_a: A [64, 16] staged in wgmma's row order for one dot and restaged by the other; shared_b: B staged
  // for ldmatrix by a 16-row dot and restaged for the 64-row dot's wgmma (tests/chained_dot_kernel.h).
  // Small integers: every sum is exact, so GPU, interpreter and float64 agree exactly.
  const int n = 3;
  // out[r][c] = Σ_j Σ_k x_j[r][k]·y_j[k][c], x_j at j·xs and y_j at j·ys elements (0: invariant).
  auto reference = [](const std::vector<float> &x, size_t xs, const std::vector<float> &y, size_t ys, int R, int K,
                      int C, int iters) {
    std::vector<double> out(size_t(R * C), 0.0);
    for (int j = 0; j < iters; ++j)
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c)
          for (int k = 0; k < K; ++k)
            out[size_t(r * C + c)] += double(x[j * xs + size_t(r * K + k)]) * y[j * ys + size_t(k * C + c)];
    return out;
  };
  auto check = [](const std::vector<float> &gpu, const std::vector<double> &ref, const std::string &what) {
    REQUIRE(gpu.size() == ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      INFO(what << " element " << i);
      REQUIRE(double(gpu[i]) == ref[i]);
    }
  };
  // One kernel of tests/chained_dot_kernel.h: inputs x0..x2 (bf16), outputs O and O2 (f32, poisoned), n.
  auto run_case = [&](auto kernel, const std::string &what, const std::vector<float> *const (&x)[3],
                      size_t o_elems, size_t o2_elems, int stages, const std::vector<double> &ref_o,
                      const std::vector<double> &ref_o2) {
    std::vector<Arg> args;
    for (const std::vector<float> *xi : x) args.push_back(bf16_arg(*xi));
    args.push_back(poisoned(o_elems * 4));
    args.push_back(poisoned(o2_elems * 4));
    args.push_back(int_arg(n));
    DevicePtr p{256, 1 << 20};
    run_both(kernel.function(p, p, p, p, p, n), Grid{1}, args, 4, stages);
    auto [c1, g1] = outputs<float>(args[3]);
    auto [c2, g2] = outputs<float>(args[4]);
    require_close(c1, g1, 0, 0, what + " O");
    require_close(c2, g2, 0, 0, what + " O2");
    check(g1, ref_o, what + " O vs float64");
    check(g2, ref_o2, what + " O2 vs float64");
  };
  for (int stages : {1, 2}) {
    auto a = grid_values(64 * 16, -4, 4, 1, 7), b = grid_values(size_t(n) * 1024, -4, 4, 1, 8),
         b2 = grid_values(size_t(n) * 512, -4, 4, 1, 9);
    run_case(tilejit::testing::shared_a_kernel(), fmt::format("shared_a, num_stages {}", stages), {&a, &b, &b2},
             64 * 64, 64 * 32, stages, reference(a, 0, b, 1024, 64, 16, 64, n), reference(a, 0, b2, 512, 64, 16, 32, n));
    auto x = grid_values(size_t(n) * 4096, -4, 4, 1, 10), x2 = grid_values(size_t(n) * 1024, -4, 4, 1, 11),
         y = grid_values(64 * 64, -4, 4, 1, 12);
    run_case(tilejit::testing::shared_b_kernel(), fmt::format("shared_b, num_stages {}", stages), {&x, &x2, &y},
             64 * 64, 16 * 64, stages, reference(x, 4096, y, 0, 64, 64, 64, n), reference(x2, 1024, y, 0, 16, 64, 64, n));
  }
}
