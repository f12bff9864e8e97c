// A kernel written in the DSL and launched on the GPU, or on the CPU interpreter when there is no GPU.
#include <tilejit/tilejit.h>

#include <cstdio>
#include <vector>

using namespace tilejit;

int main() {
  auto add = Kernel("add", [](Ptr<f32> x, Ptr<f32> y, Ptr<f32> out, I32 n, Constexpr<int> BLOCK) {
    auto offs = program_id(0) * BLOCK + arange(0, BLOCK);
    auto mask = offs < n;
    store(out + offs, load(x + offs, mask, 0.f) + load(y + offs, mask, 0.f), mask);
  });

  const int n = 100000;
  Backend where = gpu_available() ? Backend::GPU : Backend::Interpreter;
  std::vector<float> hx(n), hy(n);
  for (int i = 0; i < n; ++i) hx[i] = 0.5f * i, hy[i] = 1.0f - i;
  Buffer x(n * 4, where), y(n * 4, where), out(n * 4, where);
  x.upload(hx);
  y.upload(hy);
  add.launch(Grid{uint32_t(cdiv(n, 1024))}, LaunchConfig{.num_warps = 4, .backend = where}, x, y, out, n, 1024);
  auto ho = out.download_as<float>(n);
  for (int i = 0; i < n; ++i)
    if (ho[i] != hx[i] + hy[i]) {
      std::printf("mismatch at %d: %f vs %f\n", i, ho[i], hx[i] + hy[i]);
      return 1;
    }
  std::printf("vector add of %d elements on the %s: ok\n", n, where == Backend::GPU ? "GPU" : "interpreter");
  return 0;
}
