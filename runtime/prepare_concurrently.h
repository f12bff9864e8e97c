// Compiling several kernels of one call at once, for the first call of an operation built from more than one
// kernel (the attention backward's three): the compiles overlap instead of adding up.
#pragma once
#include <span>

#include "tilejit/kernel.h"

namespace tilejit::runtime {

/// KernelBase::prepare(cfg, args) for each kernel not yet prepared, each on a thread of its own (the calling
/// thread takes one); returns at once when at most one needs it, which it prepares itself. Tracing takes each
/// kernel's own lock; codegen and the driver's link run outside any lock, as for the autotuner's candidates.
/// Rethrows the first kernel's error (in `kernels` order) after every thread has finished.
void prepare_concurrently(std::span<KernelBase *const> kernels, const LaunchConfig &cfg,
                          std::span<const detail::ArgValue> args);

}  // namespace tilejit::runtime
