// The GPU runtime: compile (through the cache), load and launch kernels with the CUDA driver, which is
// dlopen'ed at run time (libcuda.so.1), so machines without a driver still run the interpreter.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "tilejit/buffer.h"
#include "tilejit/launch.h"

namespace tilejit::runtime {

/// The tensor maps a kernel's TMA copies read, which each launch encodes from its arguments (runtime/tensor_maps.cpp).
struct TensorMaps;

/// A kernel loaded on the current device (owned by the runtime's module cache; lives until exit).
struct LoadedKernel {
  void *function = nullptr;   // CUfunction
  std::string name;
  int shared_bytes = 0;       // dynamic shared memory per launch
  int num_threads = 0;
  int num_regs = 0;           // from cuFuncGetAttribute
  int programs_per_sm = 0;    // programs that fit on one SM at once (cuOccupancyMaxActiveBlocksPerMultiprocessor)
  int spill_stores = -1;      // bytes per thread ptxas spilled to local memory when linking (-1: not reported)
  int spill_loads = -1;       // bytes per thread reloaded from those spills (-1: not reported)
  bool waits_for_prior_grid = false;  // codegen::waits_for_prior_grid of its arch: launched as a programmatic
                                      // dependent of the stream's previous kernel (TILEJIT_DISABLE_OVERLAP: not)
  std::shared_ptr<const TensorMaps> tensor_maps;  // null: the kernel has none
};

/// The current device's arch as a codegen target: "sm_90a" for compute capability 9.0, "sm_80", ...
std::string device_arch();

/// Whether a kernel of `num_warps` warps at `min_ctas_per_sm` programs per SM (0: no hint) has room for the producer
/// warpgroup of LaunchConfig::warp_specialize (4 more warps, every thread starting with the 128 registers a wgmma
/// kernel needs); where it has not, warp_specialize compiles to the kernel of tma alone.
bool warp_specialization_fits(int num_warps, int min_ctas_per_sm);
/// Whether the registered environment fixes how every launch copies its operand tiles (TILEJIT_TMA,
/// TILEJIT_WARP_SPECIALIZE, or TILEJIT_DISABLE_WGMMA, which leaves TMA nothing to feed): autotuners then offer
/// no choice of copy method.
bool env_fixes_copy_method();
/// How a launch with cfg copies the operand tiles of the loops that qualify, with the environment applied:
/// 2 TMA issued by a producer warpgroup, 1 TMA, 0 cp.async (another arch than sm_90a, or the interpreter).
/// A device arch is looked up only when cfg.arch is empty and cfg's backend is the GPU.
int copy_method(const LaunchConfig &cfg);

/// For errors about a host buffer given to a GPU launch: when `requested` is Backend::Auto, says why it
/// meant the GPU (TILEJIT_INTERPRET unset) and, when no GPU is usable here, what to do; "" otherwise.
std::string auto_backend_note(Backend requested);

/// Compiles `fn` for `opts` (through the in-process and on-disk caches of PTX and cubin) and loads it.
/// Throws CompileError or DriverError (naming the driver call, its error name and the kernel).
/// cfg supplies num_warps, num_stages, min_ctas_per_sm and arch (empty: the current device's, which needs a
/// GPU); the registered environment switches that change code (runtime/env.def) are applied here.
const LoadedKernel &get_kernel(const ir::Function &fn, const LaunchConfig &cfg);

/// Where the last get_kernel call found its kernel and what each step cost (for benchmarks and
/// TILEJIT_DEBUG). Tracing time is the DSL's and not included.
struct CompileStats {
  std::string source;       // "memory" (in-process), "cubin cache", "ptx cache" or "compiled"
  double codegen_ms = 0;    // tile IR → PTX (0 when PTX came from the cache)
  double link_ms = 0;       // driver JIT, PTX → cubin (0 when the cubin came from the cache)
  double load_ms = 0;       // cuModuleLoadData and function setup
  double total_ms = 0;      // the whole get_kernel call, key hashing and cache I/O included
  int spill_stores = -1;    // the kernel's register spills, bytes per thread (LoadedKernel; -1: not reported)
  int spill_loads = -1;
};
/// The statistics of the most recent get_kernel call in this process.
CompileStats last_compile_stats();

/// Forgets the in-process map of loaded kernels (the modules stay loaded), so that the next get_kernel
/// goes to the on-disk cache. For tests of the cache.
void forget_loaded_kernels();
/// Incremented by forget_loaded_kernels(); callers that memoize get_kernel's answer (the DSL's Kernel)
/// drop their memo when it changes.
uint64_t loaded_kernels_generation();

/// The stream a CudaGraph (tilejit/graph.h) is capturing on the calling thread, or null when none is. A launch
/// on any other stream meanwhile would run at once and be missing from the graph, so launch() rejects it.
void *capturing_stream();

/// Launches on `stream` (null: default stream). `args` must match fn's params in order and kind. Throws Error
/// when the calling thread is capturing a CudaGraph on a different stream (capturing_stream()).
void launch(const LoadedKernel &k, Grid grid, const std::vector<ir::ParamInfo> &params,
            const std::vector<KernelArg> &args, Stream *stream);

}  // namespace tilejit::runtime
