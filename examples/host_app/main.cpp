// A program built against the installed tilejit package: defines a kernel, runs it (on the GPU when
// there is one, else on the CPU interpreter; TILEJIT_INTERPRET=1 forces the interpreter) and checks it.
#include <tilejit/tilejit.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

using namespace tilejit;

int main() {
  // out[i] = alpha * x[i] + y[i]
  auto axpy = Kernel("axpy", [](Ptr<f32> x, Ptr<f32> y, Ptr<f32> out, F32 alpha, I32 n, Constexpr<int> BLOCK) {
    auto offs = program_id(0) * BLOCK + arange(0, BLOCK);
    auto mask = offs < n;
    store(out + offs, alpha * load(x + offs, mask, 0.f) + load(y + offs, mask, 0.f), mask);
  });

  const int n = 5000;  // not a multiple of BLOCK: the mask matters
  const float alpha = 0.75f;
  Backend where = resolve_backend(Backend::Auto);
  if (where == Backend::GPU && !gpu_available()) where = Backend::Interpreter;

  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> hx(n), hy(n);
  for (int i = 0; i < n; ++i) hx[i] = dist(rng), hy[i] = dist(rng);

  Buffer x(n * sizeof(float), where), y(n * sizeof(float), where), out(n * sizeof(float), where);
  x.upload(hx);
  y.upload(hy);
  out.fill_bytes(0xFF);  // NaN: an element the kernel misses fails the check
  axpy.launch(Grid{uint32_t((n + 255) / 256)}, LaunchConfig{.num_warps = 4, .backend = where}, x, y, out, alpha,
              n, 256);

  std::vector<float> got = out.download_as<float>(n);
  for (int i = 0; i < n; ++i) {
    float want = alpha * hx[i] + hy[i];
    // f32: the GPU may fuse into one fma; allow a few ulps.
    if (!(std::fabs(got[i] - want) <= 1e-6f * (1.f + std::fabs(want)))) {
      std::printf("host_app: mismatch at %d: got %g, want %g\n", i, got[i], want);
      return 1;
    }
  }
  std::printf("host_app: axpy of %d elements on the %s: ok\n", n, where == Backend::GPU ? "GPU" : "interpreter");
  return 0;
}
