// tilejit_last_launch_config on the CPU interpreter (TILEJIT_INTERPRET=1, host pointers; no autotuning there):
// each entry point reports the configuration it launched with, per thread; a failed or empty call leaves
// the previous report alone; a null argument is an error. The autotuned picks are checked on the GPU
// (tests/gpu/test_gpu_autotune.cpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "test_runtime_scoped_env.h"
#include "tilejit/c_api.h"
#include "tilejit/numerics.h"

using tilejit::testing::ScopedEnv;

namespace {

tilejit_launch_config last() {
  tilejit_launch_config c;
  std::memset(&c, 0x5a, sizeof(c));  // poisoned: every field must be written
  REQUIRE(tilejit_last_launch_config(&c) == TILEJIT_OK);
  return c;
}

std::vector<uint16_t> random_bf16(size_t n, std::mt19937 &rng) {
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<uint16_t> v(n);
  for (auto &x : v) x = tilejit::float_to_bf16(dist(rng));
  return v;
}

}  // namespace

TEST_CASE("C ABI: tilejit_last_launch_config reports each call's configuration", "[c_api]") {
  ScopedEnv interpret("TILEJIT_INTERPRET", "1");
  // A fresh thread: nothing launched on it yet.
  // (Catch's assertions stay on the test's thread: the other thread only fills the struct.)
  tilejit_launch_config fresh;
  std::memset(&fresh, 0x5a, sizeof(fresh));  // poisoned: every field must be written
  int fresh_rc = -1;
  std::thread([&] { fresh_rc = tilejit_last_launch_config(&fresh); }).join();
  REQUIRE(fresh_rc == TILEJIT_OK);
  CHECK(std::string(fresh.kernel).empty());
  CHECK(fresh.block_m == 0);
  CHECK(fresh.num_warps == 0);
  CHECK(fresh.autotuned == 0);

  const int B = 1, H = 2, S = 40, D = 32;
  std::mt19937 rng(7);
  auto q = random_bf16(size_t(B) * H * S * D, rng), k = random_bf16(q.size(), rng), v = random_bf16(q.size(), rng);
  std::vector<uint16_t> out(q.size(), 0xffff);
  const int64_t st[4] = {int64_t(H) * S * D, int64_t(S) * D, D, 1};

  // Explicit attention config: reported as given.
  REQUIRE(tilejit_attention_forward_config(q.data(), k.data(), v.data(), out.data(), nullptr, TILEJIT_DTYPE_BF16, B, H,
                                           S, S, D, st, st, st, st, 1, 0.f, 32, 16, 4, 1, nullptr) == TILEJIT_OK);
  tilejit_launch_config c = last();
  CHECK(std::string(c.kernel) == "attention_fwd");
  CHECK((c.block_m == 32 && c.block_n == 16 && c.block_k == 0 && c.num_warps == 4 && c.num_stages == 1));
  CHECK(c.min_ctas_per_sm == 0);
  CHECK(c.autotuned == 0);
  CHECK(c.copy_method == 0);  // the interpreter copies nothing by TMA

  // autotune = 1 on the interpreter: not tuned; the library's defaults (attention::Options) are reported.
  REQUIRE(tilejit_attention_forward(q.data(), k.data(), v.data(), out.data(), nullptr, TILEJIT_DTYPE_BF16, B, H, S, S,
                                    D, st, st, st, st, 0, 0.f, 1, nullptr) == TILEJIT_OK);
  c = last();
  CHECK(std::string(c.kernel) == "attention_fwd");
  CHECK((c.block_m == 64 && c.num_warps == 4 && c.num_stages == 2));
  CHECK(c.autotuned == 0);

  // Flex: the variant's tile fields.
  tilejit_flex_variant var;
  tilejit_flex_variant_init(&var);
  var.causal = 1;
  var.block_m = 16;
  var.block_n = 32;
  var.num_warps = 4;
  var.num_stages = 1;
  REQUIRE(tilejit_flex_attention_forward(q.data(), k.data(), v.data(), out.data(), nullptr, TILEJIT_DTYPE_BF16, B, H, H,
                                         S, S, D, st, st, st, st, 0.f, &var, nullptr) == TILEJIT_OK);
  c = last();
  CHECK(std::string(c.kernel) == "flex_attention_fwd");
  CHECK((c.block_m == 16 && c.block_n == 32 && c.block_k == 0 && c.num_warps == 4 && c.num_stages == 1));
  CHECK(c.autotuned == 0);

  // A failed call (bad head dim) and an empty one leave the report of the last launch.
  int rc = tilejit_flex_attention_forward(q.data(), k.data(), v.data(), out.data(), nullptr, TILEJIT_DTYPE_BF16, B, H,
                                          H, S, S, 12, st, st, st, st, 0.f, &var, nullptr);
  REQUIRE(rc == TILEJIT_ERROR_INVALID_ARGUMENT);
  REQUIRE(tilejit_attention_forward_config(q.data(), k.data(), v.data(), out.data(), nullptr, TILEJIT_DTYPE_BF16, 0, H,
                                           S, S, D, st, st, st, st, 0, 0.f, 128, 128, 8, 3, nullptr) == TILEJIT_OK);
  c = last();
  CHECK(std::string(c.kernel) == "flex_attention_fwd");
  CHECK(c.block_m == 16);

  // The flex backward, autotune = 1 on the interpreter: not tuned; the variant's tile fields.
  std::vector<float> lse(size_t(B) * H * S);
  REQUIRE(tilejit_flex_attention_forward(q.data(), k.data(), v.data(), out.data(), lse.data(), TILEJIT_DTYPE_BF16, B, H,
                                         H, S, S, D, st, st, st, st, 0.f, &var, nullptr) == TILEJIT_OK);
  std::vector<uint16_t> dq(q.size()), dk(q.size()), dv(q.size());
  var.autotune = 1;
  REQUIRE(tilejit_flex_attention_backward(q.data(), k.data(), v.data(), out.data(), lse.data(), q.data(), dq.data(),
                                          dk.data(), dv.data(), TILEJIT_DTYPE_BF16, B, H, H, S, S, D, st, st, st, st,
                                          0.f, &var, nullptr) == TILEJIT_OK);
  c = last();
  CHECK(std::string(c.kernel) == "flex_attention_bwd");
  CHECK((c.block_m == 16 && c.block_n == 32 && c.num_warps == 4 && c.num_stages == 1));
  CHECK(c.autotuned == 0);

  // Matmul on the interpreter: its default blocks.
  const int M = 24, N = 40, K = 16;
  auto a = random_bf16(size_t(M) * K, rng), b = random_bf16(size_t(K) * N, rng);
  std::vector<uint16_t> cm(size_t(M) * N, 0xffff);
  REQUIRE(tilejit_matmul(a.data(), b.data(), cm.data(), M, N, K, TILEJIT_DTYPE_BF16, nullptr) == TILEJIT_OK);
  c = last();
  CHECK(std::string(c.kernel) == "matmul");
  CHECK((c.block_m == 64 && c.block_n == 64 && c.block_k == 32));
  CHECK(c.num_warps > 0);
  CHECK(c.autotuned == 0);

  // Per thread: another thread's calls do not show here, nor ours there.
  std::string other_thread = "unset";
  std::thread([&] {
    tilejit_launch_config o;
    if (tilejit_last_launch_config(&o) == TILEJIT_OK) other_thread = o.kernel;
  }).join();
  CHECK(other_thread.empty());
  CHECK(std::string(last().kernel) == "matmul");

  REQUIRE(tilejit_last_launch_config(nullptr) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(tilejit_last_error(), Catch::Contains("config is null"));
}
