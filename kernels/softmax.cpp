// Fused row softmax: one program per row; the row is loaded once, max-subtracted for stability, and
// written once (one read + one write of the matrix instead of the unfused version's several passes).
#include <limits>

#include "tilejit/error.h"
#include "tilejit/kernel.h"
#include "kernels/builtins.h"
#include "tilejit/kernels.h"
#include "tilejit/ops.h"

namespace tilejit::kernels {

template <class T>
auto &softmax_kernel() {
  static auto kernel = Kernel("softmax", [](Ptr<T> in, Ptr<T> out, I32 cols, I32 row_stride, Constexpr<int> BLOCK) {
    auto row = program_id(0);
    auto offs = arange(0, BLOCK);
    auto mask = offs < cols;
    auto x = load(in + row * row_stride + offs, mask, -std::numeric_limits<float>::infinity()).to(DType::f32);
    auto z = x - max(x, 0);
    auto e = exp(z);
    auto y = e / sum(e, 0);
    store(out + row * row_stride + offs, y.to(T::dtype), mask);
  }, {"in", "out", "cols", "row_stride", "BLOCK"});
  return kernel;
}

template <class T>
void softmax_t(const Buffer &in, Buffer &out, int rows, int cols, const LaunchConfig &cfg) {
  const int block = std::max(16, int(autotune::pow2_bucket(cols)));
  softmax_kernel<T>().launch(Grid{uint32_t(rows)}, cfg, in, out, cols, cols, block);
}

void softmax(const Buffer &in, Buffer &out, int rows, int cols, DType dtype, const LaunchConfig &cfg) {
  if (cols <= 0 || cols > 16384) throw TraceError("softmax: cols must be in [1, 16384], got " + std::to_string(cols));
  if (rows <= 0) return;
  switch (dtype) {
    case DType::f32: return softmax_t<f32>(in, out, rows, cols, cfg);
    case DType::f16: return softmax_t<f16>(in, out, rows, cols, cfg);
    case DType::bf16: return softmax_t<bf16>(in, out, rows, cols, cfg);
    default: throw TraceError("softmax: dtype must be f32, f16 or bf16");
  }
}

template <class T>
std::string softmax_text_t(const BuiltinSpec &spec, Render what) {
  DevicePtr p{};
  auto &k = softmax_kernel<T>();
  int block = std::max(16, int(autotune::pow2_bucket(spec.cols)));
  if (what == Render::IR) return k.ir(p, p, spec.cols, spec.cols, block);
  return k.ptx(ptx_config(spec), p, p, spec.cols, spec.cols, block).ptx;
}

std::string softmax_text(const BuiltinSpec &spec, Render what) {
  switch (spec.dtype) {
    case DType::f32: return softmax_text_t<f32>(spec, what);
    case DType::f16: return softmax_text_t<f16>(spec, what);
    default: return softmax_text_t<bf16>(spec, what);
  }
}

}  // namespace tilejit::kernels
