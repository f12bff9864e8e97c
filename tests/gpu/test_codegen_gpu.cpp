// Codegen on the GPU: each hand-built IR kernel of tests/test_codegen_kernels.h runs on the GPU and on the
// CPU interpreter (the oracle) over the same fresh random inputs; outputs (poisoned first) must agree.
// Tolerances per dtype are stated at each check (approximate PTX math vs libm, f32 summation order).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "interp/interpreter.h"
#include "runtime/runtime.h"
#include "codegen_gpu_harness.h"
#include "kernel_checks.h"
#include "test_codegen_kernels.h"
#include "tilejit/attention.h"
#include "tilejit/buffer.h"

using namespace tilejit;
using namespace tilejit::codegen::testing;
using namespace tilejit::gpu_testing;

TEST_CASE("codegen on the GPU: masked vector add matches the interpreter exactly", "[gpu][codegen]") {
  const int64_t n = 5008;  // not a multiple of the block: the last program is masked
  std::vector<Arg> args;
  args.push_back(buffer_arg(random_floats(n, -10, 10, 1)));
  args.push_back(buffer_arg(random_floats(n, -10, 10, 2)));
  args.push_back(poisoned(n * 4));
  args.push_back(int_arg(n));
  run_both(vector_add(1024), Grid{uint32_t((n + 1023) / 1024)}, args);
  auto [cpu, gpu] = outputs<float>(args[2]);
  require_close(cpu, gpu, 0, 0, "vector_add");  // f32 adds: bit-identical
}

TEST_CASE("codegen on the GPU: row softmax (f32, bf16, shuffles and cross-warp reductions)", "[gpu][codegen]") {
  struct Case { int64_t bm, bn; DType dt; int warps; int rows, cols; };
  for (Case c : {Case{4, 128, F32, 4, 37, 112}, Case{4, 128, BF16, 4, 37, 128}, Case{1, 2048, F32, 8, 3, 2000},
                 Case{2, 256, F32, 1, 5, 256}}) {
    int64_t stride = c.bn;
    auto x = random_floats(size_t(c.rows * stride), -4, 4, 3);
    std::vector<Arg> args;
    if (c.dt == BF16) {
      std::vector<uint16_t> xb(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        uint32_t bits;
        std::memcpy(&bits, &x[i], 4);
        xb[i] = uint16_t(bits >> 16);  // bf16 by truncation: any bf16 values will do as input
      }
      args.push_back(buffer_arg(xb));
    } else {
      args.push_back(buffer_arg(x));
    }
    args.push_back(poisoned(size_t(c.rows * stride) * dtype_bytes(c.dt)));
    args.push_back(int_arg(c.rows));
    args.push_back(int_arg(c.cols));
    args.push_back(int_arg(stride));
    run_both(softmax(c.bm, c.bn, c.dt), Grid{uint32_t((c.rows + c.bm - 1) / c.bm)}, args, c.warps);
    std::vector<float> cpu, gpu;
    if (c.dt == BF16) {
      auto [cb, gb] = outputs<uint16_t>(args[1]);
      for (size_t i = 0; i < cb.size(); ++i) {
        uint32_t a = uint32_t(cb[i]) << 16, b = uint32_t(gb[i]) << 16;
        float fa, fb;
        std::memcpy(&fa, &a, 4);
        std::memcpy(&fb, &b, 4);
        cpu.push_back(fa);
        gpu.push_back(fb);
      }
    } else {
      std::tie(cpu, gpu) = outputs<float>(args[1]);
    }
    // f32: ex2.approx and a different summation order (≈1e-6 relative); bf16: one rounding step apart.
    double rtol = c.dt == BF16 ? 1.6e-2 : 2e-5;
    require_close(cpu, gpu, rtol, 1e-7, fmt::format("softmax {}x{} {} w{}", c.bm, c.bn, dtype_name(c.dt), c.warps),
                  /*unwritten_ok=*/c.cols < stride);
  }
}

TEST_CASE("codegen on the GPU: argmax/argmin and a cross-warp sum", "[gpu][codegen]") {
  const int64_t block = 512, R = 32, C = 64, programs = 3;
  std::vector<Arg> args;
  args.push_back(buffer_arg(random_floats(size_t(block * programs), -100, 100, 4)));
  args.push_back(poisoned(programs * 4));
  args.push_back(buffer_arg(random_floats(size_t(R * C), -100, 100, 5)));
  args.push_back(poisoned(C * 4));
  args.push_back(poisoned(programs * 4));
  run_both(arg_reductions(block, R, C), Grid{uint32_t(programs)}, args);
  auto [ci, gi] = outputs<int32_t>(args[1]);
  REQUIRE(ci == gi);
  auto [cm, gm] = outputs<int32_t>(args[3]);
  REQUIRE(cm == gm);
  auto [cs, gs] = outputs<float>(args[4]);
  require_close(cs, gs, 1e-5, 1e-3, "sum");  // 512 terms of ±100 in another order
}


TEST_CASE("codegen on the GPU: dot in a K loop (bf16, f16, f32)", "[gpu][codegen]") {
  const int64_t M = 128, N = 192, K = 96;
  for (DType dt : {BF16, DType::f16, F32}) {
    auto a = random_floats(size_t(M * K), -1, 1, 6), b = random_floats(size_t(K * N), -1, 1, 7);
    std::vector<Arg> args;
    auto narrow = [&](const std::vector<float> &v) { return dt == F32 ? buffer_arg(v) : sixty_fourths(v, dt); };
    args.push_back(narrow(a));
    args.push_back(narrow(b));
    args.push_back(poisoned(M * N * 4));
    args.push_back(int_arg(N));
    args.push_back(int_arg(K));
    run_both(matmul(64, 64, 32, dt), Grid{uint32_t(M / 64), uint32_t(N / 64)}, args);
    auto [cpu, gpu] = outputs<float>(args[2]);
    require_close(cpu, gpu, 1e-5, 1e-5, fmt::format("matmul {}", dtype_name(dt)));  // f32 fma, same order
  }
}

// Tensor-core dots (mma.sync m16n8k16) against the interpreter: every block shape in {16..128}³ that has
// an MMA layout for 4 warps, bf16 and f16, a loaded (random) accumulator, two K-loop steps, b as [K,N] and as
// trans([N,K]). Inputs are multiples of 1/64 in [-1, 1] so every product and partial sum is exact in f32: the
// GPU must match bit for bit whatever the summation order.

TEST_CASE("codegen on the GPU: dot on tensor cores for many shapes (bf16, f16, acc, loop, transposed b)", "[gpu][codegen]") {
  int cases = 0;
  for (int64_t bm : {16, 32, 64, 128})
    for (int64_t bn : {16, 32, 64, 128})
      for (int64_t bk : {16, 32, 64, 128})
          for (bool trans_b : {false, true}) {
            if (bm * bn * bk > 128 * 64 * 64) continue;  // keep the sweep quick
            DType dt = ((bm + bn + bk) / 16 + trans_b) % 2 ? BF16 : DType::f16;  // both dtypes, half the compiles
            // num_stages 1 (registers), 2 and 3 (cp.async pipeline; 3 K steps, so stages past the end are
            // zero-filled and never read)
            int stages = 1 + (cases % 3);
            const int64_t M = bm * 2, N = bn, K = bk * 3;
            uint32_t seed = uint32_t(bm * 7 + bn * 13 + bk * 17 + trans_b);
            std::vector<Arg> args = matmul_inputs(M, N, K, dt, seed);
            args.push_back(int_arg(N));
            args.push_back(int_arg(K));
            auto fn = matmul_acc(bm, bn, bk, dt, trans_b);
            bool mma = codegen::dot_uses_mma(*find_dot(fn), 4);
            run_both(fn, Grid{uint32_t(M / bm), uint32_t(N / bn)}, args, 4, stages);
            auto [cpu, gpu] = outputs<float>(args[2]);
            require_close(cpu, gpu, 0, 0, fmt::format("dot {}x{}x{} {}{} ({}, num_stages {})", bm, bn, bk,
                                                      dtype_name(dt), trans_b ? " trans_b" : "", mma ? "mma" : "fma",
                                                      stages));
            ++cases;
          }
  REQUIRE(cases > 40);
}

// 8-warp wgmma K loops over 7 K steps with 2-4 stage buffers, so the ring wraps; a copied in wgmma's row
// order and read by descriptor (256 rows: two m64 tiles per warpgroup), b [K,N] and trans([N,K]), N up to
// 256; the shapes wgmma does not take (K-major b of 32 columns, warps along N) run mma.sync. Exact inputs: the
// GPU matches the interpreter bit for bit.
TEST_CASE("codegen on the GPU: wgmma K loops reading A from stage buffers (8 warps, 2-4 stages, N up to 256)",
          "[gpu][codegen]") {
  int cases = 0, on_wgmma = 0;
  for (auto [bm, bn, bk] : {std::array<int64_t, 3>{128, 128, 64}, std::array<int64_t, 3>{128, 256, 64},
                            std::array<int64_t, 3>{128, 256, 32}, std::array<int64_t, 3>{256, 128, 64},
                            std::array<int64_t, 3>{64, 128, 64}})
    for (bool trans_b : {false, true})
      for (int stages : {2, 3, 4}) {
        DType dt = (stages + trans_b) % 2 ? BF16 : DType::f16;
        const int64_t M = bm * 2, N = bn * 2, K = bk * 7;
        uint32_t seed = uint32_t(bm + bn * 3 + bk * 5 + trans_b * 7 + stages * 11);
        std::vector<Arg> args = matmul_inputs(M, N, K, dt, seed);
        args.push_back(int_arg(N));
        args.push_back(int_arg(K));
        auto fn = matmul_acc(bm, bn, bk, dt, trans_b);
        on_wgmma += codegen::dot_fits_wgmma(*find_dot(fn), trans_b, 8);
        run_both(fn, Grid{uint32_t(M / bm), uint32_t(N / bn)}, args, 8, stages);
        auto [cpu, gpu] = outputs<float>(args[2]);
        require_close(cpu, gpu, 0, 0, fmt::format("dot {}x{}x{} {}{}, 8 warps, num_stages {}", bm, bn, bk,
                                                  dtype_name(dt), trans_b ? " trans_b" : "", stages));
        ++cases;
      }
  REQUIRE(cases == 30);
  REQUIRE(on_wgmma == 21);  // all but the K-major b of 32 columns and the 64-row tiles (3 stage counts each)
}

// The dot left running into the next iteration (codegen/place_waits.h: 4 stages or more): each iteration ends with
// wgmma.wait_group 1 and the copies run S-2 iterations ahead. K loops of 0 (the exit waits with nothing in flight;
// c comes back unchanged), 1, 2, 3 and 9 iterations, the accumulator starting from c (ordinary registers in the
// first iteration, continued in flight afterwards), b [K,N] and trans([N,K]). Exact inputs: bit for bit.
TEST_CASE("codegen on the GPU: wgmma K loops whose dot is left running into the next iteration (4-5 stages)",
          "[gpu][codegen]") {
  int cases = 0;
  for (auto [bm, bn, bk] : {std::array<int64_t, 3>{128, 128, 64}, std::array<int64_t, 3>{128, 256, 32}})
    for (bool trans_b : {false, true})
      for (int stages : {4, 5})
        for (int64_t steps : {0, 1, 2, 3, 9}) {
          if (trans_b && bk < 64) continue;  // a K-major b of 32 columns runs on mma.sync, not wgmma
          REQUIRE((bm + bn) * bk * 2 * stages <= kMaxPipelineBytes);  // else it would compile with fewer stages
          DType dt = (stages + trans_b + int(steps)) % 2 ? BF16 : DType::f16;
          const int64_t M = bm * 2, N = bn * 2, K = bk * steps;
          uint32_t seed = uint32_t(bm + bn * 3 + bk * 5 + trans_b * 7 + stages * 11 + steps * 13);
          std::vector<Arg> args = matmul_inputs(M, N, std::max<int64_t>(K, bk), dt, seed);
          args.push_back(int_arg(N));
          args.push_back(int_arg(K));
          auto fn = matmul_acc(bm, bn, bk, dt, trans_b);
          codegen::CodegenOptions opts;
          opts.arch = "sm_90a";
          opts.num_warps = 8;
          opts.num_stages = stages;
          const std::string what = fmt::format("dot {}x{}x{} {}{}, 8 warps, num_stages {}, {} K steps", bm, bn, bk,
                                               dtype_name(dt), trans_b ? " trans_b" : "", stages, steps);
          INFO(what);
          REQUIRE(codegen::compile_to_ptx(fn, opts).ptx.find("wgmma.wait_group.sync.aligned 1;") != std::string::npos);
          run_both(fn, Grid{uint32_t(M / bm), uint32_t(N / bn)}, args, 8, stages);
          auto [cpu, gpu] = outputs<float>(args[2]);
          require_close(cpu, gpu, 0, 0, what);
          ++cases;
        }
  REQUIRE(cases == 30);
}

TEST_CASE("codegen on the GPU: a masked vector staged with a K loop's dot operands matches the interpreter",
          "[gpu][codegen]") {
  // matmul_acc with a RowBias: every K step adds a per-row f32 vector, masked (other −0.75) differently from step to
  // step; pipelined (2-4 stages) it rides in the stage buffers by 4-byte cp.async. With store_back each step
  // writes the vector back where the next reads it, so it must not be copied ahead (one program, which must see
  // its own stores: the pipeline's barrier at the top of each iteration orders them before the next load; the
  // register path has none there, so store_back runs pipelined only). Sixty-fourths keep every sum exact, so the
  // GPU must match the interpreter bit for bit (both outputs: c and bias).
  int cases = 0;
  for (auto [bm, bn, bk, warps] : {std::array<int64_t, 4>{64, 64, 32, 4}, std::array<int64_t, 4>{128, 128, 64, 8},
                                   std::array<int64_t, 4>{64, 128, 64, 4}})
    for (int stages : {1, 2, 3, 4})
      for (bool store_back : {false, true}) {
        if (store_back && stages == 1) continue;
        DType dt = stages % 2 ? BF16 : DType::f16;
        const int64_t M = bm * 2, N = bn * 2, K = bk * 7;
        uint32_t seed = uint32_t(bm + bn * 3 + bk * 5 + stages * 11 + warps * 13);
        auto bias = random_floats(size_t(M + 7), -2, 2, seed + 4);
        for (auto &x : bias) x = std::round(x * 64) / 64;
        std::vector<Arg> args = matmul_inputs(M, N, K, dt, seed);
        args.push_back(buffer_arg(bias));
        args.push_back(int_arg(N));
        args.push_back(int_arg(K));
        auto fn = matmul_acc(bm, bn, bk, dt, false, store_back ? RowBias::AddAndStoreBack : RowBias::Add);
        codegen::CodegenOptions opts;
        opts.arch = "sm_90a";
        opts.num_warps = int(warps);
        opts.num_stages = stages;
        const std::string ptx = codegen::compile_to_ptx(fn, opts).ptx;
        REQUIRE((ptx.find("cp.async.ca.shared.global") != std::string::npos) == (stages > 1 && !store_back));
        // With store_back one program: programs of other blocks would race on the bias rows they share.
        const Grid grid = store_back ? Grid{1, 1} : Grid{uint32_t(M / bm), uint32_t(N / bn)};
        run_both(fn, grid, args, int(warps), stages);
        const std::string what = fmt::format("row bias {}x{}x{} {}, {} warps, num_stages {}{}", bm, bn, bk,
                                             dtype_name(dt), warps, stages, store_back ? ", stored back" : "");
        auto [cpu, gpu] = outputs<float>(args[2]);
        require_close(cpu, gpu, 0, 0, what);
        auto [cpu_bias, gpu_bias] = outputs<float>(args[3]);
        require_close(cpu_bias, gpu_bias, 0, 0, what + ": bias");
        ++cases;
      }
  REQUIRE(cases == 21);
}

TEST_CASE("codegen on the GPU: if, casts, atomics, math, transpose/reshape", "[gpu][codegen]") {
  {
    std::vector<Arg> args;
    args.push_back(buffer_arg(random_floats(256 * 4, -5, 5, 8)));
    args.push_back(poisoned(256 * 4 * 4));
    run_both(branchy(), Grid{4}, args);
    auto [cpu, gpu] = outputs<float>(args[1]);
    require_close(cpu, gpu, 0, 0, "branchy");
  }
  {
    std::vector<Arg> args;
    args.push_back(buffer_arg(random_floats(128, -100, 100, 9)));
    args.push_back(poisoned(128 * 64 * 4));
    run_both(casts(), Grid{1}, args);
    auto [cpu, gpu] = outputs<float>(args[1]);
    require_close(cpu, gpu, 0, 0, "casts");
  }
  {
    std::vector<Arg> args;
    args.push_back(buffer_arg(random_floats(64, -10, 10, 10)));
    std::vector<int32_t> cnt(64);
    for (int i = 0; i < 64; ++i) cnt[size_t(i)] = i * 7 - 100;
    args.push_back(buffer_arg(cnt));
    args.push_back(poisoned(128 * 4));
    args.push_back(int_arg(50));
    run_both(atomics(), Grid{1}, args);
    auto [ca, ga] = outputs<float>(args[0]);
    require_close(ca, ga, 0, 0, "atomic accumulators");
    auto [cc, gc] = outputs<int32_t>(args[1]);
    REQUIRE(cc == gc);
    auto [co, go] = outputs<uint32_t>(args[2]);
    for (int i : {0, 1, 49, 100}) {
      INFO("old value " << i);
      REQUIRE(co[size_t(i)] == go[size_t(i)]);
    }
  }
  for (DType dt : {F32, BF16}) {
    std::vector<Arg> args;
    args.push_back(buffer_arg(random_floats(256, 0.25f, 4.0f, 11)));
    args.push_back(poisoned(256 * unary_math_ops().size() * 4));
    run_both(unary_math(dt), Grid{1}, args, 2);
    auto [cpu, gpu] = outputs<float>(args[1]);
    // PTX approximations: ex2/lg2 ≈ 2 ulp, tanh.approx ≈ 2^-11 relative; bf16 results ≤ 1 bf16 ulp apart.
    require_close(cpu, gpu, dt == BF16 ? 8e-3 : 1e-3, 1e-6, fmt::format("unary math {}", dtype_name(dt)));
  }
  {
    std::vector<Arg> args;
    args.push_back(buffer_arg(random_floats(16 * 32, -1, 1, 12)));
    args.push_back(poisoned(16 * 32 * 4));
    run_both(transpose_reshape(16, 32), Grid{1}, args);
    auto [cpu, gpu] = outputs<float>(args[1]);
    require_close(cpu, gpu, 0, 0, "transpose + reshape");
  }
}

TEST_CASE("codegen on the GPU: index_to_f32 of positions matches the interpreter bit for bit", "[gpu][codegen]") {
  const int64_t M = 64, N = 64;
  std::mt19937 gen(13);
  std::uniform_int_distribution<int32_t> d(-(1 << 23), 1 << 23);  // |values| < 2^24: every step exact
  std::vector<int32_t> x(M);
  for (auto &v : x) v = d(gen);
  for (int32_t S : {d(gen), -d(gen), 0}) {
    std::vector<Arg> args;
    args.push_back(buffer_arg(x));
    args.push_back(poisoned(5 * M * N * 4));
    args.push_back(int_arg(S));
    run_both(index_floats(M, N), Grid{1}, args);
    auto [cpu, gpu] = outputs<float>(args[1]);
    require_close(cpu, gpu, 0, 0, fmt::format("index_to_f32 with S = {}", S));
    REQUIRE(cpu[size_t(1 * N + 2)] == float(S + 1 - 2));  // the oracle itself: output 0 at row 1, column 2
  }
}

TEST_CASE("codegen on the GPU: fma_index, split and folded into max, fma and where, matches the interpreter",
          "[gpu][codegen]") {
  // Distances |x − column| < 2^11 and |a| ≤ 0.75, so every part of the split, a·f32(x − C_r), s + a·C_r and
  // the sum, is below 2^11: each of the split's up to three extra roundings is ≤ 2^-13 (half an ulp there),
  // bound 4·2^-13 for z and its row max. fma(z, c, −m) with c < 2: twice that (z and m) times c, plus two
  // roundings of c·t < 2^12 (2^-12 each): 3e-3. The dot's f32 sums (16 f16 products ≤ 1) differ by < 2^-16.
  const int64_t M = 64, N = 64;
  const double tol_z = 4 * 0x1p-13, tol_fma = 3e-3;
  for (bool from_dot : {false, true}) {
    INFO((from_dot ? "s from a dot (tensor-core layout)" : "s loaded (blocked layout)"));
    std::mt19937 gen(from_dot ? 17 : 19);
    std::vector<int32_t> x(M);
    for (auto &v : x) v = std::uniform_int_distribution<int32_t>(-2000, 2000)(gen);
    std::vector<uint16_t> a16(M * 16), b16(16 * N);
    auto to_half = [](float v) { return std::bit_cast<uint16_t>(static_cast<_Float16>(v)); };
    for (auto &h : a16) h = to_half(std::uniform_real_distribution<float>(-1, 1)(gen));
    for (auto &h : b16) h = to_half(std::uniform_real_distribution<float>(-1, 1)(gen));
    const float a = std::uniform_real_distribution<float>(0.25f, 0.75f)(gen) * (from_dot ? -1 : 1);
    const float c = std::uniform_real_distribution<float>(1.f, 2.f)(gen);
    const int32_t K = 37;  // where: columns ≥ K are −inf
    std::vector<Arg> args;
    args.push_back(buffer_arg(x));
    if (from_dot) args.push_back(buffer_arg(a16));
    else args.push_back(buffer_arg(random_floats(M * N, -16, 16, 23)));
    args.push_back(buffer_arg(b16));
    args.push_back(poisoned(size_t(index_fma_outputs(M, N)) * 4));
    args.push_back(float_arg(a));
    args.push_back(int_arg(K));
    args.push_back(float_arg(c));
    run_both(index_fma(M, N, from_dot), Grid{1}, args);
    auto [cpu, gpu] = outputs<float>(args[3]);
    auto part = [&](size_t begin, size_t n) {
      return std::pair{std::vector<float>(cpu.begin() + long(begin), cpu.begin() + long(begin + n)),
                       std::vector<float>(gpu.begin() + long(begin), gpu.begin() + long(begin + n))};
    };
    const size_t mn = size_t(M * N), m = size_t(M);
    auto [z_c, z_g] = part(0, mn);
    require_close(z_c, z_g, 0, tol_z, "z = fma_index(x − column, a, s)");
    auto [m_c, m_g] = part(mn, m);
    require_close(m_c, m_g, 0, tol_z, "max(z, 1)");
    auto [e_c, e_g] = part(mn + m, mn);
    require_close(e_c, e_g, 0, tol_fma, "fma(z, c, −max(z, 1))");
    auto [w_c, w_g] = part(2 * mn + m, m);
    require_close(w_c, w_g, 0, tol_z, "max(where(column < K, z, −inf), 1)");
    auto [we_c, we_g] = part(2 * mn + 2 * m, mn);
    require_close(we_c, we_g, 0, tol_fma, "fma(w, c, −max(w, 1)), −inf where masked");
    REQUIRE(std::isinf(we_c[size_t(K)]));  // row 0, column K: masked
    auto [r_c, r_g] = part(3 * mn + 2 * m, size_t(N));
    require_close(r_c, r_g, 0, tol_z, "max(z, 0) (across rows, unsplit)");
    if (!from_dot) {  // the oracle itself: z is the one-rounding fma of the converted distance
      std::vector<float> sv = random_floats(M * N, -16, 16, 23);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j)
          REQUIRE(z_c[size_t(i * N + j)] == std::fma(float(x[size_t(i)] - int32_t(j)), a, sv[size_t(i * N + j)]));
    }
  }
}

// The cp.async pipeline (codegen/pipeline.h) in attention: K and V tiles go global→shared directly, masked
// rows past seqlen_k are zero-filled, stages past the loop's end are never read. Each config (BLOCK_M,
// BLOCK_N, num_warps, num_stages) against the interpreter on the same inputs; both round p to the input
// dtype before P·V, so they differ by exp2 approximations and summation order: relative error ≤ 1e-2.
TEST_CASE("codegen on the GPU: pipelined attention (num_stages 1-3, several blocks) matches the interpreter",
          "[gpu][codegen][pipeline]") {
  struct Config { int bm, bn, warps, stages; };
  const Config configs[] = {{64, 64, 4, 1}, {64, 64, 4, 2}, {64, 64, 4, 3}, {128, 64, 8, 2},
                            {128, 32, 8, 3}, {64, 128, 4, 2}, {128, 128, 8, 2}};
  using tilejit::testing::download_as_float, tilejit::testing::random_values, tilejit::testing::rel_error,
      tilejit::testing::upload_as;
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      attention::Shape s{1, 2, causal ? 150 : 100, causal ? 150 : 290, d};
      DType dt = causal ? DType::f16 : DType::bf16;
      size_t nq = size_t(s.heads) * s.seqlen_q * d, nk = size_t(s.heads) * s.seqlen_k * d;
      auto q = random_values(nq, dt), k = random_values(nk, dt), v = random_values(nk, dt);
      auto run = [&](Backend be, const Config &c) {
        auto bq = upload_as(q, dt, be), bk = upload_as(k, dt, be), bv = upload_as(v, dt, be);
        Buffer out(nq * 2, be), lse(size_t(s.heads) * s.seqlen_q * 4, be);
        out.fill_bytes(0xff);
        attention::Options opt;
        opt.causal = causal;
        opt.dtype = dt;
        opt.backend = be;
        opt.block_m = c.bm;
        opt.block_n = c.bn;
        opt.num_warps = c.warps;
        opt.num_stages = c.stages;
        attention::forward(bq, bk, bv, out, lse, s, opt);
        return download_as_float(out, nq, dt);
      };
      auto cpu = run(Backend::Interpreter, configs[1]);
      std::vector<double> ref(cpu.begin(), cpu.end());
      for (const Config &c : configs) {
        auto gpu = run(Backend::GPU, c);
        for (size_t i = 0; i < nq; ++i) {
          INFO("output element " << i << " was not written or is not finite");
          REQUIRE(std::isfinite(gpu[i]));
        }
        double err = rel_error(gpu, ref);
        INFO("d" << d << (causal ? " causal" : "") << " BLOCK_M " << c.bm << " BLOCK_N " << c.bn << " warps "
                 << c.warps << " stages " << c.stages << ": GPU vs interpreter rel error " << err);
        REQUIRE(err <= 1e-2);
      }
    }
}
