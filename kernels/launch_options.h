// The LaunchConfig of an attention options struct: attention::Options and attention::FlexOptions carry the
// same launch fields (num_warps, num_stages, backend, stream, arch).
#pragma once
#include "tilejit/launch.h"

namespace tilejit::kernels {

template <class Options>
LaunchConfig launch_config_of(const Options &opt) {
  LaunchConfig cfg;
  cfg.num_warps = opt.num_warps;
  cfg.num_stages = opt.num_stages;
  cfg.backend = opt.backend;
  cfg.stream = opt.stream;
  cfg.arch = opt.arch;
  return cfg;
}

}  // namespace tilejit::kernels
