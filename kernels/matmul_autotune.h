// Autotuned matmul on raw pointers (used by the C ABI's tilejit_matmul). Internal; not installed.
#pragma once
#include <string>

#include "tilejit/autotune.h"
#include "tilejit/kernels.h"

namespace tilejit::kernels {

/// The autotuner's candidates for dtype: BLOCK_M ∈ {64,128} × BLOCK_N ∈ {64,128,256} × BLOCK_K ∈ {32,64} ×
/// num_warps ∈ {4,8} × num_stages ∈ {1,2,3,4}, less (f16, bf16) those whose stage buffers exceed
/// kMaxPipelineBytes (tilejit/launch.h; they compile to a twin with fewer stages).
std::vector<autotune::Config> matmul_candidates(DType dtype);

/// The GPU launch of a tuned config (its num_warps and num_stages) for `arch` on `stream`.
LaunchConfig matmul_launch_config(const autotune::Config &c, const std::string &arch, Stream *stream);

/// c[M,N] = a[M,K]·b[K,N] (contiguous, row-major) with the autotuner's winner for this shape key (dtype,
/// next powers of two of M, N, K), among matmul_candidates(dtype). `result`, when given, receives the autotuner's result and
/// nothing is launched afterwards (tuning only); c is restored after tuning either way. `chosen`, when given,
/// receives the config used (the winner).
void matmul_autotuned(DevicePtr a, DevicePtr b, DevicePtr c, int M, int N, int K, DType dtype, Stream *stream,
                      const autotune::Settings &settings = {}, autotune::Result *result = nullptr,
                      autotune::Config *chosen = nullptr);

}  // namespace tilejit::kernels
