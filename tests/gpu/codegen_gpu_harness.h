// The harness of the codegen GPU tests: one kernel's arguments given to both backends (the CPU interpreter,
// the oracle, and the GPU), run on both over the same initial bytes, and compared elementwise.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"
#include "interp/interpreter.h"
#include "kernel_args.h"
#include "ir/ir.h"
#include "runtime/codegen_options.h"
#include "runtime/module.h"
#include "runtime/runtime.h"
#include "tilejit/buffer.h"

namespace tilejit::gpu_testing {

/// One kernel argument given on both backends: a buffer with the same initial bytes, or a scalar.
struct Arg {
  std::vector<uint8_t> init;  // buffer contents (empty: scalar)
  KernelArg scalar;
  Buffer gpu, cpu;
};

inline Arg buffer_arg(const void *data, size_t bytes) {
  Arg a;
  a.init.assign(static_cast<const uint8_t *>(data), static_cast<const uint8_t *>(data) + bytes);
  return a;
}
template <class T> Arg buffer_arg(const std::vector<T> &v) { return buffer_arg(v.data(), v.size() * sizeof(T)); }
inline Arg poisoned(size_t bytes) {
  std::vector<uint8_t> p(bytes, 0xff);
  return buffer_arg(p);
}
inline Arg int_arg(int64_t v) { return Arg{.init = {}, .scalar = test_args::int_arg(v), .gpu = {}, .cpu = {}}; }
inline Arg float_arg(double v) { return Arg{.init = {}, .scalar = test_args::float_arg(v), .gpu = {}, .cpu = {}}; }

inline std::vector<float> random_floats(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto &x : v) x = d(gen);
  return v;
}

/// Runs fn on the interpreter and on the GPU; afterwards arg.cpu / arg.gpu hold each backend's buffers. With
/// `plan` (made for the device's arch, num_warps and num_stages), the GPU runs the code lowered with that plan.
inline void run_both(const ir::Function &fn, Grid grid, std::vector<Arg> &args, int num_warps = 4, int num_stages = 1,
                     const codegen::LoweringPlan *plan = nullptr) {
  for (Backend be : {Backend::Interpreter, Backend::GPU}) {
    std::vector<KernelArg> ka;
    for (auto &a : args) {
      if (a.init.empty()) {
        ka.push_back(a.scalar);
        continue;
      }
      Buffer &buf = be == Backend::GPU ? a.gpu : a.cpu;
      buf = Buffer(a.init.size(), be);
      buf.upload(a.init.data(), a.init.size());
      KernelArg k;
      k.kind = KernelArg::Kind::Ptr;
      k.ptr = buf.address();
      k.bytes = a.init.size();
      ka.push_back(k);
    }
    if (be == Backend::Interpreter) {
      interp::run(fn, grid, ka);
    } else {
      LaunchConfig cfg;
      cfg.num_warps = num_warps;
      cfg.num_stages = num_stages;
      if (plan) {
        cfg.arch = runtime::device_arch();
        const codegen::PtxResult ptx = codegen::compile_to_ptx(fn, runtime::codegen_options(cfg), plan);
        const runtime::LoadedKernel k = runtime::load_kernel({ptx.entry, ptx.shared_bytes, ptx.num_threads, ptx.ptx});
        runtime::launch(k, grid, fn.params, ka, nullptr);
      } else {
        const auto &k = runtime::get_kernel(fn, cfg);
        runtime::launch(k, grid, fn.params, ka, nullptr);
      }
    }
  }
}

template <class T> std::pair<std::vector<T>, std::vector<T>> outputs(const Arg &a) {
  size_t n = a.init.size() / sizeof(T);
  return {a.cpu.download_as<T>(n), a.gpu.download_as<T>(n)};
}

/// |gpu - cpu| ≤ atol + rtol·|cpu| elementwise. NaN (the 0xff poison) must be on both sides, and only
/// where the kernel leaves elements unwritten (`unwritten_ok`): otherwise both backends skipping a store
/// would pass unnoticed.
inline void require_close(const std::vector<float> &cpu, const std::vector<float> &gpu, double rtol, double atol,
                   const std::string &what, bool unwritten_ok = false) {
  REQUIRE(cpu.size() == gpu.size());
  size_t written = 0;
  for (size_t i = 0; i < cpu.size(); ++i) written += !std::isnan(cpu[i]);
  INFO(what << ": " << written << " of " << cpu.size() << " elements written by the interpreter");
  REQUIRE(written > 0);
  if (!unwritten_ok) REQUIRE(written == cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (std::isnan(cpu[i]) || std::isnan(gpu[i])) {
      INFO(what << " element " << i << ": interpreter " << cpu[i] << ", GPU " << gpu[i]);
      REQUIRE((std::isnan(cpu[i]) && std::isnan(gpu[i])));
      continue;
    }
    if (std::isinf(cpu[i]) || std::isinf(gpu[i])) {
      INFO(what << " element " << i << ": interpreter " << cpu[i] << ", GPU " << gpu[i]);
      REQUIRE(cpu[i] == gpu[i]);
      continue;
    }
    double err = std::abs(double(gpu[i]) - double(cpu[i])), bound = atol + rtol * std::abs(double(cpu[i]));
    if (err > bound) {
      INFO(what << " element " << i << ": interpreter " << cpu[i] << ", GPU " << gpu[i] << ", error " << err
                << " > " << bound);
      REQUIRE(err <= bound);
    }
  }
}

/// v rounded to multiples of 1/64 as 16-bit dt (bf16 or f16): exact there, and every product and partial sum of
/// such values in [-1, 1] is exact in f32 over a few hundred terms.
inline Arg sixty_fourths(const std::vector<float> &v, DType dt) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    float q = std::round(v[i] * 64) / 64;
    if (dt == DType::bf16) {
      uint32_t bits;
      std::memcpy(&bits, &q, 4);
      h[i] = uint16_t(bits >> 16);
    } else {
      _Float16 f = static_cast<_Float16>(q);
      std::memcpy(&h[i], &f, 2);
    }
  }
  return buffer_arg(h);
}

/// matmul_acc's first three arguments on fresh random inputs: a [M,K] and b [K,N] (or its transpose) in
/// sixty-fourths of dt, c [M,N] in f32 sixty-fourths, so that every product and sum is exact.
inline std::vector<Arg> matmul_inputs(int64_t M, int64_t N, int64_t K, DType dt, uint32_t seed) {
  auto c0 = random_floats(size_t(M * N), -4, 4, seed + 3);
  for (auto &x : c0) x = std::round(x * 64) / 64;
  std::vector<Arg> args;
  args.push_back(sixty_fourths(random_floats(size_t(M * K), -1, 1, seed), dt));
  args.push_back(sixty_fourths(random_floats(size_t(K * N), -1, 1, seed + 1), dt));
  args.push_back(buffer_arg(c0));
  return args;
}

}  // namespace tilejit::gpu_testing
