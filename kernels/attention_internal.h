// Internal pieces of the attention forward shared by kernels/attention_fwd.cpp (the kernel and its launch)
// and kernels/attention_autotune.cpp (tuning its configuration). Not installed.
#pragma once
#include "tilejit/attention.h"
#include "tilejit/autotune.h"

namespace tilejit::attention::detail {

/// Strides of the four [batch, heads, seqlen, head_dim] tensors.
struct Layout {
  Strides q, k, v, o;
};
/// The five pointers of a call (already validated).
struct Pointers {
  DevicePtr q, k, v, out, lse;
};

/// Throws TraceError for an unsupported shape or options, null pointers, bad strides or too-small extents.
void validate(const Pointers &p, const Shape &s, const Layout &L, const Options &opt);
/// Launches the kernel with opt's configuration (block_m, block_n, num_warps, num_stages) on opt.stream.
void launch(const Pointers &p, const Shape &s, const Layout &L, const Options &opt);
/// Traces, compiles and loads opt's configuration on the GPU without launching; what the driver reports.
autotune::Compiled compile(const Pointers &p, const Shape &s, const Layout &L, const Options &opt);
/// `opt` with the tuned configuration for this call's shape key (tunes on first use of the key).
/// `result`, when given, receives the autotuner's result.
Options tuned_options(const Pointers &p, const Shape &s, const Layout &L, const Options &opt,
                      const autotune::Settings &settings, autotune::Result *result);

}  // namespace tilejit::attention::detail
