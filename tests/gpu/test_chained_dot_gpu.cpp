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

TEST_CASE("codegen on the GPU: a chained wgmma dot (K = 16 operands staged before the loop) and an if-guarded "
          "loop match the interpreter and float64",
          "[gpu][codegen]") {
  // s_j = q·k_jᵀ + af·bf (tests/chained_dot_kernel.h): af·bf's accumulators are continued by q·k's wgmmas;
  // the first loop runs only when flag ≠ 0, and the second must not read operands staged inside it.
  // Values are multiples of 1/8 (q, k) and small integers (af, bf): every sum is exact in f32, so the GPU,
  // the interpreter and float64 agree exactly.
  auto k = tilejit::testing::chained_dot_kernel();
  for (int warps : {4, 8})
    for (int flag : {0, 1}) {
      const int BM = 16 * warps, BN = 64, D = 64, nblocks = 4, M = 2 * BM;
      uint32_t seed = uint32_t(40 + warps + flag);
      auto grid_vals = [&](size_t n, int lo, int hi, float unit, uint32_t s) {
        std::mt19937 gen(s);
        std::uniform_int_distribution<int> d(lo, hi);
        std::vector<float> v(n);
        for (auto &x : v) x = float(d(gen)) * unit;
        return v;
      };
      auto q = grid_vals(size_t(M * D), -8, 8, 0.125f, seed), kk = grid_vals(size_t(nblocks * BN * D), -8, 8, 0.125f, seed + 1);
      auto af = grid_vals(size_t(M * 16), -4, 4, 1, seed + 2), bf = grid_vals(size_t(16 * BN), -4, 4, 1, seed + 3);
      auto to_bf16 = [](const std::vector<float> &v) {  // exact: these values have few significant bits
        std::vector<uint16_t> h(v.size());
        for (size_t i = 0; i < v.size(); ++i) h[i] = uint16_t(std::bit_cast<uint32_t>(v[i]) >> 16);
        return buffer_arg(h);
      };
      std::vector<Arg> args;
      args.push_back(to_bf16(q));
      args.push_back(to_bf16(kk));
      args.push_back(to_bf16(af));
      args.push_back(to_bf16(bf));
      args.push_back(poisoned(size_t(M * BN) * 4));
      args.push_back(poisoned(size_t(M * BN) * 4));
      args.push_back(int_arg(flag));
      args.push_back(int_arg(nblocks));
      DevicePtr p{256, 1 << 20};
      const ir::Function &fn = k.function(p, p, p, p, p, p, flag, nblocks, BM, BN, D);
      run_both(fn, Grid{uint32_t(M / BM)}, args, warps, 2);
      std::string what = fmt::format("chained dot, {} warps, flag {}", warps, flag);
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
