// The flex backward's autotuner without a GPU (kernels/flex/flex_backward_autotune.cpp): its candidates (copy-method
// twins on sm_90a only, none when the method is fixed, a given block mask's sizes), its prior's entries among them,
// its key against the forward's, and every tiling accepted by the backward's kernels at head dims 64 and 128.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/autotune_prior.h"
#include "kernels/flex/flex_backward.h"
#include "kernels/launch_options.h"
#include "test_runtime_scoped_env.h"
#include "tilejit/flex_attention.h"
#include "tilejit/flex_variants.h"

using namespace tilejit;
using namespace tilejit::attention;
using autotune::Config;

namespace {

std::vector<std::string> texts(const std::vector<Config> &cs) {
  std::vector<std::string> t;
  for (const Config &c : cs) t.push_back(c.str());
  return t;
}

const std::vector<std::string> kTilings = {
    "BLOCK_M=64 BLOCK_N=64 num_warps=4 num_stages=2",  "BLOCK_M=64 BLOCK_N=64 num_warps=4 num_stages=3",
    "BLOCK_M=32 BLOCK_N=64 num_warps=4 num_stages=2",  "BLOCK_M=64 BLOCK_N=128 num_warps=8 num_stages=2",
    "BLOCK_M=64 BLOCK_N=128 num_warps=8 num_stages=3",
};

FlexOptions options_on(const std::string &arch) {
  FlexOptions o;
  o.arch = arch;
  o.autotune = true;
  return o;
}

bool contains(const std::vector<Config> &cs, const Config &c) { return std::find(cs.begin(), cs.end(), c) != cs.end(); }

}  // namespace

TEST_CASE("flex backward tuner: the measured tilings, with copy-method twins on sm_90a only",
          "[autotune][flex][backward]") {
  CHECK(texts(flex::backward_candidates(options_on("sm_80"))) == kTilings);
  CHECK(texts(flex::backward_candidates(options_on("sm_90"))) == kTilings);
  const std::vector<std::string> all = texts(flex::backward_candidates(options_on("sm_90a")));
  // Each tiling with TMA, and with a producer warpgroup (4 or 8 warps without a register cap leave it room).
  REQUIRE(all.size() == 3 * kTilings.size());
  CHECK(std::equal(kTilings.begin(), kTilings.end(), all.begin()));
  CHECK(all[5] == "BLOCK_M=64 BLOCK_N=64 TMA=1 num_warps=4 num_stages=2");
  CHECK(all[10] == "BLOCK_M=64 BLOCK_N=64 WARP_SPECIALIZE=1 num_warps=4 num_stages=2");
  CHECK(all[14] == "BLOCK_M=64 BLOCK_N=128 WARP_SPECIALIZE=1 num_warps=8 num_stages=3");
}

TEST_CASE("flex backward tuner: a fixed copy method keeps the tilings alone", "[autotune][flex][backward]") {
  FlexOptions o = options_on("sm_90a");
  o.tma = true;
  CHECK(texts(flex::backward_candidates(o)) == kTilings);
  o.tma = false;
  o.warp_specialize = true;
  CHECK(texts(flex::backward_candidates(o)) == kTilings);
  testing::ScopedEnv env("TILEJIT_TMA", "1");
  CHECK(texts(flex::backward_candidates(options_on("sm_90a"))) == kTilings);
}

TEST_CASE("flex backward tuner: a given block mask keeps its block sizes", "[autotune][flex][backward]") {
  BlockMask bm;
  bm.block_m = 64;
  bm.block_n = 128;
  FlexOptions o = options_on("sm_80");
  o.block_mask = &bm;
  CHECK(texts(flex::backward_candidates(o)) == std::vector<std::string>{kTilings[3], kTilings[4]});
  bm.block_n = 64;
  CHECK(texts(flex::backward_candidates(o)) == std::vector<std::string>{kTilings[0], kTilings[1]});
  // Sizes no measured tiling has: those sizes on 4 or 8 warps with 2 or 3 stages.
  bm.block_m = bm.block_n = 128;
  CHECK(texts(flex::backward_candidates(o)) == std::vector<std::string>{
                                                   "BLOCK_M=128 BLOCK_N=128 num_warps=4 num_stages=2",
                                                   "BLOCK_M=128 BLOCK_N=128 num_warps=4 num_stages=3",
                                                   "BLOCK_M=128 BLOCK_N=128 num_warps=8 num_stages=2",
                                                   "BLOCK_M=128 BLOCK_N=128 num_warps=8 num_stages=3",
                                               });
  o.arch = "sm_90a";
  for (const Config &c : flex::backward_candidates(o)) CHECK((c.get("BLOCK_M") == 128 && c.get("BLOCK_N") == 128));
}

TEST_CASE("flex backward prior: the 64x64 tiling and its twins, all candidates, sm_90a at d64 and d128 only",
          "[autotune][flex][backward]") {
  using kernels::FlexBandClass;
  const std::vector<Config> candidates = flex::backward_candidates(options_on("sm_90a"));
  for (int d : {64, 128}) {
    const std::vector<Config> prior = kernels::flex_backward_prior("sm_90a", d, d, 4096, FlexBandClass::Dense, false);
    INFO("head dim " << d);
    CHECK(texts(prior) == std::vector<std::string>{"BLOCK_M=64 BLOCK_N=64 num_warps=4 num_stages=2",
                                                   "BLOCK_M=64 BLOCK_N=64 TMA=1 num_warps=4 num_stages=2",
                                                   "BLOCK_M=64 BLOCK_N=64 WARP_SPECIALIZE=1 num_warps=4 num_stages=2"});
    for (const Config &c : prior) CHECK(contains(candidates, c));
  }
  CHECK(kernels::flex_backward_prior("sm_90a", 128, 128, 16384, FlexBandClass::Dense, false).size() == 3);
  // Classes nobody measured: every candidate is timed.
  CHECK(kernels::flex_backward_prior("sm_80", 64, 64, 4096, FlexBandClass::Dense, false).empty());
  CHECK(kernels::flex_backward_prior("sm_90a", 256, 256, 4096, FlexBandClass::Dense, false).empty());
  CHECK(kernels::flex_backward_prior("sm_90a", 64, 128, 4096, FlexBandClass::Dense, false).empty());
  CHECK(kernels::flex_backward_prior("sm_90a", 128, 128, 1024, FlexBandClass::Dense, false).empty());
  CHECK(kernels::flex_backward_prior("sm_90a", 128, 128, 4096, FlexBandClass::Narrow, false).empty());
  CHECK(kernels::flex_backward_prior("sm_90a", 128, 128, 4096, FlexBandClass::Other, false).empty());
  CHECK(kernels::flex_backward_prior("sm_90a", 128, 128, 4096, FlexBandClass::Dense, true).empty());
  // The band classes as the backward's tuner sees a call's mask.
  FlexOptions o;
  CHECK(flex::band_class(o) == FlexBandClass::Dense);
  o.mask = causal_top_left();
  CHECK(flex::band_class(flex::with_implied_band(o)) == FlexBandClass::Dense);
  o.mask = sliding_window(128, 0);
  CHECK(flex::band_class(flex::with_implied_band(o)) == FlexBandClass::Narrow);
}

TEST_CASE("flex backward tuner: its key differs from the forward's, per atomics mode and learnable captures",
          "[autotune][flex][backward]") {
  const FlexShape s{.batch = 2, .heads_q = 8, .heads_kv = 2, .seqlen_q = 1000, .seqlen_k = 1000, .head_dim_qk = 128};
  FlexOptions o;
  o.mask = causal(Align::TopLeft);
  const flex::Plan p = flex::plan(s, o);
  const std::string forward = flex::flex_shape_key(s, o, p);
  const std::string plain = flex::backward_tuning_key(s, o, p, false);
  CHECK(plain != forward);
  CHECK(plain.rfind("bwd " + forward, 0) == 0);  // the forward's ingredients, all of them
  CHECK(flex::backward_tuning_key(s, o, p, true) != plain);
  o.atomics = true;
  CHECK(flex::backward_tuning_key(s, o, p, false) != plain);
  CHECK(flex::flex_shape_key(s, o, p) == forward);  // the forward has no atomics mode
}

TEST_CASE("flex backward tuner: every candidate compiles for head dims 64 and 128", "[autotune][flex][backward]") {
  // The candidates as the backward's three kernels take them (PTX for sm_90a, copy methods included; no GPU
  // needed), causal and not.
  for (const Config &c : flex::backward_candidates(options_on("sm_90a"))) {
    for (int d : {64, 128}) {
      const FlexShape s{.batch = 1, .heads_q = 2, .seqlen_q = 512, .seqlen_k = 512, .head_dim_qk = d};
      FlexOptions o = kernels::with_tuned_config(options_on("sm_90a"), c);
      if (d == 128) o.mask = causal(Align::TopLeft);
      INFO(c.str() << ", head dim " << d);
      CHECK(flex_backward_ptx(s, o).find(".entry") != std::string::npos);
    }
  }
}
