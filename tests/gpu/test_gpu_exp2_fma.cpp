// exp2 on the FMA pipe (codegen/exp2_fma.h) against std::exp2 on the GPU: every register of the tile is
// emulated (TILEJIT_EXP2_FMA_PERCENT=100), over the whole f32 range the softmax feeds it and the edges.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "test_runtime_scoped_env.h"
#include "tilejit/buffer.h"
#include "tilejit/kernel.h"
#include "tilejit/ops.h"

using namespace tilejit;
using tilejit::testing::ScopedEnv;

TEST_CASE("exp2 on the FMA pipe matches exp2 within its stated error", "[gpu][codegen]") {
  ScopedEnv env("TILEJIT_EXP2_FMA_PERCENT", "100");  // part of the compile-cache key
  auto k = Kernel("exp2_on_fma_check", [](Ptr<f32> X, Ptr<f32> Y) {
    Tile r = arange(0, 64)(_, None) * 64 + arange(0, 64)(None, _);  // [64, 64] f32: 32 registers per thread
    store(Y + r, exp2(load(X + r)));
  });
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(4096);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -140.f + 270.f * float(i) / float(x.size());  // steps of ~0.066
  std::vector<float> special = {-inf, inf, std::nanf(""), 0.f, -0.f, 0.5f, -0.5f, 1.f, -1.f, -125.f, -124.99f, 127.9f,
                                128.f, 0.49999f, -0.50001f, 1e-8f, -1e-8f, 3.25f, -20.75f};
  std::copy(special.begin(), special.end(), x.begin());
  Buffer bx(x.size() * 4, Backend::GPU), by(x.size() * 4, Backend::GPU);
  bx.upload(x);
  by.fill_bytes(0xff);
  k.launch(Grid{1}, LaunchConfig{.num_warps = 4, .backend = Backend::GPU}, DevicePtr{bx.address(), bx.bytes()},
           DevicePtr{by.address(), by.bytes()});
  std::vector<float> y = by.download_as<float>(x.size());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("x = " << x[i] << ", got " << y[i] << ", exp2 " << std::exp2(double(x[i])));
    if (std::isnan(x[i])) {
      CHECK(std::isnan(y[i]));
    } else if (x[i] < -125.f) {
      CHECK(y[i] == 0.f);  // flushed (2^-125 ≈ 2.4e-38)
    } else if (x[i] >= 128.f) {
      CHECK(y[i] == inf);
    } else {
      double ref = std::exp2(double(x[i]));
      double rel = std::abs(double(y[i]) - ref) / ref;
      worst = std::max(worst, rel);
      CHECK(rel <= 8e-5);  // the fit's 7.5e-5 plus f32 rounding
    }
  }
  INFO("worst relative error " << worst);
  CHECK(worst > 1e-5);  // the polynomial ran: ex2.approx.f32 stays within ~2e-7 on these inputs
}
