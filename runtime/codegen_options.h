// How the runtime turns a launch's configuration into code generation options (runtime-internal: it names
// codegen's types, which the layers above the runtime do not see).
#pragma once
#include <string>

#include "codegen/codegen.h"
#include "tilejit/launch.h"

namespace tilejit::runtime {

/// The codegen options of a launch: its num_warps, num_stages, min_ctas_per_sm and arch (empty: the current
/// device's, which needs a GPU), with the registered environment switches that change code applied.
codegen::CodegenOptions codegen_options(const LaunchConfig &cfg);

/// Throws Error naming `kernel` unless cfg's num_warps is a power of two in [1, 32] and its num_stages is in
/// [1, 8]: the same limits for every backend, so that a launch that works on the interpreter works on the GPU.
void check_warps_and_stages(const std::string &kernel, const LaunchConfig &cfg);

}  // namespace tilejit::runtime
