// The LaunchConfig of an attention options struct, and an autotuner config applied to one:
// attention::Options and attention::FlexOptions carry the same launch and tile fields (num_warps,
// num_stages, backend, stream, arch, block_m, block_n, autotune).
#pragma once
#include "tilejit/autotune.h"
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

/// o with the config's BLOCK_M, BLOCK_N, num_warps and num_stages, and autotuning off (the config is final).
template <class Options>
Options with_tuned_config(Options o, const autotune::Config &c) {
  o.block_m = c.get("BLOCK_M");
  o.block_n = c.get("BLOCK_N");
  o.num_warps = c.num_warps;
  o.num_stages = c.num_stages;
  o.autotune = false;
  return o;
}

}  // namespace tilejit::kernels
