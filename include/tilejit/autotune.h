// The autotuner: picks the fastest launch configuration of a kernel for a shape, by measuring.
//
// A config is num_warps, num_stages and named constexpr ints (BLOCK_M, BLOCK_N, ...). tune() takes a
// Tunable — the candidates and functions that compile / launch one of them — and:
//   1. returns the cached winner if (kernel, shape key, arch, candidate list) was tuned before, in this
//      process (memory) or in an earlier one (file autotune-<hash>.json in the compile-cache directory);
//   2. prunes before compiling: a config whose estimated needs (Tunable::estimate: lower bounds of shared
//      memory and of registers per thread) exceed the device's shared memory or its register cap (it would
//      spill), and a config outside the Tunable's prior (the configs that have won this class of shape on
//      this arch, kernels/autotune_prior.h);
//   3. compiles the rest on a pool of host threads (codegen and the driver's PTX → SASS link both run in
//      parallel), drops those that cannot run (dynamic shared memory above the device's per-block opt-in
//      limit, registers × threads above 64K per block, compile or load errors) and those that spill registers
//      (ptxas's report) unless they are in the prior (they won with their spills) or every config spills; when
//      nothing survives, the configs pruned in step 2 are compiled after all (outside the prior first, then over
//      an estimate), so pruning never removes every config;
//   4. times the survivors on the GPU with CUDA events between snapshot() and restore() of the outputs (so
//      tuning never changes user data), inputs rotated among copies when the Tunable provides them: one
//      screening sample each, then the `finalists` fastest again with warm-up and the median of repeated
//      samples, and
//   5. stores the winner in memory and on disk (atomic write), so a second process starts tuned.
// Settings::full_search or TILEJIT_AUTOTUNE_FULL=1 skips the pruning of steps 2 and 3 (spills included) and
// the screening: every candidate is compiled and every survivor timed with the full repeats. A winner of
// such a search is also used by later pruned searches; a pruned search's winner is not taken by a full one.
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

/// What compiling one config produced (from the driver: cuFuncGetAttribute on the loaded kernel, and ptxas's
/// report when the driver linked it).
struct Compiled {
  int num_regs = 0;       // registers per thread
  int shared_bytes = 0;   // dynamic shared memory per block
  int num_threads = 0;    // threads per block
  int spill_stores = -1;  // bytes per thread spilled to local memory (-1: not reported)
  int spill_loads = -1;   // bytes per thread reloaded from spills (-1: not reported)
  bool spills() const { return spill_stores > 0 || spill_loads > 0; }
};

/// What a config needs at least, known before compiling it (the Tunable's model of its kernel).
struct Estimate {
  int shared_bytes = 0;     // shared memory per block, a lower bound (bytes)
  int registers = 0;        // 32-bit registers per thread, a lower bound (e.g. f32 accumulators + addresses)
  int min_ctas_per_sm = 0;  // programs the config asks to fit per SM (≥ 2 lowers the register cap)
};

/// The registers per thread ptxas may use for blocks of `threads` threads when `min_ctas_per_sm` of them must fit
/// in one SM's `regs_per_sm` registers: allocation is per warp in units of 256, so a multiple of 8, at most 255.
/// min_ctas_per_sm ≤ 1 caps only at 255 (or what one block can have). Throws tilejit::Error for threads ≤ 0.
int register_cap(int threads, int min_ctas_per_sm, int regs_per_sm = 65536);

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
  /// Optional: a config's needs before compiling (lower bounds). A config whose shared memory exceeds the
  /// device's, or whose registers exceed register_cap(32·num_warps, min_ctas_per_sm), is not compiled.
  std::function<Estimate(const Config &)> estimate;
  /// Optional: the candidates that have won this class of shape on this arch (a documented prior); the others
  /// are not compiled, and these are timed even when they spill. Entries that are not candidates are ignored;
  /// empty, or no entry among the candidates that pass the estimate: every candidate is a contender.
  std::vector<Config> prior;
};

/// How a candidate fared.
struct Trial {
  Config config;
  std::string status;      // "ok", "pruned: <why>", "pruned before compiling: <why>" or "failed: <error message>"
  Compiled compiled;
  double ms = -1;          // time of one launch (ok trials only): the median of `samples` samples
  int samples = 0;         // timed samples behind ms: 1 for a config screened out, more for a finalist
  bool finalist = false;   // timed with warm-up and repeats (the winner is the fastest finalist)
  double compile_ms = -1;  // wall time of its compile (-1: not compiled); several run at once
};

struct Result {
  Config best;
  double best_ms = -1;         // -1 when the winner came from a cache
  std::string source;          // "memory", "disk" or "tuned"
  std::vector<Trial> trials;   // empty unless source == "tuned"
  std::string cache_file;      // the on-disk entry (written or read)
  double compile_ms = 0, timing_ms = 0;  // wall time of the two phases of tuning
  bool full_search = false;    // tuned without pruning by estimate, prior or spills (see full_search())
};

struct Settings {
  int warmup = 3;             // untimed launches per finalist before timing (screening warms up with one)
  int repeats = 15;           // timed samples per finalist; the median wins
  double min_sample_ms = 0.2; // each sample repeats the launch until it lasts about this long
  int finalists = 3;          // after one screening sample per survivor, this many fastest are timed again with
                              // `warmup` and `repeats`; ≤ 0: every survivor is (no screening)
  bool full_search = false;   // true (or TILEJIT_AUTOTUNE_FULL=1): no pruning by estimate, prior or spills, and
                              // every survivor timed with `repeats` samples (as a reference for the pruned search)
  int threads = 0;            // compile threads; 0: TILEJIT_AUTOTUNE_THREADS, else hardware threads (≤ 16)
  bool use_cache = true;      // false: tune even when a winner is cached (the new winner is stored)
  int max_shared_bytes = -1;  // -1: the device's opt-in limit per block
  int max_regs_per_block = 65536;  // also the SM's register file, which min_ctas_per_sm programs share
  std::string cache_dir;      // empty: the compile cache's directory (TILEJIT_CACHE_DIR, ...)
  /// Replaces GPU timing (tests without a GPU): milliseconds for one launch of the config. Called once when a
  /// config is screened and again when it is a finalist.
  std::function<double(const Config &)> measure;
};

/// Tunes (or finds the cached winner). Throws tilejit::Error when no candidate survives (the message lists
/// every config and why it was dropped) and DriverError on GPU failures while timing; restore() has been
/// called when it throws after snapshot().
Result tune(const Tunable &t, const Settings &s = {});

/// The table of trials ("config  regs  spill B  smem B  compile ms  ms  n  TFLOP/s  status": spill B is ptxas's
/// stores/reloads per thread, n the timed samples behind ms) and the winner, for printing.
std::string format_result(const Tunable &t, const Result &r);

/// Forgets the in-process winners (tests: the next tune() reads the disk).
void clear_memory_cache();

/// Whether TILEJIT_PRINT_AUTOTUNING is on.
bool print_enabled();

/// Whether a tuning with these settings searches every candidate: Settings::full_search, or TILEJIT_AUTOTUNE_FULL
/// set to a value other than "0". Callers that memoize winners per process key them by it too.
bool full_search(const Settings &s);

}  // namespace tilejit::autotune
