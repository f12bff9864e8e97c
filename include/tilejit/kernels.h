// Small kernels written in the DSL (examples of the programming model and GPU tests of the compiler).
// All tensors are contiguous row-major buffers on the backend that runs the launch.
#pragma once
#include <cstdint>
#include <string>

#include "tilejit/autotune.h"
#include "tilejit/buffer.h"
#include "tilejit/launch.h"
#include "tilejit/types.h"

namespace tilejit::kernels {

/// out[i] = x[i] + y[i] for i < n; f32. One program per `block` elements (power of two).
void vector_add(const Buffer &x, const Buffer &y, Buffer &out, int64_t n, const LaunchConfig &cfg,
                int block = 1024);

/// out[r, :] = softmax(in[r, :]) over rows of `cols` elements (computed in f32); dtype f32, f16 or bf16
/// for both. One program per row; the row must fit one tile (cols ≤ 16384).
void softmax(const Buffer &in, Buffer &out, int rows, int cols, DType dtype, const LaunchConfig &cfg);

struct MatmulBlocks { int m = 64, n = 64, k = 32; };
/// c[M,N] = a[M,K] · b[K,N], f32 accumulation, c in the same dtype as a and b (f16, bf16 or f32 — f32
/// computes exactly in f32, no tf32). One program per BLOCK_M×BLOCK_N tile of c.
void matmul(const Buffer &a, const Buffer &b, Buffer &c, int M, int N, int K, DType dtype,
            const LaunchConfig &cfg, MatmulBlocks blocks = {});

/// matmul on raw pointers (memory the caller owns, e.g. PyTorch tensors; DevicePtr::bytes 0 = unchecked).
void matmul(DevicePtr a, DevicePtr b, DevicePtr c, int M, int N, int K, DType dtype, const LaunchConfig &cfg,
            MatmulBlocks blocks = {});
/// Traces, compiles and loads the matmul for these arguments on the GPU without launching it, and returns
/// what the driver reports (registers, dynamic shared memory, threads): the autotuner's pruning input.
autotune::Compiled matmul_compile(DevicePtr a, DevicePtr b, DevicePtr c, int M, int N, int K, DType dtype,
                                  const LaunchConfig &cfg, MatmulBlocks blocks);

/// Names of the built-in kernels that `tilejit ir` / `tilejit ptx` know.
/// "vector_add", "softmax", "matmul", "attention".
struct BuiltinSpec {
  DType dtype = DType::bf16;
  int head_dim = 64;
  bool causal = false;
  int block_m = 64, block_n = 64, block_k = 32;
  int cols = 1024;       // softmax row length
  int block = 1024;      // vector_add block
  int num_warps = 4;
  int num_stages = 2;    // software pipeline depth of loops' tensor-core operand loads (1: none)
  int min_ctas_per_sm = 0;  // > 0: registers capped so this many programs fit on one SM (.minnctapersm)
  bool tma = false;         // LaunchConfig::tma
  bool warp_specialize = false;  // LaunchConfig::warp_specialize
  std::string arch = "sm_90a";
};
/// IR text or PTX text of a named built-in kernel; throws Error for an unknown name.
std::string builtin_ir(const std::string &name, const BuiltinSpec &spec);
/// Whether `name` is one of the built-in kernels builtin_ir and builtin_ptx render.
bool is_builtin(const std::string &name);
std::string builtin_ptx(const std::string &name, const BuiltinSpec &spec);

}  // namespace tilejit::kernels
