// Acquire-release atomics on the GPU (ops.h MemOrder::AcqRel): thousands of programs, many resident at
// once, each publish a part and count their arrival; the last one merges every part. A missing release or
// acquire shows as a stale part (the poison's NaN, or an earlier launch's values) in the merged sum.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>

#include "codegen_gpu_harness.h"
#include "last_arrival_kernel.h"

using namespace tilejit;
using namespace tilejit::gpu_testing;

TEST_CASE("atomic_add with MemOrder::AcqRel: the last program to arrive sees every other program's part",
          "[gpu][codegen]") {
  const int part = 256;
  for (int programs : {2000, 5000}) {
    auto fn = testing::last_arrival_merge(part);
    std::vector<float> x = random_floats(size_t(part) * size_t(programs), -3, 3, uint32_t(programs));
    for (float salt : {1.f, -0.5f, 3.f}) {  // each launch publishes other values
      INFO(programs << " programs, salt " << salt);
      std::vector<Arg> args;
      args.push_back(buffer_arg(x));
      args.push_back(poisoned(x.size() * 4));
      args.push_back(poisoned(size_t(part) * 4));
      args.push_back(buffer_arg(std::vector<int32_t>{0}));
      args.push_back(poisoned(size_t(programs) * 4));
      args.push_back(float_arg(salt));
      run_both(*fn, Grid{uint32_t(programs)}, args, 4);
      // The merge sums the parts in program order on both backends: bit for bit.
      auto [cpu, gpu] = outputs<float>(args[2]);
      for (int i = 0; i < part; ++i) {
        INFO("element " << i << ": interpreter " << cpu[size_t(i)] << ", GPU " << gpu[size_t(i)]);
        REQUIRE(std::memcmp(&cpu[size_t(i)], &gpu[size_t(i)], 4) == 0);
      }
      auto [cpu_counter, gpu_counter] = outputs<int32_t>(args[3]);
      REQUIRE(gpu_counter[0] == 0);
      REQUIRE(cpu_counter[0] == 0);
      // Every arrival was counted once: the old values are 0 … programs − 1 in some order.
      std::vector<int32_t> seen = outputs<int32_t>(args[4]).second;
      std::sort(seen.begin(), seen.end());
      for (int p = 0; p < programs; ++p) REQUIRE(seen[size_t(p)] == p);
    }
  }
}
