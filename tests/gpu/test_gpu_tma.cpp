// GPU tests (label gpu) of TMA copies in software pipelines (LaunchConfig::tma, codegen/tma.h) and of warp
// specialization (LaunchConfig::warp_specialize, codegen/specialize_warps.h): matmul, attention and flex attention
// with their operand tiles copied by cp.async.bulk.tensor on mbarriers — by each program's thread 0, or by a
// producer warpgroup — against float64 on fresh random inputs with poisoned outputs, and bit for bit against the
// same config copied by cp.async (the copy changes nothing the dots compute). Ragged shapes exercise the tensor
// maps' zero fill past the extents.
#include <catch2/catch.hpp>

#include <array>
#include <cstring>

#include "descriptor_matmul_kernel.h"
#include "kernel_test_util.h"
#include "tilejit/attention.h"
#include "tilejit/capture.h"
#include "tilejit/flex_attention.h"
#include "tilejit/flex_variants.h"
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

TEST_CASE("matmul with a producer warpgroup on the GPU: bit for bit the cp.async kernel", "[gpu][tma][warp-specialize]") {
  // The same configs with LaunchConfig::warp_specialize: the producer warpgroup issues the TMA copies on full/empty
  // mbarriers, the consumers run the dots (codegen/specialize_warps.h). 4 and 5 stages leave the dot running, so
  // each stage is released one iteration late.
  const std::array<int, 3> shapes[] = {{512, 512, 512}, {1000, 528, 272}, {136, 80, 48}, {8, 16, 16}, {257, 400, 1008}};
  for (const Config &c : kConfigs)
    for (auto [M, N, K] : shapes) {
      const DType dt = DType::bf16;
      INFO(c.blocks.m << "x" << c.blocks.n << "x" << c.blocks.k << ", " << c.warps << " warps, " << c.stages
                      << " stages; " << M << "x" << N << "x" << K);
      auto a = random_values(size_t(M) * K, dt), b = random_values(size_t(K) * N, dt);
      auto ba = upload_as(a, dt, Backend::GPU), bb = upload_as(b, dt, Backend::GPU);
      const size_t out_bytes = size_t(M) * N * dtype_bytes(dt);
      std::vector<uint8_t> results[2];
      for (bool ws : {false, true}) {
        Buffer out(out_bytes, Backend::GPU);
        out.fill_bytes(0xff);
        LaunchConfig cfg{.num_warps = c.warps, .num_stages = c.stages, .backend = Backend::GPU};
        cfg.tma = ws;
        cfg.warp_specialize = ws;
        kernels::matmul(ba, bb, out, M, N, K, dt, cfg, c.blocks);
        results[ws] = bytes_of(out, out_bytes);
      }
      REQUIRE(results[1] == results[0]);
      // Repeated launches (a producer that ran ahead of a slow consumer, or a phase off by one, shows as a hang or
      // as a difference here).
      for (int i = 0; i < 3; ++i) {
        Buffer out(out_bytes, Backend::GPU);
        out.fill_bytes(0xff);
        LaunchConfig cfg{.num_warps = c.warps, .num_stages = c.stages, .backend = Backend::GPU};
        cfg.tma = cfg.warp_specialize = true;
        kernels::matmul(ba, bb, out, M, N, K, dt, cfg, c.blocks);
        REQUIRE(bytes_of(out, out_bytes) == results[0]);
      }
    }
}

namespace {

// Flex attention with `opt` (its tma and warp_specialize flags set by the caller) against the same launch copied by
// cp.async: out and lse bit for bit. Sequence lengths not multiples of BLOCK_N run the kernel's second loop.
void check_flex_copies(attention::FlexShape s, attention::FlexOptions opt, bool ws) {
  const DType dt = opt.dtype;
  const size_t nq = size_t(s.batch) * s.heads_q * s.seqlen_q * s.head_dim_qk;
  const size_t nk = size_t(s.batch) * s.heads_q * s.seqlen_k * s.head_dim_qk;
  const size_t nl = size_t(s.batch) * s.heads_q * s.seqlen_q;
  auto q = random_values(nq, dt), k = random_values(nk, dt), v = random_values(nk, dt);
  auto bq = upload_as(q, dt, Backend::GPU), bk = upload_as(k, dt, Backend::GPU), bv = upload_as(v, dt, Backend::GPU);
  std::vector<uint8_t> outs[2], lses[2];
  for (bool tma : {false, true}) {
    Buffer out(nq * 2, Backend::GPU), lse(nl * 4, Backend::GPU);
    out.fill_bytes(0xff);
    lse.fill_bytes(0xff);
    opt.backend = Backend::GPU;
    opt.tma = tma;
    opt.warp_specialize = tma && ws;
    attention::flex_forward(bq, bk, bv, out, lse, s, opt);
    outs[tma] = bytes_of(out, nq * 2);
    lses[tma] = bytes_of(lse, nl * 4);
  }
  REQUIRE(outs[1] == outs[0]);
  REQUIRE(lses[1] == lses[0]);
}

}  // namespace

TEST_CASE("flex attention with TMA copies and a producer warpgroup on the GPU: bit for bit the cp.async kernel",
          "[gpu][tma][warp-specialize][flex]") {
  std::vector<float> slope_values = attention::alibi_slopes(4);
  Buffer slopes(slope_values.size() * 4, Backend::GPU);
  slopes.upload(slope_values.data(), slope_values.size() * 4);
  struct Variant {
    const char *name;
    attention::ScoreMod mod;
    attention::Mask mask;
  };
  const Variant variants[] = {{"none", {}, {}},
                              {"causal", {}, attention::causal_top_left()},
                              {"alibi", attention::alibi(capture(slopes, DType::f32)), {}},
                              {"softcap", attention::softcap(30.f), {}},
                              {"sliding window", {}, attention::sliding_window(100, 0)}};
  for (const Variant &var : variants)
    for (int d : {64, 128})
      for (int len : {1, 100, 1000})
        for (bool ws : {false, true}) {
          INFO(var.name << ", head dim " << d << ", seqlen " << len << (ws ? ", warp-specialized" : ", TMA"));
          attention::FlexOptions opt;
          opt.score_mod = var.mod;
          opt.mask = var.mask;
          opt.block_m = 128, opt.block_n = 64, opt.num_warps = 8, opt.num_stages = 2;
          check_flex_copies({.batch = 2, .heads_q = 4, .seqlen_q = len, .seqlen_k = len, .head_dim_qk = d}, opt, ws);
        }
}

TEST_CASE("attention forward with TMA copies and a producer warpgroup on the GPU: bit for bit the cp.async kernel",
          "[gpu][tma][warp-specialize][attention]") {
  for (bool causal : {false, true})
    for (int len : {64, 1000})
      for (bool ws : {false, true}) {
        attention::Shape s{2, 3, len, len, 128};
        const size_t nq = size_t(s.batch) * s.heads * s.seqlen_q * s.head_dim, nl = size_t(s.batch) * s.heads * s.seqlen_q;
        auto q = random_values(nq, DType::bf16), k = random_values(nq, DType::bf16), v = random_values(nq, DType::bf16);
        auto bq = upload_as(q, DType::bf16, Backend::GPU), bk = upload_as(k, DType::bf16, Backend::GPU),
             bv = upload_as(v, DType::bf16, Backend::GPU);
        std::vector<uint8_t> outs[2], lses[2];
        for (bool tma : {false, true}) {
          Buffer out(nq * 2, Backend::GPU), lse(nl * 4, Backend::GPU);
          out.fill_bytes(0xff);
          lse.fill_bytes(0xff);
          attention::Options opt;
          opt.causal = causal;
          opt.block_m = 128, opt.block_n = 64, opt.num_warps = 8, opt.num_stages = 2;
          opt.backend = Backend::GPU;
          opt.tma = tma;
          opt.warp_specialize = tma && ws;
          attention::forward(bq, bk, bv, out, lse, s, opt);
          outs[tma] = bytes_of(out, nq * 2);
          lses[tma] = bytes_of(lse, nl * 4);
        }
        INFO((causal ? "causal" : "full") << ", seqlen " << len << (ws ? ", warp-specialized" : ", TMA"));
        REQUIRE(outs[1] == outs[0]);
        REQUIRE(lses[1] == lses[0]);
      }
}

TEST_CASE("flex backward with TMA copies on the GPU: bit for bit the cp.async kernels", "[gpu][tma][flex]") {
  // The backward's key-block and query-block loops copy q, dO, k, v by TMA where their tiles qualify (the lse and
  // delta vectors stay on cp.async): dq, dk, dv as with cp.async alone (dq by its own pass: deterministic).
  for (bool causal : {false, true})
    for (int d : {64, 128}) {
      attention::FlexShape s{.batch = 2, .heads_q = 3, .seqlen_q = 300, .seqlen_k = 300, .head_dim_qk = d};
      const size_t n = size_t(s.batch) * s.heads_q * s.seqlen_q * d, nl = size_t(s.batch) * s.heads_q * s.seqlen_q;
      auto q = random_values(n, DType::bf16), k = random_values(n, DType::bf16), v = random_values(n, DType::bf16),
           dout = random_values(n, DType::bf16);
      auto bq = upload_as(q, DType::bf16, Backend::GPU), bk = upload_as(k, DType::bf16, Backend::GPU),
           bv = upload_as(v, DType::bf16, Backend::GPU), bdo = upload_as(dout, DType::bf16, Backend::GPU);
      std::vector<uint8_t> grads[2];
      for (bool tma : {false, true}) {
        attention::FlexOptions opt;
        if (causal) opt.mask = attention::causal_top_left();
        opt.backend = Backend::GPU;
        opt.tma = tma;
        Buffer out(n * 2, Backend::GPU), lse(nl * 4, Backend::GPU), dq(n * 2, Backend::GPU), dk(n * 2, Backend::GPU),
            dv(n * 2, Backend::GPU);
        attention::flex_forward(bq, bk, bv, out, lse, s, opt);
        for (Buffer *g : {&dq, &dk, &dv}) g->fill_bytes(0xff);
        attention::flex_backward(bq, bk, bv, out, lse, bdo, dq, dk, dv, s, opt);
        for (const Buffer *g : {&dq, &dk, &dv}) {
          std::vector<uint8_t> bytes = bytes_of(*g, n * 2);
          grads[tma].insert(grads[tma].end(), bytes.begin(), bytes.end());
        }
      }
      INFO((causal ? "causal" : "full") << ", head dim " << d);
      REQUIRE(grads[1] == grads[0]);
    }
}

TEST_CASE("a matmul written with tensor descriptors on the GPU: float64, and bit for bit with and without TMA",
          "[gpu][tma][descriptor]") {
  auto &k = descriptor_matmul_kernel();
  const DType dt = DType::bf16;
  for (auto [M, N, K] : {std::array<int, 3>{512, 512, 512}, std::array<int, 3>{1000, 528, 272}}) {
    INFO(M << "x" << N << "x" << K);
    auto a = random_values(size_t(M) * K, dt), b = random_values(size_t(K) * N, dt);
    auto ba = upload_as(a, dt, Backend::GPU), bb = upload_as(b, dt, Backend::GPU);
    const size_t out_bytes = size_t(M) * N * 2;
    std::vector<uint8_t> results[2];
    for (bool tma : {false, true}) {
      Buffer out(out_bytes, Backend::GPU);
      out.fill_bytes(0xff);
      LaunchConfig cfg{.num_warps = 8, .num_stages = 3, .backend = Backend::GPU};
      cfg.tma = tma;
      k.launch(Grid{uint32_t((M + 127) / 128), uint32_t((N + 127) / 128)}, cfg, ba, bb, out, M, N, K, K, N, N, 128, 128,
               64);
      results[tma] = bytes_of(out, out_bytes);
      auto got = download_as_float(out, size_t(M) * N, dt);
      const double err = rel_error(got, ref_matmul(a, b, M, N, K));
      INFO((tma ? "TMA" : "cp.async") << ": rel error against float64 " << err);
      REQUIRE(err <= tolerance(dt));
    }
    REQUIRE(results[1] == results[0]);
  }
}
