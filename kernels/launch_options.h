// The LaunchConfig of an attention options struct, and an autotuner config applied to one:
// attention::Options and attention::FlexOptions carry the same launch and tile fields (num_warps,
// num_stages, backend, stream, arch, block_m, block_n, autotune).
#pragma once
#include <bit>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "runtime/env.h"
#include "runtime/runtime.h"
#include "tilejit/autotune.h"
#include "tilejit/launch.h"

namespace tilejit::kernels {

/// Whether x is a power of two ≥ lo (the options' tile sizes and num_warps, head dims).
inline bool pow2_at_least(int x, int lo) { return x >= lo && std::has_single_bit(unsigned(x)); }

/// The first of BLOCK_M, BLOCK_N (powers of two in [16, 256]), num_warps (a power of two in [1, 16]) and
/// num_stages ([1, 8]) that the flex kernels cannot take, as a message naming it and its value ("BLOCK_N 48 must
/// be a power of two in [16, 256]"); empty when every one can. With zero_chooses, 0 passes (options whose 0
/// lets the library choose). Callers put their op in front.
inline std::string tile_options_error(int block_m, int block_n, int num_warps, int num_stages, bool zero_chooses) {
  const char *chooses = zero_chooses ? " (0: the library's choice)" : "";
  auto given = [&](int v) { return !(zero_chooses && v == 0); };
  for (auto [name, v] : {std::pair{"BLOCK_M", block_m}, std::pair{"BLOCK_N", block_n}})
    if (given(v) && (!pow2_at_least(v, 16) || v > 256))
      return fmt::format("{} {} must be a power of two in [16, 256]{}", name, v, chooses);
  if (given(num_warps) && (!pow2_at_least(num_warps, 1) || num_warps > 16))
    return fmt::format("num_warps {} must be a power of two in [1, 16]{}", num_warps, chooses);
  if (given(num_stages) && (num_stages < 1 || num_stages > 8))
    return fmt::format("num_stages {} must be in [1, 8]{}", num_stages, chooses);
  return {};
}

template <class Options>
LaunchConfig launch_config_of(const Options &opt) {
  LaunchConfig cfg;
  cfg.num_warps = opt.num_warps;
  cfg.num_stages = opt.num_stages;
  cfg.backend = opt.backend;
  cfg.stream = opt.stream;
  cfg.arch = opt.arch;
  cfg.min_ctas_per_sm = opt.min_ctas_per_sm;
  cfg.tma = opt.tma;
  cfg.warp_specialize = opt.warp_specialize;
  return cfg;
}

/// Whether the autotuners also try configs with registers capped at 128 per thread (with_more_per_sm). On
/// by default: measured on the H200 (bench/results/LEARNED.md), 8-warp 128x64 at two
/// programs per SM wins every d128 shape at seqlen 1024 (0.465 -> 0.383 ms) and most flex mods;
/// TILEJIT_AUTOTUNE_MORE_PER_SM=0 turns it off.
inline bool more_per_sm_candidates() {
  return runtime::env_string(runtime::Env::AutotuneMorePerSm) != "0";
}

/// The configs plus, with registers capped at 128 per thread, each 8-warp config at MIN_CTAS=2 and each
/// 4-warp BLOCK_M=64 config at MIN_CTAS=4 (65536 registers per SM shared by 512 threads either way), so
/// several programs share an SM and one's prologue and epilogue overlap another's main loop — the fixed cost
/// that dominates short sequences and narrow bands. (4 warps with BLOCK_M=128 hold two row groups of
/// accumulators per thread and would only spill under the cap.)
inline std::vector<autotune::Config> with_more_per_sm(std::vector<autotune::Config> configs) {
  size_t n = configs.size();
  for (size_t i = 0; i < n; ++i) {
    int per_sm = configs[i].num_warps == 8 ? 2 : configs[i].num_warps == 4 && configs[i].get("BLOCK_M") == 64 ? 4 : 0;
    if (per_sm == 0) continue;
    autotune::Config c = configs[i];
    c.constants.emplace_back("MIN_CTAS", per_sm);
    configs.push_back(std::move(c));
  }
  return configs;
}

/// The configs, and on sm_90a each again with TMA=1 (LaunchConfig::tma: the pipelined operand tiles copied by the
/// Tensor Memory Accelerator) and, where a producer warpgroup fits (runtime::warp_specialization_fits), with
/// WARP_SPECIALIZE=1 (LaunchConfig::warp_specialize: that warpgroup issues the copies): the copy method is a
/// tuning choice like the tile sizes. Other archs have no TMA: the configs as they are.
inline std::vector<autotune::Config> with_copy_methods(std::vector<autotune::Config> configs,
                                                       const std::string &arch) {
  if (arch != "sm_90a") return configs;
  size_t n = configs.size();
  for (size_t i = 0; i < n; ++i) {
    autotune::Config tma = configs[i];
    tma.constants.emplace_back("TMA", 1);
    configs.push_back(std::move(tma));
  }
  for (size_t i = 0; i < n; ++i) {
    if (!runtime::warp_specialization_fits(configs[i].num_warps, configs[i].get_or("MIN_CTAS", 0))) continue;
    autotune::Config ws = configs[i];
    ws.constants.emplace_back("WARP_SPECIALIZE", 1);
    configs.push_back(std::move(ws));
  }
  return configs;
}

/// l (a LaunchConfig or an options struct) with the copy method a config names (with_copy_methods); a config that
/// names none leaves l's own.
template <class Launch>
Launch with_copy_method(Launch l, const autotune::Config &c) {
  l.tma = l.tma || c.get_or("TMA", 0) != 0;
  l.warp_specialize = l.warp_specialize || c.get_or("WARP_SPECIALIZE", 0) != 0;
  return l;
}

/// o with the config's BLOCK_M, BLOCK_N, num_warps, num_stages, MIN_CTAS (0 when absent) and copy method, and
/// autotuning off (the config is final).
template <class Options>
Options with_tuned_config(Options o, const autotune::Config &c) {
  o.block_m = c.get("BLOCK_M");
  o.block_n = c.get("BLOCK_N");
  o.num_warps = c.num_warps;
  o.num_stages = c.num_stages;
  o.min_ctas_per_sm = c.get_or("MIN_CTAS", 0);
  o.autotune = false;
  return with_copy_method(std::move(o), c);
}

/// The candidates of an autotuned call with the copy methods (with_copy_methods), unless the call's options or the
/// environment (runtime::env_fixes_copy_method) fix the method: then its configs as they are.
template <class Options>
std::vector<autotune::Config> with_copy_methods_of(const Options &o, std::vector<autotune::Config> configs) {
  if (o.tma || o.warp_specialize || runtime::env_fixes_copy_method()) return configs;
  return with_copy_methods(std::move(configs), o.arch);
}

/// The part of an autotuner's shape key that says which copy method the call's options fix ("" when the tuner
/// chooses): calls that fix different ones have different candidates and winners.
template <class Options>
std::string fixed_copy_method_key(const Options &o) {
  return o.warp_specialize ? " copy=warp_specialize" : o.tma ? " copy=tma" : "";
}

}  // namespace tilejit::kernels
