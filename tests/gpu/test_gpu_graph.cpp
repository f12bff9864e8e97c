// CudaGraph on the GPU: a DSL kernel launched three times (a dependent chain and an independent launch) is
// captured once and replayed over new input contents at the same addresses, checked against float64 each time
// with poisoned outputs; capture failures (a host synchronization, an allocation, a synchronous copy, a launch
// on another stream, a throwing record function) throw and leave the stream usable.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "tilejit/buffer.h"
#include "tilejit/error.h"
#include "tilejit/graph.h"
#include "tilejit/kernel.h"
#include "tilejit/ops.h"

using namespace tilejit;

namespace {

constexpr int kN = 1000;  // not a multiple of the block: the last program is masked
constexpr int kBlock = 256;
constexpr Grid kGrid{uint32_t((kN + kBlock - 1) / kBlock)};

// y[i] = x[i] * a + c[0]: `a` is fixed at capture (a launch argument), c[0] is read from device memory at run time.
const auto &axpc() {
  static const auto k = Kernel("graph_axpc", [](Ptr<f32> x, Ptr<f32> c, Ptr<f32> y, F32 a, I32 n,
                                                Constexpr<int> BLOCK) {
    auto offs = program_id(0) * BLOCK + arange(0, BLOCK);
    auto mask = offs < n;
    store(y + offs, load(x + offs, mask, 0.f) * a + load(c), mask);
  });
  return k;
}

constexpr float kA1 = 1.5f, kA2 = -0.75f, kA3 = 3.25f;

std::vector<float> random_floats(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v) x = dist(rng);
  return v;
}

// The buffers of one chain: y = x·a1 + c, z = y·a2 + c (depends on the first launch), w = x·a3 + c.
struct Chain {
  Buffer x{kN * 4, Backend::GPU}, c{4, Backend::GPU}, y{kN * 4, Backend::GPU}, z{kN * 4, Backend::GPU},
      w{kN * 4, Backend::GPU};

  void launch(Stream *s) {
    LaunchConfig cfg{.num_warps = 4, .backend = Backend::GPU, .stream = s};
    axpc().launch(kGrid, cfg, x, c, y, kA1, kN, kBlock);
    axpc().launch(kGrid, cfg, y, c, z, kA2, kN, kBlock);
    axpc().launch(kGrid, cfg, x, c, w, kA3, kN, kBlock);
  }
  // Fresh inputs at the same addresses and poisoned outputs (0xff bytes: NaN), written before the replay.
  void refill(uint32_t seed, std::vector<float> &hx, float &hc) {
    hx = random_floats(kN, -10.f, 10.f, seed);
    hc = random_floats(1, -5.f, 5.f, seed + 1000)[0];
    x.upload(hx);
    c.upload(&hc, 4);
    for (Buffer *out : {&y, &z, &w}) out->fill_bytes(0xff);
  }
  // Against float64. f32 tolerance: |x·a| ≤ 32.5 and |c| ≤ 5, so each value is ≤ 38; its two roundings (or one
  // fma's) cost ≤ 1 ulp(38) = 3.8e-6, and z adds |a2| times y's error: 1e-5 absolute bounds all three.
  void check(const std::vector<float> &hx, float hc, const char *what) {
    auto y_got = y.download_as<float>(kN), z_got = z.download_as<float>(kN), w_got = w.download_as<float>(kN);
    int bad = 0;
    for (int i = 0; i < kN; ++i) {
      double y_ref = double(hx[i]) * kA1 + hc;
      double z_ref = y_ref * kA2 + hc;
      double w_ref = double(hx[i]) * kA3 + hc;
      bool ok = std::abs(y_got[i] - y_ref) <= 1e-5 && std::abs(z_got[i] - z_ref) <= 1e-5 &&
                std::abs(w_got[i] - w_ref) <= 1e-5;  // NaN (unwritten poison) fails every comparison
      if (!ok && ++bad <= 5)
        UNSCOPED_INFO(what << ": element " << i << " y " << y_got[i] << " vs " << y_ref << ", z " << z_got[i]
                           << " vs " << z_ref << ", w " << w_got[i] << " vs " << w_ref);
    }
    CHECK(bad == 0);
  }
  // Runs the three launches directly on `s` and checks them: the stream works.
  void check_direct(Stream &s, uint32_t seed) {
    std::vector<float> hx;
    float hc;
    refill(seed, hx, hc);
    launch(&s);
    s.synchronize();
    check(hx, hc, "direct launches");
  }
};

}  // namespace

TEST_CASE("a captured chain of launches replays over new inputs at the same addresses", "[gpu][graph]") {
  Stream s;
  Chain chain;
  chain.check_direct(s, 1);  // warm-up: compiled, loaded, and correct without a graph

  CudaGraph graph(s, [&] { chain.launch(&s); });
  CHECK(graph.num_kernels() == 3);

  std::vector<float> hx;
  float hc;
  for (uint32_t replay = 0; replay < 4; ++replay) {
    INFO("replay " << replay);
    chain.refill(100 + replay, hx, hc);
    graph.replay(s);
    s.synchronize();
    chain.check(hx, hc, "replay");
  }
  // Replays queue like launches: two in a row recompute from the same inputs.
  chain.refill(200, hx, hc);
  graph.replay(s);
  graph.replay(s);
  s.synchronize();
  chain.check(hx, hc, "two queued replays");

  // Capture runs nothing: outputs stay poisoned until the graph is replayed.
  chain.refill(300, hx, hc);
  CudaGraph second(s, [&] { chain.launch(&s); });
  s.synchronize();
  auto untouched = chain.y.download_as<uint32_t>(kN);
  CHECK(std::count(untouched.begin(), untouched.end(), 0xffffffffu) == kN);
  second.replay(s);
  s.synchronize();
  chain.check(hx, hc, "second graph");
}

TEST_CASE("a host synchronization or an allocation inside record throws DriverError, the stream stays usable",
          "[gpu][graph]") {
  Stream s;
  Chain chain;
  chain.check_direct(s, 2);
  CHECK_THROWS_AS(CudaGraph(s, [&] { chain.launch(&s); s.synchronize(); }), DriverError);
  CHECK_THROWS_WITH(CudaGraph(s, [&] { chain.launch(&s); s.synchronize(); }), Catch::Contains("cuStreamSynchronize"));
  chain.check_direct(s, 3);
  CHECK_THROWS_WITH(CudaGraph(s, [&] { chain.launch(&s); Buffer scratch(1024, Backend::GPU); }),
                    Catch::Contains("cuMemAlloc"));
  chain.check_direct(s, 4);
  CudaGraph graph(s, [&] { chain.launch(&s); });  // the stream left capture mode: it can capture again
  CHECK(graph.num_kernels() == 3);
}

TEST_CASE("a synchronous copy inside record throws DriverError, the stream stays usable", "[gpu][graph]") {
  Stream s;
  Chain chain;
  chain.check_direct(s, 5);
  std::vector<float> host(kN);
  CHECK_THROWS_WITH(CudaGraph(s, [&] { chain.launch(&s); chain.x.download(host.data(), kN * 4); }),
                    Catch::Contains("cuMemcpyDtoH"));
  chain.check_direct(s, 6);
  CudaGraph graph(s, [&] { chain.launch(&s); });
  CHECK(graph.num_kernels() == 3);
}

TEST_CASE("a launch on another stream inside record is rejected: it would be missing from the graph",
          "[gpu][graph]") {
  Stream s, other;
  Chain chain;
  chain.check_direct(s, 7);
  CHECK_THROWS_WITH(CudaGraph(s, [&] { chain.launch(nullptr); }),
                    Catch::Contains("the default stream while this thread captures a CudaGraph") &&
                        Catch::Contains("missing from the graph"));
  CHECK_THROWS_WITH(CudaGraph(s, [&] { chain.launch(&other); }), Catch::Contains("missing from the graph"));
  chain.check_direct(s, 8);
  chain.check_direct(other, 9);
}

TEST_CASE("an exception from record is rethrown after the capture ends, the stream stays usable", "[gpu][graph]") {
  Stream s;
  Chain chain;
  chain.check_direct(s, 10);
  CHECK_THROWS_WITH(CudaGraph(s, [&] {
                      chain.launch(&s);
                      throw std::runtime_error("record failed on purpose");
                    }),
                    "record failed on purpose");
  chain.check_direct(s, 11);
  CudaGraph graph(s, [&] { chain.launch(&s); });
  CHECK(graph.num_kernels() == 3);
  std::vector<float> hx;
  float hc;
  chain.refill(12, hx, hc);
  graph.replay(s);
  s.synchronize();
  chain.check(hx, hc, "replay after a failed capture");
}

TEST_CASE("CudaGraph rejects the default stream", "[gpu][graph]") {
  Stream legacy(Stream::Borrow{}, nullptr);
  bool ran = false;
  CHECK_THROWS_WITH(CudaGraph(legacy, [&] { ran = true; }),
                    Catch::Contains("cannot capture on the default (legacy) stream"));
  CHECK_FALSE(ran);
}
