// PTX checks of small loads staged through a pipelined loop's stage buffers (codegen/pipeline.h): a vector read
// by other ops than dots is copied ahead with 4-byte cp.async and read from shared memory where it stands.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <array>

#include "codegen/codegen.h"
#include "test_codegen_kernels.h"
#include "test_codegen_util.h"
#include "tilejit/flex_attention.h"
#include "tilejit/flex_variants.h"
#include "tilejit/paged_attention.h"

using namespace tilejit;
using codegen::CodegenOptions;
using codegen::testing::contains;
using codegen::testing::count_lines;
using codegen::testing::run_ptxas;
using codegen::testing::dump_ptx;

namespace {

std::string ptx_of(const ir::Function &fn, const std::string &arch, int warps, int stages) {
  CodegenOptions opts;
  opts.arch = arch;
  opts.num_warps = warps;
  opts.num_stages = stages;
  return codegen::compile_to_ptx(fn, opts).ptx;
}

size_t lines_with(const std::string &ptx, const char *what) {
  return count_lines(ptx, [&](const std::string &l) { return contains(l, what); });
}

/// The PTX of the kernel whose entry is named `entry` in a module holding several.
std::string entry_text(const std::string &ptx, const std::string &entry) {
  size_t at = ptx.find(".entry " + entry + "(");
  REQUIRE(at != std::string::npos);
  size_t end = ptx.find(".entry ", at + 1);
  return ptx.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

}  // namespace

TEST_CASE("pipelined loops: a small vector read by other ops is copied ahead with the dot operands",
          "[codegen][pipeline]") {
  // matmul_acc with RowBias::Add adds a masked per-row f32 vector (other −0.75) to the accumulator in every K step. With
  // a pipeline it costs no global load in the loop: the kernel loads from global memory exactly what
  // matmul_acc without the vector does; without one (num_stages 1) it is an ordinary masked load.
  for (const char *arch : {"sm_80", "sm_90a"})
    for (auto [bm, bn, bk, warps] : {std::array{64, 64, 32, 4}, std::array{128, 128, 64, 8}})
      for (int stages : {1, 2, 3}) {
        INFO(arch << ", " << bm << "x" << bn << "x" << bk << ", " << warps << " warps, num_stages " << stages);
        using codegen::testing::matmul_acc, codegen::testing::RowBias;
        std::string with_vector = ptx_of(matmul_acc(bm, bn, bk, DType::bf16, false, RowBias::Add), arch, warps, stages);
        std::string without = ptx_of(matmul_acc(bm, bn, bk, DType::bf16, false), arch, warps, stages);
        auto file = dump_ptx(with_vector, fmt::format("row_bias_{}x{}_s{}_{}", bm, bn, stages, arch));
        auto [rc, log] = run_ptxas(file, arch);
        INFO(log);
        REQUIRE(rc == 0);
        const size_t staged = lines_with(with_vector, "cp.async.ca.shared.global");
        if (stages == 1) {
          REQUIRE(staged == 0);
          REQUIRE(lines_with(with_vector, "ld.global") > lines_with(without, "ld.global"));
          continue;
        }
        // Each of the bm elements by one owner thread (a prologue copy and a loop copy per element it holds),
        // 4 bytes each, zero-filled by src-size where masked.
        REQUIRE(staged >= 2);
        REQUIRE(lines_with(with_vector, "cp.async.ca.shared.global") ==
                count_lines(with_vector, [](const std::string &l) {
                  return contains(l, "cp.async.ca.shared.global") && contains(l, "], 4, %r");
                }));
        REQUIRE(lines_with(with_vector, "ld.global") == lines_with(without, "ld.global"));
        REQUIRE(lines_with(with_vector, "ld.shared") > lines_with(without, "ld.shared"));
      }
}

TEST_CASE("pipelined loops: a small vector the loop also stores to is not copied ahead", "[codegen][pipeline]") {
  // Copied S-1 iterations ahead, the load would miss the stores of the iterations in between; the store's pointer
  // has the load's parameter as its root, so the load stays where it is (its own masked global load).
  using codegen::testing::matmul_acc, codegen::testing::RowBias;
  for (int stages : {2, 3}) {
    INFO("num_stages " << stages);
    std::string ptx = ptx_of(matmul_acc(64, 64, 32, DType::bf16, false, RowBias::AddAndStoreBack), "sm_90a", 4, stages);
    std::string staged = ptx_of(matmul_acc(64, 64, 32, DType::bf16, false, RowBias::Add), "sm_90a", 4, stages);
    REQUIRE(lines_with(ptx, "cp.async.cg.shared.global") > 0);  // the dot operands are still pipelined
    REQUIRE(lines_with(ptx, "cp.async.ca.shared.global") == 0);
    REQUIRE(lines_with(ptx, "ld.global") > lines_with(staged, "ld.global"));
  }
}

TEST_CASE("pipelined loops: the key-major backward reads logsumexp and delta from its stage buffers",
          "[codegen][pipeline][flex]") {
  // The dK/dV kernel walks query blocks and reads each block's lse and delta ([BM] f32, masked past the
  // sequence, lse's other −inf): they are staged with the block's q and dO, so its PTX has no f32 global load.
  attention::FlexShape s{.batch = 2, .heads_q = 4, .heads_kv = 2, .seqlen_q = 1000, .seqlen_k = 1000,
                         .head_dim_qk = 64};
  for (const char *arch : {"sm_80", "sm_90a"})
    for (bool causal : {false, true}) {
      INFO(arch << (causal ? ", causal" : ""));
      attention::FlexOptions o;
      o.arch = arch;
      o.block_m = 64, o.block_n = 64, o.num_warps = 4, o.num_stages = 2;
      if (causal) o.mask = attention::causal_top_left();
      std::string dkdv = entry_text(attention::flex_backward_ptx(s, o), "flex_attention_bwd_dkdv");
      REQUIRE(lines_with(dkdv, "cp.async.ca.shared.global") > 0);
      REQUIRE(count_lines(dkdv, [](const std::string &l) { return contains(l, "ld.global") && contains(l, "f32"); }) == 0);
    }
}

TEST_CASE("pipelined loops: a paged cache's page numbers are not staged (the copies' addresses need them)",
          "[codegen][pipeline][paged]") {
  // Pages of 16 under 64-key blocks gather a page number per key; the pipeline re-issues that load for each
  // later iteration's addresses, so it must not become a staged value as well.
  attention::PagedKVCache cache;
  cache.k_pages = cache.v_pages = DevicePtr{256, 1 << 24};
  cache.block_table = cache.seq_lens = DevicePtr{256, 1 << 16};
  cache.num_pages = 512, cache.page_size = 16, cache.heads_kv = 2, cache.head_dim = 128;
  cache.max_pages_per_seq = 64;
  attention::DecodeOptions o;
  o.backend = Backend::Interpreter;
  o.block_n = 64, o.num_warps = 4, o.num_stages = 3, o.num_splits = 1;
  attention::DecodePlan plan({.batch = 2, .heads_q = 8, .seqlen_q = 1}, cache, o);
  std::string ptx = plan.ptx("sm_90a");
  REQUIRE(lines_with(ptx, "cp.async.cg.shared.global") > 0);
  REQUIRE(lines_with(ptx, "cp.async.ca.shared.global") == 0);
}
