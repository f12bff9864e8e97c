// Programmatic dependent launch on the GPU: a consumer launched right after a slow producer of few programs is
// scheduled while the producer still runs (on the SMs it leaves idle), and must still read only the producer's
// finished output. Checked exactly (integer-valued floats) with poisoned outputs, with overlap on and off.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "runtime/runtime.h"
#include "test_runtime_scoped_env.h"
#include "tilejit/buffer.h"
#include "tilejit/device.h"
#include "tilejit/kernel.h"
#include "tilejit/ops.h"

using namespace tilejit;

namespace {

constexpr int kRows = 4096, kCols = 1024, kColsPerProgram = 64;  // the producer: 16 programs read 16 MiB

// y[c] = Σ_r x[r, c]: each program sums 64 columns over every row, so it runs for many microseconds.
const auto &column_sums() {
  static const auto k = Kernel("overlap_column_sums", [](Ptr<f32> x, Ptr<f32> y, Constexpr<int> ROWS,
                                                         Constexpr<int> COLS, Constexpr<int> BLOCK) {
    Tile cols = program_id(0) * BLOCK + arange(0, BLOCK);
    Tile acc = zeros({8, int64_t(BLOCK)}, DType::f32);
    Tile r8 = arange(0, 8);
    for_range(0, int(ROWS), 8, [&](I32 r) { acc = acc + load(x + ((r + r8) * int(COLS))(_, None) + cols(None, _)); });
    store(y + cols, sum(acc, 0));
  });
  return k;
}

// z[i] = y[i] + 1, one small program per 32 elements: many programs, ready to start at once.
const auto &plus_one() {
  static const auto k = Kernel("overlap_plus_one", [](Ptr<f32> y, Ptr<f32> z, Constexpr<int> BLOCK) {
    Tile offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(z + offs, load(y + offs) + 1.f);
  });
  return k;
}

}  // namespace

TEST_CASE("a kernel launched as a programmatic dependent reads its producer's finished output", "[gpu][runtime]") {
  Buffer x(size_t(kRows) * kCols * 4, Backend::GPU), y(kCols * 4, Backend::GPU), z(kCols * 4, Backend::GPU);
  Stream s;
  LaunchConfig cfg{.num_warps = 4, .backend = Backend::GPU, .stream = &s};
  const Grid producer{kCols / kColsPerProgram}, consumer{kCols / 32};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-4, 4);  // integer sums below 2^24: exact in f32, in any order
  for (const char *overlap : {"", "1"}) {
    testing::ScopedEnv env("TILEJIT_DISABLE_OVERLAP", overlap);
    INFO("TILEJIT_DISABLE_OVERLAP=" << overlap);
    for (int run = 0; run < 10; ++run) {
      INFO("run " << run);
      std::vector<float> hx(size_t(kRows) * kCols);
      for (float &v : hx) v = float(small(rng));
      x.upload(hx);
      y.fill_bytes(0xff);  // NaN: a consumer that ran early copies it
      z.fill_bytes(0xff);
      column_sums().launch(producer, cfg, x, y, kRows, kCols, kColsPerProgram);
      plus_one().launch(consumer, cfg, y, z, 32);
      s.synchronize();
      std::vector<float> got = z.download_as<float>(kCols);
      int bad = 0;
      for (int c = 0; c < kCols; ++c) {
        double want = 1;
        for (int r = 0; r < kRows; ++r) want += hx[size_t(r) * kCols + c];
        if (got[size_t(c)] != want && ++bad <= 5) UNSCOPED_INFO("z[" << c << "] = " << got[size_t(c)] << ", want " << want);
      }
      CHECK(bad == 0);
    }
  }
  // On sm_90 and newer both kernels carry the wait, so the runtime launches them as programmatic dependents.
  const bool sm90 = device_info().cc_major >= 9;
  CHECK(runtime::get_kernel(plus_one().function(y, z, 32), cfg).waits_for_prior_grid == sm90);
}
