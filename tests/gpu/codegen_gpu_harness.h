// The harness of the codegen GPU tests: one kernel's arguments given to both backends (the CPU interpreter,
// the oracle, and the GPU), run on both over the same initial bytes, and compared elementwise.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "interp/interpreter.h"
#include "kernel_args.h"
#include "ir/ir.h"
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

/// Runs fn on the interpreter and on the GPU; afterwards arg.cpu / arg.gpu hold each backend's buffers.
inline void run_both(const ir::Function &fn, Grid grid, std::vector<Arg> &args, int num_warps = 4, int num_stages = 1) {
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
      const auto &k = runtime::get_kernel(fn, cfg);
      runtime::launch(k, grid, fn.params, ka, nullptr);
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

}  // namespace tilejit::gpu_testing
