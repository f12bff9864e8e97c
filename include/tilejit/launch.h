// Launch configuration shared by the GPU runtime and the CPU interpreter.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "tilejit/types.h"

namespace tilejit {

/// Number of programs along each axis (program_id(0..2) ranges over [0, x), [0, y), [0, z)).
struct Grid {
  uint32_t x = 1, y = 1, z = 1;
  uint64_t size() const { return uint64_t(x) * y * z; }
};

/// Where a launch runs. Auto: the CPU interpreter when the environment variable TILEJIT_INTERPRET is set
/// to a non-empty value other than "0", otherwise the GPU (throws DriverError if there is none).
enum class Backend { Auto, GPU, Interpreter };
/// Resolves Backend::Auto as documented above.
Backend resolve_backend(Backend b);
/// True when a CUDA driver (libcuda.so.1) can be loaded and reports at least one device. Never throws.
bool gpu_available();

class Stream;

/// Shared memory a loop's software pipeline may give its stage buffers (num_stages buffers of the operand tiles
/// its dots read): where that needs more, the loop keeps fewer stages, so a larger num_stages compiles to the
/// same kernel.
inline constexpr int64_t kMaxPipelineBytes = 160 * 1024;

/// Per-launch options (as in Triton: num_warps threads groups per program, num_stages pipelining depth).
struct LaunchConfig {
  int num_warps = 4;            // 1, 2, 4, 8, 16, 32 (threads per program = 32 · num_warps)
  int num_stages = 1;           // software-pipelining depth of loops' tensor-core operand loads, 1..8
  Backend backend = Backend::Auto;
  Stream *stream = nullptr;     // GPU stream; null: the default stream of the current device. On sm_90+ a
                                // kernel is launched as a programmatic dependent of the stream's previous
                                // kernel (CUDA Programming Guide, "Programmatic Dependent Launch"): it waits
                                // for that kernel's completion before touching memory, and lets the next one
                                // be scheduled as soon as it starts. A kernel of the user's launched with PDL
                                // after a tilejit kernel must itself wait (cudaGridDependencySynchronize)
                                // before it reads tilejit's outputs or writes what tilejit reads.
                                // TILEJIT_DISABLE_OVERLAP=1 turns this off.
  std::string arch;             // "sm_80", "sm_90a", ...; empty: the device's own arch
  int min_ctas_per_sm = 0;      // ≥ 1: ask ptxas to fit this many programs per SM (PTX .maxntid + .minnctapersm,
                                // CUDA's __launch_bounds__; caps registers per thread, may spill); 0: no hint
  bool tma = false;             // sm_90a kernels with wgmma dots: a pipelined loop's operand tiles that are affine
                                // blocks of a 2-D tensor, masked by its extent, are copied by the Tensor Memory
                                // Accelerator (cp.async.bulk.tensor on an mbarrier, one thread issuing) instead of
                                // every thread's cp.async; tensor maps encoded per launch (README: "TMA")
  bool warp_specialize = false; // implies tma: a producer warpgroup (4 more warps) issues the TMA copies of the
                                // kernel's top-level loops that qualify, the num_warps consumers never copy, and
                                // registers move to them (setmaxnreg); README: "TMA"
};

/// One kernel argument after binding (pointers are device addresses on the GPU, host addresses in the
/// interpreter). `bytes` is the size of the allocation a pointer points into (0 if unknown); the
/// interpreter uses it to detect out-of-bounds accesses.
struct KernelArg {
  enum class Kind { Ptr, Int, Float } kind = Kind::Int;
  uint64_t ptr = 0;
  int64_t i = 0;
  double f = 0;
  size_t bytes = 0;
};

}  // namespace tilejit
