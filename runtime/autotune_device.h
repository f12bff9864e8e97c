// Runtime helpers for tunable launches: a loaded kernel's report for the tuner (registers, shared memory,
// spills), and scratch copies of inputs (rotation, so the L2 cache does not flatter small shapes) and of outputs
// (snapshot/restore, so tuning never changes user data).
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/runtime.h"
#include "tilejit/autotune.h"
#include "tilejit/buffer.h"

namespace tilejit::autotune {

/// What the tuner needs to know about a compiled candidate: registers, dynamic shared memory, threads and
/// ptxas's spills.
inline Compiled compiled_of(const runtime::LoadedKernel &k) {
  return Compiled{k.num_regs, k.shared_bytes, k.num_threads, k.spill_stores, k.spill_loads};
}

/// The key of a kernel's in-process memo of tuned configs: its tuning key, the arch, whether the search is full,
/// and the registered environment that changes code or candidates (runtime::env_tuning_key), so a winner found
/// under other settings is never reused.
std::string memo_key(const std::string &key, const std::string &arch, const Settings &s);

/// A kernel's in-process memo: the winner applied for each memo_key, so that later calls skip building their
/// Tunable (and the tuner's disk look-up). Thread-safe.
class WinnerMemo {
 public:
  std::optional<Config> find(const std::string &memo) const {
    std::lock_guard lock(mu_);
    auto it = winners_.find(memo);
    return it == winners_.end() ? std::nullopt : std::optional<Config>(it->second);
  }
  void remember(const std::string &memo, const Config &winner) {
    std::lock_guard lock(mu_);
    winners_[memo] = winner;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, Config> winners_;
};

/// Copies `bytes` bytes between device addresses, asynchronously on `stream` (null: default stream).
/// Throws DriverError naming cuMemcpyDtoDAsync.
void copy_device(uint64_t dst, uint64_t src, size_t bytes, Stream *stream);

/// Copies of device ranges taken on a stream and put back later (tuning's snapshot/restore of outputs).
class DeviceSnapshot {
 public:
  struct Range {
    uint64_t address;
    size_t bytes;
  };
  /// Allocates scratch and copies each range into it (ordered on `stream`).
  void take(const std::vector<Range> &ranges, Stream *stream);
  /// Copies the scratch back over the ranges (ordered on `stream`).
  void restore(Stream *stream);

 private:
  std::vector<Range> ranges_;
  std::vector<Buffer> copies_;
};

/// How many copies of the inputs tuning should rotate through so that their total exceeds the L2 cache
/// several times over: 1 for inputs of `input_bytes` ≥ 64 MiB, at most 8, and never more than memory
/// allows (`free_budget_bytes` for the extra copies).
int rotation_count(size_t input_bytes, size_t free_budget_bytes = size_t(2) << 30);

}  // namespace tilejit::autotune
