// GPU tests (label gpu) of TMA copies in software pipelines (LaunchConfig::tma, codegen/tma.h): matmul with its
// operand tiles copied by cp.async.bulk.tensor on per-stage mbarriers, against float64 on fresh random inputs
// with poisoned outputs, and bit for bit against the same config copied by cp.async (the copy changes nothing
// the dots compute). Ragged M, N, K exercise the tensor maps' zero fill past the extents.
#include <catch2/catch.hpp>

#include <array>
#include <cstring>

#include "kernel_test_util.h"
#include "tilejit/kernels.h"

using namespace tilejit;
using namespace tilejit::testing;

namespace {

struct Config {
  kernels::MatmulBlocks blocks;
  int warps, stages;
};
// 8 warps read a in wgmma's row order (boxes of 8 rows); 4 and 5 stages leave the dot running (one iteration less
// ahead); BLOCK_K 32 and 16 use the 64- and 32-byte swizzles.
const Config kConfigs[] = {{{128, 256, 64}, 8, 3}, {{128, 128, 64}, 8, 4}, {{128, 128, 64}, 8, 2},
                           {{64, 128, 32}, 4, 5},  {{128, 64, 16}, 4, 3}};

std::vector<uint8_t> bytes_of(const Buffer &b, size_t n) {
  std::vector<uint8_t> out(n);
  b.download(out.data(), n);
  return out;
}

}  // namespace

TEST_CASE("matmul with TMA copies on the GPU: float64 and bit for bit the cp.async kernel", "[gpu][tma]") {
  // N and K multiples of 16 (the row strides' specialization: 16-byte aligned rows), M anything; ragged against
  // every block, K below BLOCK_K, one K step.
  const std::array<int, 3> shapes[] = {{512, 512, 512}, {1000, 528, 272}, {136, 80, 48}, {8, 16, 16}, {257, 400, 1008}};
  for (const Config &c : kConfigs)
    for (auto [M, N, K] : shapes)
      for (DType dt : {DType::bf16, DType::f16}) {
        INFO(c.blocks.m << "x" << c.blocks.n << "x" << c.blocks.k << ", " << c.warps << " warps, " << c.stages
                        << " stages; " << M << "x" << N << "x" << K << " " << dtype_name(dt));
        auto a = random_values(size_t(M) * K, dt), b = random_values(size_t(K) * N, dt);
        auto ba = upload_as(a, dt, Backend::GPU), bb = upload_as(b, dt, Backend::GPU);
        const size_t out_bytes = size_t(M) * N * dtype_bytes(dt);
        std::vector<uint8_t> results[2];
        for (bool tma : {false, true}) {
          Buffer out(out_bytes, Backend::GPU);
          out.fill_bytes(0xff);
          LaunchConfig cfg{.num_warps = c.warps, .num_stages = c.stages, .backend = Backend::GPU};
          cfg.tma = tma;
          kernels::matmul(ba, bb, out, M, N, K, dt, cfg, c.blocks);
          results[tma] = bytes_of(out, out_bytes);
          if (tma) {
            auto got = download_as_float(out, size_t(M) * N, dt);
            double err = rel_error(got, ref_matmul(a, b, M, N, K));
            INFO("rel error against float64 " << err);
            REQUIRE(err <= tolerance(dt));
          }
        }
        REQUIRE(results[1] == results[0]);
      }
}

TEST_CASE("the TMA matmul configs copy by TMA", "[gpu][tma]") {
  // The configs above compile to TMA copies of both operands (else they would test cp.async twice).
  for (const Config &c : kConfigs) {
    kernels::BuiltinSpec spec;
    spec.block_m = c.blocks.m, spec.block_n = c.blocks.n, spec.block_k = c.blocks.k;
    spec.num_warps = c.warps, spec.num_stages = c.stages, spec.tma = true;
    const std::string ptx = kernels::builtin_ptx("matmul", spec);
    INFO(c.blocks.m << "x" << c.blocks.n << "x" << c.blocks.k);
    REQUIRE(ptx.find("cp.async.bulk.tensor.2d") != std::string::npos);
    REQUIRE(ptx.find("cp.async.cg") == std::string::npos);
  }
}
