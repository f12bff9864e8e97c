// The C ABI's argument checks, which run before any GPU use: each bad argument gives a nonzero code and a
// tilejit_last_error() sentence naming the problem. No GPU needed.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <thread>

#include "tilejit/c_api.h"

namespace {

// Stand-in device addresses: never dereferenced, since validation fails first.
const void *const kQ = reinterpret_cast<const void *>(uintptr_t(0x100000));
void *const kOut = reinterpret_cast<void *>(uintptr_t(0x200000));

struct Call {
  int dtype = TILEJIT_DTYPE_BF16, batch = 2, heads = 4, sq = 128, sk = 128, d = 64, causal = 0;
  int64_t qs[4] = {4 * 128 * 64, 128 * 64, 64, 1};
  int64_t ks[4] = {4 * 128 * 64, 128 * 64, 64, 1};
  int64_t vs[4] = {4 * 128 * 64, 128 * 64, 64, 1};
  int64_t os[4] = {4 * 128 * 64, 128 * 64, 64, 1};
  const void *q = kQ, *k = kQ, *v = kQ;
  void *out = kOut;
  const int64_t *q_strides = qs;
  int run() {
    return tilejit_attention_forward(q, k, v, out, nullptr, dtype, batch, heads, sq, sk, d, q_strides, ks, vs, os,
                                     causal, 0.f, 0, nullptr);
  }
};

std::string last_error() { return tilejit_last_error(); }

}  // namespace

TEST_CASE("C ABI: attention argument errors return a code and a clear message", "[c_api]") {
  Call c;
  SECTION("dtype") {
    c.dtype = 7;
    CHECK(c.run() == TILEJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(last_error(), Catch::StartsWith("tilejit_attention_forward: ") &&
                                 Catch::Contains("dtype 7 is not supported (0: bf16, 1: f16)"));
  }
  SECTION("non-contiguous last dimension") {
    c.qs[3] = 2;
    CHECK(c.run() == TILEJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(last_error(), Catch::Contains("tensor 'q'") && Catch::Contains("dim 2") &&
                                 Catch::Contains("last dimension must be contiguous (stride 1)"));
  }
  SECTION("null data pointers") {
    c.v = nullptr;
    CHECK(c.run() == TILEJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(last_error(), Catch::Contains("pointer 'v' is null"));
    c.v = kQ;
    c.out = nullptr;
    CHECK(c.run() == TILEJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(last_error(), Catch::Contains("pointer 'out' is null"));
  }
  SECTION("null strides") {
    c.q_strides = nullptr;
    CHECK(c.run() == TILEJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(last_error(), Catch::Contains("q_strides is null"));
  }
  SECTION("negative and int32-overflowing strides") {
    c.ks[1] = -64;
    CHECK(c.run() == TILEJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(last_error(), Catch::Contains("tensor 'k'") && Catch::Contains("must not be negative"));
    c.ks[1] = 128 * 64;
    c.os[0] = int64_t(1) << 31;
    CHECK(c.run() == TILEJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(last_error(), Catch::Contains("tensor 'out'") && Catch::Contains("int32"));
  }
  SECTION("unsupported head_dim, causal with different lengths") {
    c.d = 48;
    CHECK(c.run() == TILEJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(last_error(), Catch::Contains("head_dim 48 is not supported"));
    c.d = 64;
    c.causal = 1;
    c.sk = 256;
    CHECK(c.run() == TILEJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(last_error(), Catch::Contains("causal masking needs seqlen_q == seqlen_k (got 128 and 256)"));
  }
  SECTION("negative sizes") {
    c.heads = -1;
    CHECK(c.run() == TILEJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(last_error(), Catch::Contains("non-negative"));
  }
  SECTION("a bad block size in the explicit-config entry") {
    int rc = tilejit_attention_forward_config(kQ, kQ, kQ, kOut, nullptr, 0, 1, 1, 64, 64, 64, c.qs, c.ks, c.vs, c.os,
                                              0, 0.f, 48, 64, 4, 1, nullptr);
    CHECK(rc == TILEJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(last_error(), Catch::StartsWith("tilejit_attention_forward_config: ") &&
                                 Catch::Contains("BLOCK_M 48 and BLOCK_N 64 must be powers of two"));
  }
}

TEST_CASE("C ABI: an empty problem succeeds without touching the GPU and clears the error", "[c_api]") {
  Call c;
  c.dtype = 9;
  REQUIRE(c.run() != TILEJIT_OK);
  REQUIRE(!last_error().empty());
  c.dtype = TILEJIT_DTYPE_F16;
  c.batch = 0;
  CHECK(c.run() == TILEJIT_OK);
  CHECK(last_error().empty());
}

TEST_CASE("C ABI: the last error is per thread", "[c_api]") {
  Call c;
  c.dtype = 5;
  REQUIRE(c.run() == TILEJIT_ERROR_INVALID_ARGUMENT);
  std::string other;
  std::thread([&] { other = tilejit_last_error(); }).join();
  CHECK(other.empty());
  CHECK_THAT(last_error(), Catch::Contains("dtype 5"));
}

TEST_CASE("C ABI: matmul argument errors", "[c_api]") {
  void *p = kOut;
  CHECK(tilejit_matmul(p, p, p, 64, 64, 64, 3, nullptr) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("dtype 3 is not supported (0: bf16, 1: f16, 2: f32)"));
  CHECK(tilejit_matmul(p, nullptr, p, 64, 64, 64, 0, nullptr) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::StartsWith("tilejit_matmul: ") && Catch::Contains("pointer 'b' is null"));
  CHECK(tilejit_matmul(p, p, p, 0, 64, 64, 0, nullptr) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("M, N, K must be positive (got 0, 64, 64)"));
}

TEST_CASE("C ABI: compile statistics and version", "[c_api]") {
  CHECK(tilejit_last_compile_stats(nullptr) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("stats is null"));
  tilejit_compile_stats stats;
  CHECK(tilejit_attention_compile(3, 64, 0, 1024, 64, 64, 4, 1, &stats) == TILEJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("dtype 3"));
  std::string v = tilejit_version();
  CHECK(v.find('.') != std::string::npos);
}
