// The autotuner: picks the fastest launch configuration of a kernel for a shape, by measuring.
//
// A config is num_warps, num_stages and named constexpr ints (BLOCK_M, BLOCK_N, ...). tune() takes a
// Tunable — the candidates and functions that compile / launch one of them — and:
//   1. returns the cached winner if (kernel, shape key, arch, candidate list) was tuned before, in this
//      process (memory) or in an earlier one (file autotune-<hash>.json in the compile-cache directory);
//   2. otherwise compiles every candidate on a pool of host threads, drops those that cannot run (dynamic
//      shared memory above the device's per-block opt-in limit, registers × threads above 64K per block,
//      compile or load errors),
//   3. times each survivor on the GPU with CUDA events (warm-up, then the median of repeated runs, inputs
//      rotated among copies when the Tunable provides them), between snapshot() and restore() of the outputs
//      so tuning never changes user data, and
//   4. stores the winner in memory and on disk (atomic write), so a second process starts tuned.
// TILEJIT_PRINT_AUTOTUNING=1 prints each decision (the table of configs and times, and the winner) to stderr.
// TILEJIT_AUTOTUNE_THREADS=n sets the number of compile threads (default: hardware threads, at most 16).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tilejit {
class Stream;
}

namespace tilejit::autotune {

/// One launch configuration.
struct Config {
  int num_warps = 4;
  int num_stages = 1;
  std::vector<std::pair<std::string, int>> constants;  // named constexpr ints, e.g. {"BLOCK_M", 128}

  /// The value of a named constant; throws tilejit::Error naming the config when it is absent.
  int get(const std::string &name) const;
  /// The value of a named constant, or `fallback` when the config has none.
  int get_or(const std::string &name, int fallback) const;
  /// Canonical text, also the on-disk form: "BLOCK_M=128 BLOCK_N=64 num_warps=4 num_stages=2".
  std::string str() const;
  bool operator==(const Config &o) const = default;
};

/// The smallest power of two ≥ x (1 for x ≤ 1): shape keys bucket sizes with it, so nearby shapes share a
/// tuning.
int64_t pow2_bucket(int64_t x);

/// The cartesian product of constant values × num_warps × num_stages, constants varying slowest, in order.
std::vector<Config> cartesian(const std::vector<std::pair<std::string, std::vector<int>>> &constants,
                              const std::vector<int> &num_warps, const std::vector<int> &num_stages);

/// What compiling one config produced (from the driver: cuFuncGetAttribute on the loaded kernel).
struct Compiled {
  int num_regs = 0;      // registers per thread
  int shared_bytes = 0;  // dynamic shared memory per block
  int num_threads = 0;   // threads per block
};

/// A tunable launch.
struct Tunable {
  std::string kernel;           // kernel name, e.g. "attention_fwd"
  std::string key;              // shape key: what the best config depends on, e.g. "bf16 d=64 causal sq=4096"
  std::string arch;             // codegen target; empty: the current device's
  std::vector<Config> configs;  // candidates (at least one)
  /// Compiles and loads one config; an exception drops the config (the message is kept in its Trial).
  /// Called from several host threads at once: must be thread-safe.
  std::function<Compiled(const Config &)> compile;
  /// Launches one config on `stream` (asynchronously), reading input copy `rotation` ∈ [0, rotations).
  std::function<void(const Config &, Stream *stream, int rotation)> launch;
  int rotations = 1;
  /// Optional: copy the outputs aside before the first timed launch / put them back after the last.
  std::function<void(Stream *)> snapshot, restore;
  Stream *stream = nullptr;     // where tuning launches run (null: the default stream)
  double flops = 0;             // work of one launch, for TFLOP/s in the printed table (0: not shown)
};

/// How a candidate fared.
struct Trial {
  Config config;
  std::string status;  // "ok", "pruned: <why>" or "failed: <error message>"
  Compiled compiled;
  double ms = -1;      // median time of one launch (ok trials only)
};

struct Result {
  Config best;
  double best_ms = -1;         // -1 when the winner came from a cache
  std::string source;          // "memory", "disk" or "tuned"
  std::vector<Trial> trials;   // empty unless source == "tuned"
  std::string cache_file;      // the on-disk entry (written or read)
  double compile_ms = 0, timing_ms = 0;  // wall time of the two phases of tuning
};

struct Settings {
  int warmup = 3;             // untimed launches per config before timing
  int repeats = 15;           // timed samples per config; the median wins
  double min_sample_ms = 0.2; // each sample repeats the launch until it lasts about this long
  int threads = 0;            // compile threads; 0: TILEJIT_AUTOTUNE_THREADS, else hardware threads (≤ 16)
  bool use_cache = true;      // false: tune even when a winner is cached (the new winner is stored)
  int max_shared_bytes = -1;  // -1: the device's opt-in limit per block
  int max_regs_per_block = 65536;
  std::string cache_dir;      // empty: the compile cache's directory (TILEJIT_CACHE_DIR, ...)
  /// Replaces GPU timing (tests without a GPU): milliseconds for one launch of the config.
  std::function<double(const Config &)> measure;
};

/// Tunes (or finds the cached winner). Throws tilejit::Error when no candidate survives (the message lists
/// every config and why it was dropped) and DriverError on GPU failures while timing; restore() has been
/// called when it throws after snapshot().
Result tune(const Tunable &t, const Settings &s = {});

/// The table of trials ("config  regs  smem  ms  TFLOP/s  status") and the winner, for printing.
std::string format_result(const Tunable &t, const Result &r);

/// Forgets the in-process winners (tests: the next tune() reads the disk).
void clear_memory_cache();

/// Whether TILEJIT_PRINT_AUTOTUNING is on.
bool print_enabled();

}  // namespace tilejit::autotune
