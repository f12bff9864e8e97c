// Lowering plans given as text, on the GPU: kernels lowered with random layouts, and tensor-core loops whose
// plan (the loads a pipeline copies ahead, the transposes folded into the dots, the loop-invariant operands staged
// in shared memory) is changed by editing the plan's text, match the interpreter — what the CPU simulator cannot run (wgmma, cp.async, sm_90a).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "codegen/layout_text.h"
#include "codegen_gpu_harness.h"
#include "ir/parser.h"
#include "random_layouts.h"
#include "staged_operand_kernels.h"
#include "runtime/codegen_options.h"
#include "test_codegen_kernels.h"

using namespace tilejit;
using namespace tilejit::codegen::testing;
using namespace tilejit::gpu_testing;

namespace {

/// Arguments (move-only) in order.
template <class... A> std::vector<Arg> args_of(A &&...a) {
  std::vector<Arg> v;
  (v.push_back(std::forward<A>(a)), ...);
  return v;
}

codegen::CodegenOptions device_options(int num_warps, int num_stages) {
  LaunchConfig cfg;
  cfg.arch = runtime::device_arch();
  cfg.num_warps = num_warps;
  cfg.num_stages = num_stages;
  return runtime::codegen_options(cfg);
}

/// |a − b| within two f32 sums' rounding of n terms whose magnitudes add up to `magnitude` (2·γ_n·magnitude,
/// Higham, "Accuracy and Stability of Numerical Algorithms", 3.1 and 4.2).
double f32_sum_bound(int64_t n, double magnitude) {
  const double nu = double(n) * std::ldexp(1.0, -24);
  return 2.0 * nu / (1.0 - nu) * magnitude;
}

}  // namespace

TEST_CASE("plans on the GPU: random layouts compute what the interpreter computes", "[gpu][codegen][layouts]") {
  std::mt19937 gen(4321);
  for (int round = 0; round < 3; ++round)
    for (int warps : {1, 4, 8}) {
      INFO("round " << round << ", num_warps " << warps);
      const codegen::CodegenOptions opts = device_options(warps, 1);
      {  // masked vector add: f32 adds, bit for bit
        const int64_t n = 1000;
        std::vector<Arg> args = args_of(buffer_arg(random_floats(n, -10, 10, gen())), buffer_arg(random_floats(n, -10, 10, gen())),
                              poisoned(n * 4), int_arg(n));
        auto [fn, plan] = tilejit::testing::with_random_layouts(vector_add(256), opts, gen);
        run_both(*fn, Grid{4}, args, warps, 1, &plan);
        auto [cpu, gpu] = outputs<float>(args[2]);
        require_close(cpu, gpu, 0, 0, "vector_add");
      }
      {  // transpose + reshape: data movement, bit for bit
        const int64_t R = 32, C = 64;
        std::vector<Arg> args = args_of(buffer_arg(random_floats(size_t(R * C), -8, 8, gen())), poisoned(size_t(R * C) * 4));
        auto [fn, plan] = tilejit::testing::with_random_layouts(transpose_reshape(R, C), opts, gen);
        run_both(*fn, Grid{1}, args, warps, 1, &plan);
        auto [cpu, gpu] = outputs<float>(args[1]);
        require_close(cpu, gpu, 0, 0, "transpose + reshape");
      }
      {  // argmax, argmin (exact) and a sum (any order within the bound)
        const int64_t B = 512, R = 32, C = 64, P = 3;
        const std::vector<float> x = random_floats(size_t(B * P), -8, 8, gen());
        std::vector<Arg> args = args_of(buffer_arg(x), poisoned(P * 4), buffer_arg(random_floats(size_t(R * C), -8, 8, gen())),
                              poisoned(C * 4), poisoned(P * 4));
        auto [fn, plan] = tilejit::testing::with_random_layouts(arg_reductions(B, R, C), opts, gen);
        run_both(*fn, Grid{uint32_t(P)}, args, warps, 1, &plan);
        auto [ci, gi] = outputs<int32_t>(args[1]);
        REQUIRE(ci == gi);
        auto [cm, gm] = outputs<int32_t>(args[3]);
        REQUIRE(cm == gm);
        auto [cs, gs] = outputs<float>(args[4]);
        for (size_t p = 0; p < cs.size(); ++p) {
          double magnitude = 0;
          for (int64_t j = 0; j < B; ++j) magnitude += std::abs(x[p * size_t(B) + size_t(j)]);
          INFO("sum " << p << ": interpreter " << cs[p] << ", GPU " << gs[p]);
          REQUIRE(std::abs(double(cs[p]) - gs[p]) <= f32_sum_bound(B, magnitude));
        }
      }
      {  // an if with tile results, and casts between every dtype pair: bit for bit
        std::vector<Arg> args = args_of(buffer_arg(random_floats(256 * 4, -5, 5, gen())), poisoned(256 * 4 * 4));
        auto [fn, plan] = tilejit::testing::with_random_layouts(branchy(), opts, gen);
        run_both(*fn, Grid{4}, args, warps, 1, &plan);
        auto [cpu, gpu] = outputs<float>(args[1]);
        require_close(cpu, gpu, 0, 0, "branchy");
        std::vector<Arg> cargs = args_of(buffer_arg(random_floats(128, -100, 100, gen())), poisoned(128 * 64 * 4));
        auto [cfn, cplan] = tilejit::testing::with_random_layouts(casts(), opts, gen);
        run_both(*cfn, Grid{1}, cargs, warps, 1, &cplan);
        auto [cc, gc] = outputs<uint32_t>(cargs[1]);
        REQUIRE(cc == gc);
      }
      {  // a K loop carrying an f32 accumulator (FMA dot): exact inputs, so bit for bit in any order
        const int64_t M = 64, N = 64, K = 64;
        std::vector<Arg> args = matmul_inputs(M, N, K, DType::bf16, gen());
        std::vector<Arg> f32args;
        for (int i = 0; i < 2; ++i) {  // the same sixty-fourths as f32
          const auto &bits = args[size_t(i)].init;
          std::vector<float> f(bits.size() / 2);
          for (size_t j = 0; j < f.size(); ++j) {
            uint32_t w = uint32_t(bits[2 * j] | bits[2 * j + 1] << 8) << 16;
            std::memcpy(&f[j], &w, 4);
          }
          f32args.push_back(buffer_arg(f));
        }
        f32args.push_back(poisoned(M * N * 4));
        f32args.push_back(int_arg(N));
        f32args.push_back(int_arg(K));
        auto [fn, plan] = tilejit::testing::with_random_layouts(matmul(32, 32, 16, DType::f32), opts, gen);
        run_both(*fn, Grid{uint32_t(M / 32), uint32_t(N / 32)}, f32args, warps, 1, &plan);
        auto [cpu, gpu] = outputs<float>(f32args[2]);
        require_close(cpu, gpu, 0, 0, "f32 K loop");
      }
    }
}

TEST_CASE("plans on the GPU: a K loop's pipeline and folds changed in the text still match the interpreter",
          "[gpu][codegen][layouts]") {
  // 8-warp K loops (wgmma on sm_90a) over 5 K steps with 3 stages; b as [K,N] and as trans([N,K]). The plan as
  // the compiler makes it, then with the pipeline marks taken off one load at a time, then off both (and for
  // trans_b the fold with them): exact inputs, bit for bit.
  int runs = 0;
  for (bool trans_b : {false, true}) {
    const int64_t bm = 128, bn = 128, bk = 64, M = bm * 2, N = bn * 2, K = bk * 5;
    auto fn = matmul_acc(bm, bn, bk, DType::bf16, trans_b);
    const codegen::CodegenOptions opts = device_options(8, 3);
    const std::string text = codegen::print_layouts(fn, opts);
    REQUIRE(text.find(" pipelined>") != std::string::npos);
    std::vector<std::string> variants{text};
    for (size_t at = text.find(" pipelined>"); at != std::string::npos; at = text.find(" pipelined>", at + 1))
      variants.push_back(std::string(text).erase(at, 10));
    std::string bare = text;
    for (const std::string mark : {" pipelined", " folded"})
      for (size_t at; (at = bare.find(mark + ">")) != std::string::npos;) bare.erase(at, mark.size());
    variants.push_back(bare);
    for (const std::string &variant : variants) {
      INFO((trans_b ? "trans_b, " : "") << "plan:\n" << variant);
      ir::TypeNotes notes;
      auto read = ir::parse(variant, &notes);
      const codegen::LoweringPlan plan = codegen::read_layouts(*read, notes, opts);
      std::vector<Arg> args = matmul_inputs(M, N, K, DType::bf16, uint32_t(17 + runs));
      args.push_back(int_arg(N));
      args.push_back(int_arg(K));
      run_both(*read, Grid{uint32_t(M / bm), uint32_t(N / bn)}, args, 8, 3, &plan);
      auto [cpu, gpu] = outputs<float>(args[2]);
      require_close(cpu, gpu, 0, 0, fmt::format("dot {}x{}x{}{}, plan {}", bm, bn, bk, trans_b ? " trans_b" : "", runs));
      ++runs;
    }
  }
  REQUIRE(runs >= 2 * 3);
}

TEST_CASE("plans on the GPU: loop-invariant operands staged or not as the text says still match the interpreter",
          "[gpu][codegen][layouts]") {
  // acc += a·b0 + a·b(i) over n iterations: a and b0 loop-invariant (32 KB each, so b0 lands in the dynamic buffer
  // past the stage buffers of b(i), which the pipeline copies ahead). Both marked "shared" as planned, then each
  // unmarked (staged at its dot in every iteration), then neither: exact inputs, bit for bit.

  const codegen::CodegenOptions opts = device_options(4, 2);
  const std::string text = codegen::print_layouts(*ir::parse(tilejit::testing::kInvariantDotsKernel), opts);
  const size_t first = text.find(" shared>"), second = text.find(" shared>", first + 1);
  REQUIRE(second != std::string::npos);
  const std::vector<std::string> variants{text, std::string(text).erase(first, 7), std::string(text).erase(second, 7),
                                          std::string(text).erase(second, 7).erase(first, 7)};
  const int64_t n = 3;
  int runs = 0;
  for (const std::string &variant : variants) {
    INFO("plan:\n" << variant);
    ir::TypeNotes notes;
    auto read = ir::parse(variant, &notes);
    const codegen::LoweringPlan plan = codegen::read_layouts(*read, notes, opts);
    // Each variant lowers as it says: 2, 1, 1 and 0 operands staged before the loop.
    const std::string lowering = codegen::print_lowering(*read, opts, nullptr, &plan);
    size_t staged = 0;
    for (size_t at = 0; (at = lowering.find("operand in shared memory once, before the loop", at)) != std::string::npos; ++at)
      ++staged;
    CHECK(staged == (runs == 0 ? 2u : runs == 3 ? 0u : 1u));
    std::vector<Arg> args = matmul_inputs(128, 128, 128 * n, DType::bf16, uint32_t(41 + runs));
    // a: the first 128x128 elements of its buffer; b: n blocks of 128x128.
    args.push_back(int_arg(n));
    run_both(*read, Grid{1, 1}, args, 4, 2, &plan);
    auto [cpu, gpu] = outputs<float>(args[2]);
    require_close(cpu, gpu, 0, 0, fmt::format("loop-invariant operands, plan {}", runs));
    ++runs;
  }
  REQUIRE(runs == 4);
}

TEST_CASE("plans on the GPU: an operand staged for an FMA dot is staged again by a tensor-core dot that reads it",
          "[gpu][codegen][layouts]") {
  // One bf16 [64, 64] operand read in a loop by an FMA dot (row-major staging) and by a tensor-core dot (swizzled
  // staging): exact inputs, bit for bit against the interpreter.
  auto fn = ir::parse(tilejit::testing::kMixedFamiliesKernel);
  const int64_t n = 3;
  std::vector<Arg> args;
  args.push_back(sixty_fourths(random_floats(64 * 64, -1, 1, 71), DType::bf16));
  args.push_back(buffer_arg(random_floats(4096 + 64 * 64, -1, 1, 72)));
  args.push_back(int_arg(n));
  run_both(*fn, Grid{1, 1}, args, 4, 1);
  auto [cpu, gpu] = outputs<float>(args[1]);
  require_close(cpu, gpu, 0, 0, "FMA and tensor-core dots of one staged operand", /*unwritten_ok=*/true);
}
