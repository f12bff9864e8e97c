// How a decode plan chooses its kernel's tiling and its KV split count (decode_plan.cpp): the policy alone,
// with compiling a candidate left to a callback, so that it is tested without a GPU.
#pragma once
#include <cstdint>
#include <functional>

namespace tilejit::attention::paged {

/// A decode kernel's tiling: keys per block, warps, pipeline stages, and the programs per SM ptxas must fit
/// (registers capped; 0: uncapped).
struct Tiling {
  int block_n, num_warps, num_stages, min_ctas_per_sm;
  bool operator==(const Tiling &) const = default;
};

/// The library's tilings, most keys per program first. 64 keys × 4 warps × 3 stages streams K/V best wherever
/// its programs (two per SM) fill the GPU in one wave or in many. Where one wave of them is too few and two
/// are too many (batch × KV heads between two and about six per SM) and the sequences are short, each wave's
/// start (the first loads' latency) is a large part of a program's time; smaller tiles that fit more programs
/// per SM (registers capped for four, or one warp each) run them all in one wave instead. With long sequences
/// the start is paid once in hundreds of microseconds and the larger tile's faster streaming wins
/// (bench/results/LEARNED.md, decode).
inline constexpr Tiling kTilings[] = {{64, 4, 3, 0}, {32, 4, 3, 4}, {16, 1, 4, 0}};
/// The longest sequence (keys) for which a plan looks past the first tiling: one wave of smaller tiles
/// measured 1–3% faster at 1024 keys and 2% slower at 8192.
inline constexpr int kOneWaveMaxKeys = 2048;
/// The most splits per sequence: the combine kernel loads a row's splits at once.
inline constexpr int kMaxSplits = 128;

/// The split count when the caller leaves it to us: as many as fit in one wave of `slots` programs (programs
/// per SM times the SMs) — a partial second wave would leave most SMs idle while it runs —, each split at
/// least four key blocks long (a shorter split's partial output costs more to write and combine than it
/// saves); 1 … kMaxSplits.
int auto_splits(int64_t programs, int max_len, int block_n, int64_t slots);

struct TilingProblem {
  int64_t programs = 0;  // programs before splitting: query blocks × KV heads × batch
  int max_len = 0;       // keys of the longest sequence
  int num_splits = 0;    // the caller's split count; 0: auto_splits
  int sms = 0;           // the GPU's SMs (a nominal 132 without one)
  bool search = false;   // compare kTilings (on a GPU, no tiling from the caller, max_len ≤ kOneWaveMaxKeys)
  Tiling first{};        // the caller's tiling, or kTilings[0]
};
struct TilingChoice {
  Tiling tiling{};
  int num_splits = 1;
};

/// Searching: the first of kTilings whose programs, split to fill one wave of its kernel's programs per SM,
/// all fit in one wave. probe(t, n) compiles tiling t with n splits and returns its programs per SM (0: it
/// spills, so it never wins); a tiling is probed again when the measured occupancy changes whether it splits
/// (a split kernel writes partial outputs: another kernel). Not searching, or no tiling fits: `first`, its
/// splits filling one wave of two programs per SM.
TilingChoice choose_tiling(const TilingProblem &p, const std::function<int(const Tiling &, int)> &probe);

}  // namespace tilejit::attention::paged
