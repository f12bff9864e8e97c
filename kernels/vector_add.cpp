// out = x + y, the "hello world" of block programs: each program handles BLOCK contiguous elements and
// masks the tail.
#include "tilejit/kernel.h"
#include "kernels/builtins.h"
#include "tilejit/kernels.h"
#include "tilejit/ops.h"

namespace tilejit::kernels {

auto &vector_add_kernel() {
  static auto kernel = Kernel("vector_add", [](Ptr<f32> x, Ptr<f32> y, Ptr<f32> out, I32 n, Constexpr<int> BLOCK) {
    auto offs = program_id(0) * BLOCK + arange(0, BLOCK);
    auto mask = offs < n;
    store(out + offs, load(x + offs, mask, 0.f) + load(y + offs, mask, 0.f), mask);
  }, {"x", "y", "out", "n", "BLOCK"});
  return kernel;
}

void vector_add(const Buffer &x, const Buffer &y, Buffer &out, int64_t n, const LaunchConfig &cfg, int block) {
  if (n <= 0) return;
  Grid grid{uint32_t((n + block - 1) / block)};
  vector_add_kernel().launch(grid, cfg, x, y, out, n, block);
}

std::string vector_add_text(const BuiltinSpec &spec, Render what) {
  DevicePtr p{};
  auto &k = vector_add_kernel();
  if (what == Render::IR) return k.ir(p, p, p, 1 << 20, spec.block);
  return k.ptx(ptx_config(spec), p, p, p, 1 << 20, spec.block).ptx;
}

}  // namespace tilejit::kernels
