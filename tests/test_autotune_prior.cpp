// The built-in autotuners' knowledge before compiling (kernels/autotune_prior.h): config text parsing, that
// every prior entry is one of its kernel's candidates and passes its estimate, that unmeasured classes have no
// prior, and — with ptxas (CUDA toolkit) on the attention kernel's PTX — that the register estimate rejects
// only configs that spill.
#include <catch2/catch.hpp>

#include <algorithm>

#include "kernels/autotune_prior.h"
#include "kernels/launch_options.h"
#include "kernels/matmul_autotune.h"
#include "runtime/jit_log.h"
#include "runtime/runtime.h"
#include "test_runtime_scoped_env.h"
#include "test_codegen_util.h"
#include "tilejit/attention.h"
#include "tilejit/autotune.h"
#include "tilejit/error.h"
#include "tilejit/kernels.h"

using namespace tilejit;
using namespace tilejit::kernels;
using autotune::Config;

namespace {

// The candidate lists on sm_90a of kernels/attention_autotune.cpp and kernels/flex/flex_autotune.cpp
// (register-capped configs on, their default); matmul's comes from kernels/matmul_autotune.h.
std::vector<Config> attention_candidates() {
  return with_copy_methods(
      with_more_per_sm(autotune::cartesian({{"BLOCK_M", {64, 128}}, {"BLOCK_N", {32, 64, 128}}}, {4, 8}, {1, 2, 3})),
      "sm_90a");
}
std::vector<Config> flex_candidates() {
  return with_copy_methods(
      with_more_per_sm(autotune::cartesian({{"BLOCK_M", {64, 128}}, {"BLOCK_N", {32, 64, 128}}}, {4, 8}, {2, 3})),
      "sm_90a");
}

bool contains(const std::vector<Config> &cs, const Config &c) { return std::find(cs.begin(), cs.end(), c) != cs.end(); }

bool fits(const autotune::Estimate &e, const Config &c) {
  return e.registers <= autotune::register_cap(32 * c.num_warps, e.min_ctas_per_sm) && e.shared_bytes <= 232448;
}

}  // namespace

TEST_CASE("parse_config reads Config::str() back", "[autotune]") {
  for (const Config &c : attention_candidates()) CHECK(parse_config(c.str()) == c);
  for (const Config &c : matmul_candidates(DType::bf16)) CHECK(parse_config(c.str()) == c);
  CHECK_THROWS_WITH(parse_config("BLOCK_M=128 num_warps=8"), Catch::Contains("needs num_warps and num_stages"));
  CHECK_THROWS_WITH(parse_config("BLOCK_M=12x num_warps=8 num_stages=2"),
                    Catch::Contains("'BLOCK_M=12x' is not NAME=integer"));
  CHECK_THROWS_WITH(parse_config("=3 num_warps=8 num_stages=2"), Catch::Contains("is not NAME=integer"));
}

TEST_CASE("every prior entry is a candidate of its kernel and passes its estimate", "[autotune]") {
  size_t entries = 0;
  for (bool capped : {true, false}) {
    // The candidate lists with the register-capped configs, or without them (TILEJIT_AUTOTUNE_MORE_PER_SM=0).
    auto without_capped = [](std::vector<Config> cs) {
      std::erase_if(cs, [](const Config &c) { return c.get_or("MIN_CTAS", 0) != 0; });
      return cs;
    };
    std::vector<Config> attention = capped ? attention_candidates() : without_capped(attention_candidates());
    std::vector<Config> flex = capped ? flex_candidates() : without_capped(flex_candidates());
    for (int d : {64, 128}) {
      auto prior = attention_prior("sm_90a", d, 1024, capped);
      CHECK_FALSE(prior.empty());
      for (const Config &c : prior) {
        INFO("attention d=" << d << (capped ? "" : " without register-capped configs") << ": " << c.str());
        CHECK(contains(attention, c));
        CHECK(fits(attention_estimate(c, d, d), c));
        ++entries;
      }
    }
    for (auto band : {FlexBandClass::Dense, FlexBandClass::Narrow}) {
      auto prior = flex_prior("sm_90a", 128, 128, 4096, band, capped);
      CHECK_FALSE(prior.empty());
      for (const Config &c : prior) {
        INFO("flex" << (capped ? "" : " without register-capped configs") << ": " << c.str());
        CHECK(contains(flex, c));
        CHECK(fits(attention_estimate(c, 128, 128), c));
        ++entries;
      }
    }
  }
  for (DType dt : {DType::bf16, DType::f16}) {
    auto prior = matmul_prior("sm_90a", dt, 8192, 8192, 8192);
    CHECK_FALSE(prior.empty());
    for (const Config &c : prior) {
      INFO("matmul: " << c.str());
      CHECK(contains(matmul_candidates(dt), c));
      CHECK(fits(matmul_estimate(c, 2), c));
      ++entries;
    }
  }
  CHECK(entries >= 20);
}

TEST_CASE("the copy methods are tuning choices on sm_90a only", "[autotune]") {
  std::vector<Config> base{parse_config("BLOCK_M=128 BLOCK_N=64 num_warps=8 num_stages=2"),
                           parse_config("BLOCK_M=128 BLOCK_N=64 MIN_CTAS=2 num_warps=8 num_stages=2"),
                           parse_config("BLOCK_M=64 BLOCK_N=64 num_warps=2 num_stages=2")};
  CHECK(with_copy_methods(base, "sm_80") == base);
  CHECK(with_copy_methods(base, "sm_90") == base);  // TMA copies feed wgmma: sm_90a's kernels only
  std::vector<Config> all = with_copy_methods(base, "sm_90a");
  std::vector<std::string> texts;
  for (const Config &c : all) texts.push_back(c.str());
  // Every config with TMA; a producer warpgroup only where its 4 warps leave each thread ≥ 128 registers at entry
  // and the consumers make whole warpgroups: 8 warps alone (12 warps · 170 registers), not at two per SM (85).
  CHECK(texts == std::vector<std::string>{
                     "BLOCK_M=128 BLOCK_N=64 num_warps=8 num_stages=2",
                     "BLOCK_M=128 BLOCK_N=64 MIN_CTAS=2 num_warps=8 num_stages=2",
                     "BLOCK_M=64 BLOCK_N=64 num_warps=2 num_stages=2",
                     "BLOCK_M=128 BLOCK_N=64 TMA=1 num_warps=8 num_stages=2",
                     "BLOCK_M=128 BLOCK_N=64 MIN_CTAS=2 TMA=1 num_warps=8 num_stages=2",
                     "BLOCK_M=64 BLOCK_N=64 TMA=1 num_warps=2 num_stages=2",
                     "BLOCK_M=128 BLOCK_N=64 WARP_SPECIALIZE=1 num_warps=8 num_stages=2",
                 });
  CHECK(runtime::warp_specialization_fits(4, 0));
  CHECK(runtime::warp_specialization_fits(8, 1));
  CHECK_FALSE(runtime::warp_specialization_fits(8, 2));
  CHECK_FALSE(runtime::warp_specialization_fits(4, 4));
  CHECK_FALSE(runtime::warp_specialization_fits(2, 0));
  CHECK_FALSE(runtime::warp_specialization_fits(32, 0));
  for (const Config &c : all) CHECK(parse_config(c.str()) == c);

  // A tuned config sets the options' copy method; options that ask for one keep it and are not offered others.
  attention::Options o;
  o.arch = "sm_90a";
  o.autotune = true;
  attention::Options tma = with_tuned_config(o, all[3]), ws = with_tuned_config(o, all[6]),
                     plain = with_tuned_config(o, all[0]);
  CHECK((tma.tma && !tma.warp_specialize && !tma.autotune && tma.block_n == 64));
  CHECK((ws.warp_specialize && !ws.tma));  // warp_specialize implies TMA (LaunchConfig::warp_specialize)
  CHECK((!plain.tma && !plain.warp_specialize));
  CHECK(with_copy_methods_of(o, base).size() == 7);
  CHECK(fixed_copy_method_key(o).empty());
  for (const char *var : {"TILEJIT_TMA", "TILEJIT_WARP_SPECIALIZE", "TILEJIT_DISABLE_WGMMA"}) {
    testing::ScopedEnv env(var, "1");  // the environment fixes the method: no twins to time
    INFO(var);
    CHECK(runtime::env_fixes_copy_method());
    CHECK(with_copy_methods_of(o, base) == base);
  }
  o.tma = true;
  CHECK(with_copy_methods_of(o, base) == base);
  CHECK(with_tuned_config(o, all[0]).tma);
  CHECK(fixed_copy_method_key(o) == " copy=tma");
  o.warp_specialize = true;
  CHECK(fixed_copy_method_key(o) == " copy=warp_specialize");
  LaunchConfig l = with_copy_method(LaunchConfig{}, all[6]);
  CHECK((l.warp_specialize && !l.tma));

  // What a launch reports (tilejit_last_launch_config's copy_method): what its config asks for on sm_90a, a
  // producer warpgroup only where one fits, the environment applied; nothing on another arch or the interpreter.
  LaunchConfig g;
  g.backend = Backend::GPU;
  g.arch = "sm_90a";
  g.num_warps = 8;
  CHECK(runtime::copy_method(g) == 0);
  CHECK(runtime::copy_method(with_copy_method(g, all[3])) == 1);
  CHECK(runtime::copy_method(with_copy_method(g, all[6])) == 2);
  g.min_ctas_per_sm = 2;  // no room for the producer warpgroup: TMA alone
  CHECK(runtime::copy_method(with_copy_method(g, all[6])) == 1);
  g.min_ctas_per_sm = 0;
  {
    testing::ScopedEnv env("TILEJIT_TMA", "1");
    CHECK(runtime::copy_method(g) == 1);
  }
  {
    testing::ScopedEnv env("TILEJIT_DISABLE_WGMMA", "1");
    CHECK(runtime::copy_method(with_copy_method(g, all[6])) == 0);
  }
  LaunchConfig other = with_copy_method(g, all[6]);
  other.arch = "sm_80";
  CHECK(runtime::copy_method(other) == 0);
  other.arch = "sm_90a";
  other.backend = Backend::Interpreter;
  CHECK(runtime::copy_method(other) == 0);
}

TEST_CASE("classes without measurements have no prior", "[autotune]") {
  CHECK(attention_prior("sm_80", 128, 1024, true).empty());
  CHECK(attention_prior("sm_90", 128, 1024, true).empty());  // no wgmma: another kernel than sm_90a's
  for (int d : {16, 32, 256}) CHECK(attention_prior("sm_90a", d, 1024, true).empty());
  CHECK(attention_prior("sm_90a", 128, 256, true).empty());  // measured from seqlen 512
  CHECK_FALSE(attention_prior("sm_90a", 128, 512, true).empty());
  CHECK(flex_prior("sm_90a", 128, 128, 4096, FlexBandClass::Other, true).empty());
  CHECK(flex_prior("sm_90a", 64, 64, 4096, FlexBandClass::Dense, true).empty());
  CHECK(flex_prior("sm_90a", 128, 64, 4096, FlexBandClass::Dense, true).empty());
  CHECK(flex_prior("sm_90a", 128, 128, 512, FlexBandClass::Dense, true).empty());  // measured from 1024
  CHECK(flex_prior("sm_80", 128, 128, 4096, FlexBandClass::Dense, true).empty());
  CHECK(matmul_prior("sm_90a", DType::f32, 8192, 8192, 8192).empty());
  CHECK(matmul_prior("sm_90a", DType::bf16, 1024, 8192, 8192).empty());
  CHECK(matmul_prior("sm_80", DType::bf16, 8192, 8192, 8192).empty());
}

TEST_CASE("attention and matmul estimates", "[autotune]") {
  // d=128, 8 warps: 128×128 + 128×64 accumulators over 256 threads = 96, plus the reserve.
  autotune::Estimate e = attention_estimate(parse_config("BLOCK_M=128 BLOCK_N=64 MIN_CTAS=2 num_warps=8 num_stages=2"),
                                            128, 128);
  CHECK(e.registers == 96 + kReservedRegisters);
  CHECK(e.min_ctas_per_sm == 2);
  CHECK(e.shared_bytes == 64 * 256 * 2);
  autotune::Estimate big =
      attention_estimate(parse_config("BLOCK_M=128 BLOCK_N=128 MIN_CTAS=2 num_warps=8 num_stages=2"), 128, 128);
  CHECK(big.registers == 128 + kReservedRegisters);  // over the cap of 128 at two per SM
  CHECK(attention_estimate(parse_config("BLOCK_M=64 BLOCK_N=32 num_warps=4 num_stages=2"), 64, 32).registers ==
        (64 * 32 + 64 * 32) / 128 + kReservedRegisters);
  autotune::Estimate mm =
      matmul_estimate(parse_config("BLOCK_M=128 BLOCK_N=128 BLOCK_K=64 num_warps=4 num_stages=2"), 2);
  CHECK(mm.registers == 128 + kReservedRegisters);
  CHECK(mm.shared_bytes == (128 * 64 + 64 * 128) * 2);
  CHECK(mm.min_ctas_per_sm == 0);
  CHECK_THROWS_WITH(attention_estimate(Config{4, 2, {{"BLOCK_M", 64}}}, 64, 64), Catch::Contains("BLOCK_N"));
}

namespace {

// ptxas's spill report (runtime/jit_log.h) for the attention kernel's PTX with this config on sm_90a.
runtime::SpillReport attention_spills(const Config &c, int head_dim) {
  kernels::BuiltinSpec spec;
  spec.dtype = DType::bf16;
  spec.head_dim = head_dim;
  spec.block_m = c.get("BLOCK_M");
  spec.block_n = c.get("BLOCK_N");
  spec.num_warps = c.num_warps;
  spec.num_stages = c.num_stages;
  spec.min_ctas_per_sm = c.get_or("MIN_CTAS", 0);
  spec.arch = "sm_90a";
  std::string tag = "prior_" + std::to_string(head_dim);
  for (char ch : c.str()) tag += ch == ' ' || ch == '=' ? '_' : ch;
  auto [rc, log] = codegen::testing::ptxas_v(kernels::builtin_ptx("attention", spec), "sm_90a", tag);
  INFO(c.str() << ": ptxas says\n" << log);
  REQUIRE(rc == 0);
  runtime::SpillReport r = runtime::parse_spill_report(log);
  REQUIRE(r.known());
  return r;
}

}  // namespace

TEST_CASE("with ptxas: configs the attention estimate rejects do spill", "[autotune][ptx]") {
  // Rejected by the estimate at head dim 128 (accumulators + reserve over the cap): ptxas must spill them, else
  // the estimate would be hiding configs that run. (Whether a prior's configs spill is not checked: the tuner
  // times them either way, since they won with whatever spills they had.)
  for (const char *text : {"BLOCK_M=128 BLOCK_N=128 MIN_CTAS=2 num_warps=8 num_stages=2",
                           "BLOCK_M=64 BLOCK_N=128 MIN_CTAS=4 num_warps=4 num_stages=2",
                           "BLOCK_M=128 BLOCK_N=128 num_warps=4 num_stages=2"}) {
    Config c = parse_config(text);
    autotune::Estimate e = attention_estimate(c, 128, 128);
    REQUIRE(e.registers > autotune::register_cap(32 * c.num_warps, e.min_ctas_per_sm));
    INFO(text);
    CHECK(attention_spills(c, 128).spills());
  }
}
