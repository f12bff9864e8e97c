// Compiling several kernels of one call at once, for the first call of an operation built from more than one
// kernel (the attention backward's three): the compiles overlap instead of adding up.
#pragma once
#include <span>

#include "tilejit/kernel.h"

namespace tilejit::runtime {

/// One kernel to prepare and the arguments it will be launched with.
struct PrepareJob {
  KernelBase *kernel;
  std::span<const detail::ArgValue> args;
};

/// KernelBase::prepare(cfg, args) for each job's kernel not yet prepared: traced first on the calling thread,
/// one after another (the user's functions a trace calls never run concurrently), then compiled and loaded
/// each on a thread of its own (the calling thread takes one; where no thread can be started, the calling
/// thread does the rest). Codegen and the driver's link run outside any lock, as for the autotuner's
/// candidates. Rethrows a trace's error at once, a compile's (the first in `jobs` order) after every thread
/// has finished.
void prepare_concurrently(std::span<const PrepareJob> jobs, const LaunchConfig &cfg);

}  // namespace tilejit::runtime
