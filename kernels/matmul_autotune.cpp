// Autotuned matmul on raw pointers, kernels/matmul_autotune.h.
#include "kernels/matmul_autotune.h"

#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "kernels/autotune_prior.h"
#include "runtime/autotune_device.h"
#include "runtime/runtime.h"
#include "tilejit/buffer.h"
#include "tilejit/error.h"

namespace tilejit::kernels {
namespace {

autotune::WinnerMemo g_winners;

MatmulBlocks blocks(const autotune::Config &c) { return {c.get("BLOCK_M"), c.get("BLOCK_N"), c.get("BLOCK_K")}; }

}  // namespace

LaunchConfig matmul_launch_config(const autotune::Config &c, const std::string &arch, Stream *stream) {
  LaunchConfig cfg;
  cfg.num_warps = c.num_warps;
  cfg.num_stages = c.num_stages;
  cfg.backend = Backend::GPU;
  cfg.stream = stream;
  cfg.arch = arch;
  return cfg;
}

std::vector<autotune::Config> matmul_candidates(DType dtype) {
  std::vector<autotune::Config> cs = autotune::cartesian(
      {{"BLOCK_M", {64, 128}}, {"BLOCK_N", {64, 128, 256}}, {"BLOCK_K", {32, 64}}}, {4, 8}, {1, 2, 3, 4});
  // A 16-bit config whose stage buffers outgrow the pipeline's budget compiles to its twin with fewer stages.
  if (dtype != DType::f32)
    std::erase_if(cs, [](const autotune::Config &c) {
      return c.num_stages > 2 &&
             int64_t(c.num_stages) * (c.get("BLOCK_M") + c.get("BLOCK_N")) * c.get("BLOCK_K") * 2 >
                 kMaxPipelineBytes;
    });
  return cs;
}

void matmul_autotuned(DevicePtr a, DevicePtr b, DevicePtr c, int M, int N, int K, DType dtype, Stream *stream,
                      const autotune::Settings &settings, autotune::Result *result, autotune::Config *chosen) {
  if (M <= 0 || N <= 0 || K <= 0) throw TraceError("matmul: M, N, K must be positive");
  if (a.address == 0 || b.address == 0 || c.address == 0) throw TraceError("matmul: a pointer is null");
  std::string arch = runtime::device_arch();
  const int64_t m_bucket = autotune::pow2_bucket(M), n_bucket = autotune::pow2_bucket(N),
                k_bucket = autotune::pow2_bucket(K);
  std::string key = fmt::format("{} M<={} N<={} K<={}", dtype_name(dtype), m_bucket, n_bucket, k_bucket);
  std::string fast_key = autotune::memo_key(key, arch, settings);
  if (!result && settings.use_cache) {
    if (auto known = g_winners.find(fast_key)) {
      const autotune::Config &best = *known;
      if (chosen) *chosen = best;
      matmul(a, b, c, M, N, K, dtype, matmul_launch_config(best, arch, stream), blocks(best));
      return;
    }
  }

  size_t esz = dtype == DType::f32 ? 4 : 2;
  size_t ab = size_t(M) * K * esz, bb = size_t(K) * N * esz, cb = size_t(M) * N * esz;
  autotune::Tunable t;
  t.kernel = "matmul";
  t.key = key;
  t.arch = arch;
  t.configs = matmul_candidates(dtype);
  t.stream = stream;
  t.flops = 2.0 * M * N * K;
  t.compile = [&](const autotune::Config &cf) {
    return matmul_compile(a, b, c, M, N, K, dtype, matmul_launch_config(cf, arch, stream), blocks(cf));
  };
  t.estimate = [&](const autotune::Config &cf) { return matmul_estimate(cf, int(esz)); };
  t.prior = matmul_prior(arch, dtype, m_bucket, n_bucket, k_bucket);
  std::vector<std::pair<DevicePtr, DevicePtr>> inputs{{a, b}};
  std::vector<Buffer> copies;
  autotune::DeviceSnapshot output;
  t.snapshot = [&](Stream *s) {
    int n = autotune::rotation_count(ab + bb);
    for (int r = 1; r < n; ++r) {
      copies.emplace_back(ab, Backend::GPU);
      autotune::copy_device(copies.back().address(), a.address, ab, s);
      DevicePtr ca{copies.back().address(), ab};
      copies.emplace_back(bb, Backend::GPU);
      autotune::copy_device(copies.back().address(), b.address, bb, s);
      inputs.emplace_back(ca, DevicePtr{copies.back().address(), bb});
    }
    output.take({{c.address, cb}}, s);
  };
  t.restore = [&](Stream *s) { output.restore(s); };
  t.rotations = 8;
  t.launch = [&](const autotune::Config &cf, Stream *s, int rotation) {
    auto [ra, rb] = inputs[size_t(rotation) % inputs.size()];
    matmul(ra, rb, c, M, N, K, dtype, matmul_launch_config(cf, arch, s), blocks(cf));
  };
  autotune::Result r = autotune::tune(t, settings);
  autotune::Config best = r.best;
  g_winners.remember(fast_key, best);
  if (chosen) *chosen = best;
  if (result) {
    *result = std::move(r);
    return;
  }
  matmul(a, b, c, M, N, K, dtype, matmul_launch_config(best, arch, stream), blocks(best));
}

}  // namespace tilejit::kernels
