// Codegen from several host threads at once (the autotuner compiles its candidates in parallel; each emission
// runs on a target machine of its own): every thread gets the same PTX as a compile on one thread.
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "tilejit/kernels.h"

using namespace tilejit;

TEST_CASE("codegen on several threads at once gives the PTX of a serial compile", "[codegen]") {
  std::vector<kernels::BuiltinSpec> specs;
  for (int bm : {64, 128})
    for (int warps : {4, 8}) {
      kernels::BuiltinSpec s;
      s.dtype = DType::bf16;
      s.head_dim = 64;
      s.block_m = bm;
      s.block_n = 64;
      s.num_warps = warps;
      s.arch = "sm_90a";
      specs.push_back(s);
    }
  std::vector<std::string> serial;
  for (const auto &s : specs) serial.push_back(kernels::builtin_ptx("attention", s));

  // Two rounds of every spec at once, each thread starting on a different one.
  std::vector<std::string> parallel(2 * specs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < parallel.size(); ++i)
    threads.emplace_back([&, i] { parallel[i] = kernels::builtin_ptx("attention", specs[i % specs.size()]); });
  for (auto &t : threads) t.join();
  for (size_t i = 0; i < parallel.size(); ++i) {
    INFO("spec " << i % specs.size());
    CHECK(parallel[i] == serial[i % specs.size()]);
  }
  // Distinct configs give distinct kernels (the comparison above is not vacuous).
  CHECK(serial[0] != serial[1]);
  CHECK(serial[0] != serial[2]);
}
