// The decode plan's choice of tiling and KV splits (kernels/paged/decode_tiling.h), with stand-in occupancies
// for the compiled candidates: the GPU tests check the real ones at one shape.
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "kernels/paged/decode_tiling.h"

using namespace tilejit::attention::paged;

namespace {

// probe() answering programs per SM by block_n (split or not alike), recording each call.
struct FakeGpu {
  std::map<int, int> per_sm;  // block_n → programs per SM (0: spills)
  std::vector<std::pair<int, int>> calls;  // (block_n, splits) probed
  auto probe() {
    return [this](const Tiling &t, int n) {
      calls.emplace_back(t.block_n, n);
      return per_sm.at(t.block_n);
    };
  }
};

TilingProblem problem(int64_t programs, int max_len, bool search = true) {
  TilingProblem p;
  p.programs = programs;
  p.max_len = max_len;
  p.sms = 132;
  p.search = search;
  p.first = kTilings[0];
  return p;
}

}  // namespace

TEST_CASE("decode tiling: auto_splits fills one wave, keeps four blocks per split, stays in 1 … kMaxSplits",
          "[paged]") {
  CHECK(auto_splits(64, 8192, 64, 264) == 4);     // 264 slots / 64 programs
  CHECK(auto_splits(64, 512, 64, 264) == 2);      // 8 blocks: at most 2 splits of 4
  CHECK(auto_splits(512, 1024, 64, 264) == 1);    // more programs than slots
  CHECK(auto_splits(1, 1 << 20, 16, 1 << 20) == kMaxSplits);
  CHECK(auto_splits(0, 1024, 64, 264) == 1);
}

TEST_CASE("decode tiling: the first tiling whose programs fit one wave wins", "[paged]") {
  FakeGpu gpu{{{64, 2}, {32, 4}, {16, 6}}, {}};
  // 512 programs: two per SM hold 264, four 528.
  TilingChoice c = choose_tiling(problem(512, 1024), gpu.probe());
  CHECK(c.tiling == kTilings[1]);
  CHECK(c.num_splits == 1);
  CHECK(gpu.calls == std::vector<std::pair<int, int>>{{64, 1}, {32, 1}});
  // Three per SM for 32 keys (registers or shared memory): only the one-warp tiling holds 512.
  gpu = FakeGpu{{{64, 2}, {32, 3}, {16, 6}}, {}};
  CHECK(choose_tiling(problem(512, 1024), gpu.probe()).tiling == kTilings[2]);
  // A candidate that spills never wins.
  gpu = FakeGpu{{{64, 2}, {32, 0}, {16, 6}}, {}};
  CHECK(choose_tiling(problem(512, 1024), gpu.probe()).tiling == kTilings[2]);
}

TEST_CASE("decode tiling: splits follow the probed occupancy, and a change of split-ness is probed again",
          "[paged]") {
  // 270 programs: one too many for two per SM, unsplit; six per SM (792 slots) take two splits each.
  FakeGpu gpu{{{64, 2}, {32, 2}, {16, 6}}, {}};
  TilingChoice c = choose_tiling(problem(270, 2048), gpu.probe());
  CHECK(c.tiling == kTilings[2]);
  CHECK(c.num_splits == 2);
  CHECK(gpu.calls == std::vector<std::pair<int, int>>{{64, 1}, {32, 1}, {16, 1}, {16, 2}});
  // 64 programs fit the first tiling: its splits fill the probed wave (four per SM here: 8 splits).
  gpu = FakeGpu{{{64, 4}, {32, 4}, {16, 6}}, {}};
  c = choose_tiling(problem(64, 2048), gpu.probe());
  CHECK(c.tiling == kTilings[0]);
  CHECK(c.num_splits == 8);
  CHECK(gpu.calls == std::vector<std::pair<int, int>>{{64, 4}});
}

TEST_CASE("decode tiling: without a search, or when nothing fits, the first tiling with two per SM", "[paged]") {
  FakeGpu gpu{{{64, 2}, {32, 4}, {16, 6}}, {}};
  TilingChoice c = choose_tiling(problem(512, 8192, /*search=*/false), gpu.probe());
  CHECK(c.tiling == kTilings[0]);
  CHECK(c.num_splits == 1);
  CHECK(gpu.calls.empty());
  // 2048 programs: no tiling holds them in one wave.
  c = choose_tiling(problem(2048, 2048), gpu.probe());
  CHECK(c.tiling == kTilings[0]);
  CHECK(c.num_splits == 1);
  CHECK(gpu.calls.size() == 3);
  // The caller's tiling and split count are kept.
  TilingProblem p = problem(64, 8192, false);
  p.first = Tiling{32, 2, 5, 0};
  p.num_splits = 3;
  c = choose_tiling(p, gpu.probe());
  CHECK(c.tiling == p.first);
  CHECK(c.num_splits == 3);
}
