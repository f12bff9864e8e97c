// The C ABI, include/tilejit/c_api.h: argument checks, exceptions → error codes, borrowed streams.
#include "tilejit/c_api.h"

#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "kernels/attention_internal.h"
#include "kernels/c_api_guard.h"
#include "kernels/launch_options.h"
#include "kernels/matmul_autotune.h"
#include "runtime/runtime.h"
#include "tilejit/attention.h"
#include "tilejit/buffer.h"
#include "tilejit/error.h"
#include "tilejit/kernels.h"

#ifndef TILEJIT_VERSION
#define TILEJIT_VERSION "unknown"
#endif

using namespace tilejit;
using tilejit::c_api_detail::attention_dtype;
using tilejit::c_api_detail::guarded;
using tilejit::c_api_detail::strides_of;

namespace {

thread_local std::string g_last_error;
thread_local tilejit_launch_config g_last_launch{};

DevicePtr device_ptr(const void *p) { return DevicePtr{uint64_t(reinterpret_cast<uintptr_t>(p)), 0}; }

// Scratch lse for callers who pass NULL: grown on demand, shared (nobody reads it).
std::mutex g_scratch_mutex;
std::optional<Buffer> g_scratch_lse;

DevicePtr scratch_lse(size_t bytes, Stream &stream, Backend be) {
  std::lock_guard lock(g_scratch_mutex);
  if (!g_scratch_lse || g_scratch_lse->bytes() < bytes || g_scratch_lse->on_gpu() != (be == Backend::GPU)) {
    if (be == Backend::GPU) stream.synchronize();  // a kernel may still be writing the old scratch
    g_scratch_lse.reset();
    g_scratch_lse.emplace(bytes, be);
  }
  return DevicePtr{g_scratch_lse->address(), 0};
}

void attention_call(const void *q, const void *k, const void *v, void *out, float *lse, int dtype, int batch,
                    int heads, int seqlen_q, int seqlen_k, int head_dim, const int64_t *q_strides,
                    const int64_t *k_strides, const int64_t *v_strides, const int64_t *o_strides, int causal,
                    float softmax_scale, attention::Options opt, void *stream) {
  attention::Shape shape{batch, heads, seqlen_q, seqlen_k, head_dim};
  opt.dtype = attention_dtype(dtype);
  opt.causal = causal != 0;
  // <= 0 selects 1/sqrt(head_dim) (this ABI's contract); NaN/inf are rejected by attention::check_shape.
  opt.softmax_scale = softmax_scale < 0 ? 0.f : softmax_scale;
  opt.backend = resolve_backend(Backend::Auto);  // the GPU, or the interpreter with TILEJIT_INTERPRET=1
  attention::detail::Layout L{strides_of(q_strides, "q_strides"), strides_of(k_strides, "k_strides"),
                              strides_of(v_strides, "v_strides"), strides_of(o_strides, "o_strides")};
  // A stand-in address for a NULL lse, so that validation (before any GPU use) looks at the rest.
  DevicePtr lse_ptr = lse ? device_ptr(lse) : DevicePtr{256, 0};
  attention::detail::Pointers p{device_ptr(q), device_ptr(k), device_ptr(v), device_ptr(out), lse_ptr};
  attention::detail::validate(p, shape, L, opt);
  if (int64_t(batch) * heads * seqlen_q == 0) return;
  Stream borrowed(Stream::Borrow{}, stream);
  opt.stream = &borrowed;
  if (!lse) p.lse = scratch_lse(size_t(batch) * heads * seqlen_q * 4, borrowed, opt.backend);
  // The tuned config is taken here rather than inside forward_strided so that tilejit_last_launch_config
  // can report it; the launch is the same.
  const bool tuned = opt.autotune && opt.backend == Backend::GPU;
  if (tuned) opt = attention::detail::tuned_options(p, shape, L, opt, {}, nullptr);
  attention::forward_strided(p.q, p.k, p.v, p.out, p.lse, shape, L.q, L.k, L.v, L.o, opt);
  c_api_detail::set_last_launch_config("attention_fwd", opt.block_m, opt.block_n, 0, kernels::launch_config_of(opt),
                                       tuned);
}

void fill_stats(const runtime::CompileStats &s, double trace_ms, tilejit_compile_stats *out) {
  out->trace_ms = trace_ms;
  out->codegen_ms = s.codegen_ms;
  out->link_ms = s.link_ms;
  out->load_ms = s.load_ms;
  out->total_ms = s.total_ms + trace_ms;
  std::memset(out->source, 0, sizeof(out->source));
  std::strncpy(out->source, s.source.c_str(), sizeof(out->source) - 1);
}

}  // namespace

namespace tilejit::c_api_detail {
// Every C ABI file (this one and c_api_flex.cpp) reports through tilejit_last_error() with this.
void set_last_error(std::string message) { g_last_error = std::move(message); }

void set_last_launch_config(const char *kernel, int block_m, int block_n, int block_k, const LaunchConfig &launch,
                            bool autotuned) {
  tilejit_launch_config c{};
  std::strncpy(c.kernel, kernel, sizeof(c.kernel) - 1);
  c.block_m = block_m;
  c.block_n = block_n;
  c.block_k = block_k;
  c.num_warps = launch.num_warps;
  c.num_stages = launch.num_stages;
  c.min_ctas_per_sm = launch.min_ctas_per_sm;
  c.autotuned = autotuned ? 1 : 0;
  c.copy_method = runtime::copy_method(launch);
  g_last_launch = c;
}
}  // namespace tilejit::c_api_detail

extern "C" {

int tilejit_attention_forward(const void *q, const void *k, const void *v, void *out, float *lse, int dtype,
                              int batch, int heads, int seqlen_q, int seqlen_k, int head_dim,
                              const int64_t *q_strides, const int64_t *k_strides, const int64_t *v_strides,
                              const int64_t *o_strides, int causal, float softmax_scale, int autotune,
                              void *stream) {
  return guarded("tilejit_attention_forward", [&] {
    attention::Options opt;
    opt.autotune = autotune != 0;
    attention_call(q, k, v, out, lse, dtype, batch, heads, seqlen_q, seqlen_k, head_dim, q_strides, k_strides,
                   v_strides, o_strides, causal, softmax_scale, opt, stream);
  });
}

int tilejit_attention_forward_config(const void *q, const void *k, const void *v, void *out, float *lse,
                                     int dtype, int batch, int heads, int seqlen_q, int seqlen_k, int head_dim,
                                     const int64_t *q_strides, const int64_t *k_strides,
                                     const int64_t *v_strides, const int64_t *o_strides, int causal,
                                     float softmax_scale, int block_m, int block_n, int num_warps,
                                     int num_stages, void *stream) {
  return guarded("tilejit_attention_forward_config", [&] {
    attention::Options opt;
    opt.block_m = block_m;
    opt.block_n = block_n;
    opt.num_warps = num_warps;
    opt.num_stages = num_stages;
    attention_call(q, k, v, out, lse, dtype, batch, heads, seqlen_q, seqlen_k, head_dim, q_strides, k_strides,
                   v_strides, o_strides, causal, softmax_scale, opt, stream);
  });
}

int tilejit_matmul(const void *a, const void *b, void *c, int M, int N, int K, int dtype, void *stream) {
  return guarded("tilejit_matmul", [&] {
    DType dt = dtype == TILEJIT_DTYPE_BF16  ? DType::bf16
               : dtype == TILEJIT_DTYPE_F16 ? DType::f16
               : dtype == TILEJIT_DTYPE_F32 ? DType::f32
                                            : throw TraceError(fmt::format(
                                                  "dtype {} is not supported (0: bf16, 1: f16, 2: f32)", dtype));
    if (M <= 0 || N <= 0 || K <= 0)
      throw TraceError(fmt::format("M, N, K must be positive (got {}, {}, {})", M, N, K));
    if (!a || !b || !c) throw TraceError(fmt::format("pointer '{}' is null", !a ? "a" : !b ? "b" : "c"));
    if (resolve_backend(Backend::Auto) == Backend::Interpreter) {  // TILEJIT_INTERPRET=1: host pointers, no tuning
      LaunchConfig cfg;
      cfg.backend = Backend::Interpreter;
      kernels::MatmulBlocks blocks;
      kernels::matmul(device_ptr(a), device_ptr(b), device_ptr(c), M, N, K, dt, cfg, blocks);
      c_api_detail::set_last_launch_config("matmul", blocks.m, blocks.n, blocks.k, cfg, false);
      return;
    }
    Stream borrowed(Stream::Borrow{}, stream);
    autotune::Config chosen;
    kernels::matmul_autotuned(device_ptr(a), device_ptr(b), device_ptr(c), M, N, K, dt, &borrowed, {}, nullptr,
                              &chosen);
    c_api_detail::set_last_launch_config("matmul", chosen.get("BLOCK_M"), chosen.get("BLOCK_N"), chosen.get("BLOCK_K"),
                                         kernels::matmul_launch_config(chosen, "", &borrowed), true);
  });
}

int tilejit_attention_compile(int dtype, int head_dim, int causal, int seqlen, int block_m, int block_n,
                              int num_warps, int num_stages, tilejit_compile_stats *stats) {
  return guarded("tilejit_attention_compile", [&] {
    if (!stats) throw TraceError("stats is null");
    attention::Shape shape{1, 1, seqlen, seqlen, head_dim};
    attention::Options opt;
    opt.dtype = attention_dtype(dtype);
    opt.causal = causal != 0;
    opt.block_m = block_m;
    opt.block_n = block_n;
    opt.num_warps = num_warps;
    opt.num_stages = num_stages;
    opt.backend = Backend::GPU;
    opt.arch = runtime::device_arch();  // loads the driver first, so its start-up is not counted as trace time
    // Stand-in addresses, 256-byte aligned like cuMemAlloc's: compiled for, never dereferenced.
    auto L = attention::detail::Layout{attention::contiguous_strides(1, seqlen, head_dim),
                                       attention::contiguous_strides(1, seqlen, head_dim),
                                       attention::contiguous_strides(1, seqlen, head_dim),
                                       attention::contiguous_strides(1, seqlen, head_dim)};
    DevicePtr fake{uint64_t(1) << 32, 0};
    attention::detail::Pointers p{fake, fake, fake, fake, fake};
    attention::detail::validate(p, shape, L, opt);
    auto t0 = std::chrono::steady_clock::now();
    attention::detail::compile(p, shape, L, opt);
    double total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    runtime::CompileStats s = runtime::last_compile_stats();
    fill_stats(s, std::max(0.0, total - s.total_ms), stats);
  });
}

int tilejit_last_compile_stats(tilejit_compile_stats *stats) {
  return guarded("tilejit_last_compile_stats", [&] {
    if (!stats) throw TraceError("stats is null");
    fill_stats(runtime::last_compile_stats(), 0, stats);
  });
}

int tilejit_last_launch_config(tilejit_launch_config *config) {
  if (!config) {
    c_api_detail::set_last_error("tilejit_last_launch_config: config is null");
    return TILEJIT_ERROR_INVALID_ARGUMENT;
  }
  *config = g_last_launch;
  c_api_detail::set_last_error({});
  return TILEJIT_OK;
}

const char *tilejit_last_error(void) { return g_last_error.c_str(); }

const char *tilejit_version(void) { return TILEJIT_VERSION; }

}  // extern "C"
