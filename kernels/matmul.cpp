// Tiled matmul: one program per BLOCK_M×BLOCK_N tile of c, a K loop accumulating dot products in f32.
#include "tilejit/error.h"
#include "tilejit/kernel.h"
#include "kernels/builtins.h"
#include "tilejit/kernels.h"
#include "tilejit/ops.h"
#include "runtime/autotune_device.h"
#include "runtime/runtime.h"

namespace tilejit::kernels {

template <class T>
auto &matmul_kernel() {
  static auto kernel = Kernel("matmul", [](Ptr<T> a, Ptr<T> b, Ptr<T> c, I32 M, I32 N, I32 K, I32 lda, I32 ldb,
                                           I32 ldc, Constexpr<int> BLOCK_M, Constexpr<int> BLOCK_N,
                                           Constexpr<int> BLOCK_K) {
    auto offs_m = program_id(0) * BLOCK_M + arange(0, BLOCK_M);
    auto offs_n = program_id(1) * BLOCK_N + arange(0, BLOCK_N);
    auto offs_k = arange(0, BLOCK_K);
    auto acc = zeros({BLOCK_M, BLOCK_N}, DType::f32);
    for_range(0, K, BLOCK_K, [&](I32 k0) {
      auto ks = k0 + offs_k;
      auto a_tile = load(a + offs_m(_, None) * lda + ks(None, _), (offs_m(_, None) < M) & (ks(None, _) < K), 0.f);
      auto b_tile = load(b + ks(_, None) * ldb + offs_n(None, _), (ks(_, None) < K) & (offs_n(None, _) < N), 0.f);
      acc = dot(a_tile, b_tile, acc);
    });
    auto mask = (offs_m(_, None) < M) & (offs_n(None, _) < N);
    store(c + offs_m(_, None) * ldc + offs_n(None, _), acc.to(T::dtype), mask);
  }, {"a", "b", "c", "M", "N", "K", "lda", "ldb", "ldc", "BLOCK_M", "BLOCK_N", "BLOCK_K"});
  return kernel;
}

template <class T, class P>
void matmul_t(const P &a, const P &b, const P &c, int M, int N, int K, const LaunchConfig &cfg, MatmulBlocks bl) {
  Grid grid{uint32_t((M + bl.m - 1) / bl.m), uint32_t((N + bl.n - 1) / bl.n)};
  matmul_kernel<T>().launch(grid, cfg, a, b, c, M, N, K, K, N, N, bl.m, bl.n, bl.k);
}

// Calls f(T{}) for the element type of `dtype` (f32, f16 or bf16).
template <class F>
decltype(auto) with_dtype(DType dtype, int M, int N, int K, F &&f) {
  if (M <= 0 || N <= 0 || K <= 0) throw TraceError("matmul: M, N, K must be positive");
  switch (dtype) {
    case DType::f32: return f(f32{});
    case DType::f16: return f(f16{});
    case DType::bf16: return f(bf16{});
    default: throw TraceError("matmul: dtype must be f32, f16 or bf16");
  }
}

void matmul(const Buffer &a, const Buffer &b, Buffer &c, int M, int N, int K, DType dtype, const LaunchConfig &cfg,
            MatmulBlocks blocks) {
  with_dtype(dtype, M, N, K, [&](auto t) { matmul_t<decltype(t)>(a, b, c, M, N, K, cfg, blocks); });
}

void matmul(DevicePtr a, DevicePtr b, DevicePtr c, int M, int N, int K, DType dtype, const LaunchConfig &cfg,
            MatmulBlocks blocks) {
  with_dtype(dtype, M, N, K, [&](auto t) { matmul_t<decltype(t)>(a, b, c, M, N, K, cfg, blocks); });
}

autotune::Compiled matmul_compile(DevicePtr a, DevicePtr b, DevicePtr c, int M, int N, int K, DType dtype,
                                  const LaunchConfig &cfg, MatmulBlocks bl) {
  return with_dtype(dtype, M, N, K, [&](auto t) {
    const ir::Function &fn = matmul_kernel<decltype(t)>().function(a, b, c, M, N, K, K, N, N, bl.m, bl.n, bl.k);
    const runtime::LoadedKernel &k = runtime::get_kernel(fn, cfg);
    return autotune::compiled_of(k);
  });
}

template <class T>
std::string matmul_text_t(const BuiltinSpec &spec, Render what) {
  DevicePtr p{};
  auto &k = matmul_kernel<T>();
  int n = 4096;
  if (what == Render::IR) return k.ir(p, p, p, n, n, n, n, n, n, spec.block_m, spec.block_n, spec.block_k);
  return k.ptx(ptx_config(spec), p, p, p, n, n, n, n, n, n, spec.block_m, spec.block_n, spec.block_k).ptx;
}

std::string matmul_text(const BuiltinSpec &spec, Render what) {
  switch (spec.dtype) {
    case DType::f32: return matmul_text_t<f32>(spec, what);
    case DType::f16: return matmul_text_t<f16>(spec, what);
    default: return matmul_text_t<bf16>(spec, what);
  }
}

}  // namespace tilejit::kernels
