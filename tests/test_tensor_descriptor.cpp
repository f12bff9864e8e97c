// Tensor descriptors (tilejit/tensor_descriptor.h): blocks read and written at element offsets of a tensor given by
// base, shape and strides, with the elements past the shape read as 0 and never written; errors that name the op,
// the values and the caller's line; and, written this way, matmul's operand loads copied by TMA on sm_90a.
#include <catch2/catch.hpp>

#include "descriptor_matmul_kernel.h"
#include "test_codegen_util.h"
#include "test_interp_helpers.h"
#include "tilejit/buffer.h"
#include "tilejit/error.h"
#include "tilejit/kernel.h"
#include "tilejit/ops.h"

using namespace tilejit;
using namespace tilejit::interp_testing;
using codegen::testing::contains;

namespace {
const LaunchConfig kInterp{.backend = Backend::Interpreter};
constexpr float kPoison = -12345.f;

}  // namespace

TEST_CASE("tensor descriptor: blocks of a strided matrix, edges read as 0 and not written", "[interp][dsl][descriptor]") {
  Rng rng;
  INFO("seed " << rng.seed);
  // x: R x C in rows of LD elements; out = 2·x written column-major (element (r, c) at c·R + r), with a poisoned
  // tail that must stay as is.
  constexpr int R = 37, C = 50, LD = 64, BR = 16, BC = 32, kTail = 100;
  auto x = rng.floats(size_t(R) * LD);
  Buffer bx = host_buffer(x);
  Buffer out = host_buffer(std::vector<float>(size_t(R) * C + kTail, kPoison));
  // Column sums of each block, to see the 0 fill: rows past R must add nothing.
  Buffer sums = host_buffer(std::vector<float>(size_t((R + BR - 1) / BR) * ((C + BC - 1) / BC) * BC, kPoison));
  auto k = Kernel("descriptor_copy", [](Ptr<f32> x, Ptr<f32> out, Ptr<f32> sums, I32 rows, I32 cols, I32 ld,
                                        Constexpr<int> BR, Constexpr<int> BC) {
    auto src = make_tensor_descriptor(x, {rows, cols}, {ld, 1}, {BR, BC});
    auto dst = make_tensor_descriptor(out, {rows, cols}, {1, rows}, {BR, BC});
    auto r0 = program_id(0) * BR, c0 = program_id(1) * BC;
    auto block = src.load({r0, c0});
    dst.store({r0, c0}, block * 2.f);
    auto col_sums = make_tensor_descriptor(sums, {num_programs(0) * num_programs(1) * BC}, {1}, {BC});
    col_sums.store({(program_id(0) * num_programs(1) + program_id(1)) * BC}, sum(block, 0));
  });
  const uint32_t gr = (R + BR - 1) / BR, gc = (C + BC - 1) / BC;
  k.launch(Grid{gr, gc}, kInterp, bx, out, sums, R, C, LD, BR, BC);
  auto got = out.download_as<float>(size_t(R) * C + kTail);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) REQUIRE(got[size_t(c) * R + size_t(r)] == 2 * x[size_t(r) * LD + size_t(c)]);
  for (int i = 0; i < kTail; ++i) REQUIRE(got[size_t(R) * C + size_t(i)] == kPoison);
  auto got_sums = sums.download_as<float>(size_t(gr) * gc * BC);
  for (uint32_t pr = 0; pr < gr; ++pr)
    for (uint32_t pc = 0; pc < gc; ++pc)
      for (int j = 0; j < BC; ++j) {
        const int c = int(pc) * BC + j;
        float want = 0;  // the block's rows in f32, in order; past the last row or column the block holds 0
        for (int r = int(pr) * BR; r < int(pr) * BR + BR; ++r)
          want += r < R && c < C ? x[size_t(r) * LD + size_t(c)] : 0.f;
        INFO("block (" << pr << ", " << pc << ") column " << j);
        REQUIRE(got_sums[(size_t(pr) * gc + pc) * BC + size_t(j)] == Approx(want).epsilon(1e-5).margin(1e-5));
      }
}

TEST_CASE("tensor descriptor: a 3-D tensor's blocks with a batch offset", "[interp][dsl][descriptor]") {
  Rng rng;
  INFO("seed " << rng.seed);
  // x: [B, S, D] with batch stride S·D + 8 (padding between batches); y = x + 1 in a dense [B, S, D].
  constexpr int B = 3, S = 20, D = 16, BS = 8;
  const int sb = S * D + 8;
  auto x = rng.floats(size_t(B) * sb);
  Buffer bx = host_buffer(x);
  Buffer y = host_buffer(std::vector<float>(size_t(B) * S * D, kPoison));
  auto k = Kernel("descriptor_3d", [](Ptr<f32> x, Ptr<f32> y, I32 batch, I32 seq, I32 stride_b, Constexpr<int> D,
                                      Constexpr<int> BS) {
    auto src = make_tensor_descriptor(x, {batch, seq, D}, {stride_b, D, 1}, {1, BS, D});
    auto dst = make_tensor_descriptor(y, {batch, seq, D}, {seq * D, D, 1}, {1, BS, D});
    auto b = program_id(1), s0 = program_id(0) * BS;
    dst.store({b, s0, 0}, src.load({b, s0, 0}) + 1.f);
  });
  k.launch(Grid{(S + BS - 1) / BS, B}, kInterp, bx, y, B, S, sb, D, BS);
  auto got = y.download_as<float>(size_t(B) * S * D);
  for (int b = 0; b < B; ++b)
    for (int s = 0; s < S; ++s)
      for (int d = 0; d < D; ++d)
        REQUIRE(got[(size_t(b) * S + size_t(s)) * D + size_t(d)] == x[size_t(b) * sb + size_t(s) * D + size_t(d)] + 1.f);
}

TEST_CASE("tensor descriptor: bad arguments name the op, the values and the caller's line", "[dsl][descriptor]") {
  auto fails = [](auto body) {
    auto k = Kernel("descriptor_errors", [body](Ptr<f32> x, I32 n) { body(x, n); });
    std::string what;
    try {
      (void)k.ir(DevicePtr{}, 64);
    } catch (const TraceError &e) {
      what = e.what();
    }
    CHECK(contains(what, "test_tensor_descriptor.cpp"));
    return what;
  };
  CHECK(contains(fails([](Ptr<f32> x, I32 n) { make_tensor_descriptor(x, {n, n}, {n}, {16, 16}); }),
                 "make_tensor_descriptor: shape, strides and block_shape must have one entry per dim, 1 to 5 dims; got 2, "
                 "1 and 2"));
  CHECK(contains(fails([](Ptr<f32> x, I32 n) { make_tensor_descriptor(x, {n, n}, {n, 1}, {16, 24}); }),
                 "block_shape[1] = 24 must be a power of two"));
  CHECK(contains(fails([](Ptr<f32>, I32 n) { make_tensor_descriptor(n, {n}, {1}, {16}); }),
                 "make_tensor_descriptor: the base must be a scalar pointer"));
  CHECK(contains(fails([](Ptr<f32> x, I32 n) { make_tensor_descriptor(x, {n, 2.5f}, {n, 1}, {16, 16}); }),
                 "shape[1] must be a scalar integer"));
  CHECK(contains(fails([](Ptr<f32> x, I32 n) {
          make_tensor_descriptor(x, {n, n}, {n, 1}, {16, 16}).load({0});
        }),
        "TensorDescriptor::load: 1 offsets for a descriptor of 2 dims"));
  CHECK(contains(fails([](Ptr<f32> x, I32 n) {
          make_tensor_descriptor(x, {n, n}, {n, 1}, {16, 16}).load({0, arange(0, 16)});
        }),
        "TensorDescriptor::load: offsets[1] must be a scalar integer"));
  CHECK(contains(fails([](Ptr<f32> x, I32 n) {
          make_tensor_descriptor(x, {n, n}, {n, 1}, {16, 16}).store({0, 0}, zeros({16, 16}, DType::bf16));
        }),
        "TensorDescriptor::store: the value is 16x16 (bf16) but the pointer scalar (ptr<f32>) holds f32; cast it with "
        ".to(DType::f32)"));
  CHECK(contains(fails([](Ptr<f32>, I32) { TensorDescriptor().load({0}); }), "was not made by make_tensor_descriptor"));
}

TEST_CASE("tensor descriptor: a matmul written with descriptors copies both operands by TMA on sm_90a",
          "[codegen][tma][descriptor]") {
  auto &k = testing::descriptor_matmul_kernel();
  LaunchConfig cfg;
  cfg.num_warps = 8, cfg.num_stages = 3, cfg.arch = "sm_90a";
  cfg.tma = true;
  const int n = 4096;
  auto ptx = k.ptx(cfg, DevicePtr{}, DevicePtr{}, DevicePtr{}, n, n, n, n, n, n, 128, 128, 64).ptx;
  CHECK(contains(ptx, "cp.async.bulk.tensor"));
  CHECK(contains(ptx, "wgmma.mma_async"));
  auto [rc, log] = codegen::testing::ptxas_v(ptx, "sm_90a", "descriptor_matmul");
  INFO(log);
  CHECK(rc == 0);
}
