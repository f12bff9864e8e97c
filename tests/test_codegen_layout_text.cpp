// Plans read from text (codegen/layout_text.h): a plan pass's or the lowering stage read back compiles to the kernel's
// own PTX; layouts a text chooses are the ones the lowering uses, and kernels lowered with random layouts still
// compute what the interpreter computes (under lli); a malformed or inconsistent layout is a ParseError naming its
// line and column.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "codegen/layout_text.h"
#include "codegen/lowering_plan.h"
#include "dumped_stages.h"
#include "ir/parser.h"
#include "random_layouts.h"
#include "sim_lli.h"
#include "staged_operand_kernels.h"
#include "test_codegen_kernels.h"
#include "tilejit/error.h"
#include "tilejit/stages.h"

using namespace tilejit;
using namespace tilejit::codegen::testing;

namespace {

/// The launch configuration a dumped stage file's name states ("specialize_warps-sm_90a-w4-s2-c0.tir"); false for one this
/// test cannot state (wgmma switched off).
bool config_of(const std::string &name, LaunchConfig &cfg) {
  char arch[16] = {};
  int w = 0, s = 0, c = 0, used = 0;
  const size_t dash = name.find('-');
  if (name.find("nowgmma") != std::string::npos || dash == std::string::npos) return false;
  if (std::sscanf(name.c_str() + dash + 1, "%15[^-]-w%d-s%d-c%d%n", arch, &w, &s, &c, &used) != 4) return false;
  cfg.arch = arch;
  cfg.num_warps = w;
  cfg.num_stages = s;
  cfg.min_ctas_per_sm = c;
  return true;
}

/// The whole plan (the specialize_warps stage) dumped for the first kernel (by directory name) that `matches` picks from its name and its files,
/// and the configuration it was compiled for.
template <class Matches>
std::pair<std::string, LaunchConfig> dumped_layouts(const std::map<std::string, std::map<std::string, std::string>> &kernels,
                                                    Matches matches) {
  auto kernel = std::find_if(kernels.begin(), kernels.end(), [&](const auto &k) { return matches(k.first, k.second); });
  REQUIRE(kernel != kernels.end());
  auto layouts = std::find_if(kernel->second.begin(), kernel->second.end(),
                              [](const auto &f) { return f.first.find("specialize_warps-") == 0; });
  REQUIRE(layouts != kernel->second.end());
  LaunchConfig cfg;
  REQUIRE(config_of(layouts->first, cfg));
  return {layouts->second, cfg};
}

/// What the simulator runs: sm_80 code without a pipeline.
codegen::CodegenOptions sim_options(int num_warps) {
  codegen::CodegenOptions opts;
  opts.arch = "sm_80";
  opts.num_warps = num_warps;
  opts.num_stages = 1;
  return opts;
}

std::vector<float> random_floats(size_t n, std::mt19937 &gen) {
  std::vector<float> v(n);
  for (auto &x : v) x = std::uniform_real_distribution<float>(-8, 8)(gen);
  return v;
}

void require_same_bits(const std::vector<uint8_t> &interp, const std::vector<uint8_t> &simulated, const char *what) {
  REQUIRE(interp.size() == simulated.size());
  size_t written = 0;
  for (size_t i = 0; i + 4 <= interp.size(); i += 4) written += interp[i] != 0xff || interp[i + 3] != 0xff;
  INFO(what << ": " << written << " words written by the interpreter");
  REQUIRE(written > 0);
  for (size_t i = 0; i < interp.size(); ++i) {
    INFO(what << " byte " << i);
    REQUIRE(interp[i] == simulated[i]);
  }
}

/// How far two f32 sums of the same n terms (or dot products of length n, the products rounded or fused), added
/// in different orders (a layout decides the order), may be apart: each is within γ_n·Σ|term| of the exact value,
/// γ_n = n·u / (1 − n·u), u = 2^-24 (Higham, "Accuracy and Stability of Numerical Algorithms", 3.1 and 4.2), `magnitude` being
/// Σ|term|.
double f32_sum_bound(int64_t n, double magnitude) {
  const double nu = double(n) * std::ldexp(1.0, -24);
  return 2.0 * nu / (1.0 - nu) * magnitude;  // 2·γ_n·Σ|term|
}

std::string layouts_text(const std::string &body) {
  return "tt.func @k(%x: ptr<f32> {align16}, %y: ptr<f32> {align16}) {\n" + body + "}\n";
}

}  // namespace

TEST_CASE("a plan or lowering stage read back compiles to the kernel's own PTX", "[codegen][layouts][parser]") {
  const auto kernels = tilejit::testing::dumped_stages();
  REQUIRE(kernels.size() >= 7);  // forward, decode, the backward's three, matmul, softmax
  for (const auto &[kernel, files] : kernels) {
    INFO(kernel);
    int compared = 0;
    for (const auto &[name, text] : files) {
      LaunchConfig cfg;
      if (name.find("specialize_warps-") != 0 || !config_of(name, cfg)) continue;
      INFO(name);
      const std::string config = name.substr(name.find('-') + 1, name.size() - name.find('-') - 5);
      const auto ptx = files.find("ptx-" + config + ".ptx"), lowering = files.find("lowering-" + config + ".tir");
      REQUIRE(ptx != files.end());
      REQUIRE(lowering != files.end());
      CHECK(stage_of_text(text, "specialize_warps", cfg) == text);
      CHECK(stage_of_text(text, "ptx", cfg) == ptx->second);
      CHECK(stage_of_text(lowering->second, "lowering", cfg) == lowering->second);
      ++compared;
    }
    CHECK((compared >= 1 || kernel.find("score_mod_probe") != std::string::npos));  // a probe is traced, never compiled
    // The same kernel for another arch and warp count (a kernel traced before in this process wrote no tile-IR
    // stages): the plan printed for it reads back to its PTX.
    auto optimized = std::find_if(files.rbegin(), files.rend(), [](const auto &f) {
      return f.first.size() > 3 && f.first[2] == '-' && f.first.ends_with("optimized.tir");
    });
    if (optimized == files.rend()) continue;
    LaunchConfig other;
    other.arch = "sm_80";
    other.num_warps = 8;
    other.num_stages = 3;
    const std::string layouts = stage_of_text(optimized->second, "specialize_warps", other);
    CHECK(stage_of_text(layouts, "ptx", other) == stage_of_text(optimized->second, "ptx", other));
  }
}

TEST_CASE("each plan pass is a stage: run from the previous pass's text, it gives the plan the kernel's own compile "
          "made", "[codegen][layouts][parser]") {
  const std::vector<std::string> &passes = codegen::plan_passes();
  const auto kernels = tilejit::testing::dumped_stages();
  int checked = 0;
  for (const auto &[kernel, files] : kernels) {
    INFO(kernel);
    auto optimized = std::find_if(files.rbegin(), files.rend(), [](const auto &f) {
      return f.first.size() > 3 && f.first[2] == '-' && f.first.ends_with("optimized.tir");
    });
    if (optimized == files.rend()) continue;
    for (const auto &[name, whole] : files) {
      LaunchConfig cfg;
      if (name.find("specialize_warps-") != 0 || !config_of(name, cfg)) continue;
      INFO(name);
      const std::string config = name.substr(name.find('-') + 1, name.size() - name.find('-') - 5);
      std::vector<std::string> plans;
      for (const std::string &pass : passes) plans.push_back(stage_of_text(optimized->second, pass, cfg));
      CHECK(plans.back() == whole);
      for (size_t i = 0; i < passes.size(); ++i) {
        INFO("up to " << passes[i]);
        CHECK(plans[i] == files.at(passes[i] + "-" + config + ".tir"));
        CHECK(stage_of_text(plans[i], passes[i], cfg) == plans[i]);
        if (i + 1 < passes.size()) {
          CHECK(plans[i].rfind("// the lowering plan up to " + passes[i] + " for ", 0) == 0);
          CHECK(stage_of_text(plans[i], passes[i + 1], cfg) == plans[i + 1]);
          CHECK(stage_of_text(plans[i], "ptx", cfg) == files.at("ptx-" + config + ".ptx"));
          // No pass runs backwards: an earlier stage of a later plan is refused.
          CHECK_THROWS_WITH(stage_of_text(plans[i + 1], passes[i], cfg),
                            Catch::Contains(fmt::format("stage '{}' comes before '{}'", passes[i], passes[i + 1])));
        }
      }
      // Each pass adds its own marks only.
      CHECK(plans[0].find(" folded") == std::string::npos);
      for (size_t i = 0; i < 2; ++i) {
        CHECK(plans[i].find(" pipelined") == std::string::npos);
        CHECK(plans[i].find(" staged>") == std::string::npos);
        CHECK(plans[i].find(" staged ") == std::string::npos);
      }
      for (size_t i = 0; i < 3; ++i) CHECK(plans[i].find(" shared") == std::string::npos);
      ++checked;
    }
  }
  CHECK(checked >= 7);
  // A mark a pass the text is not after decides is refused at the mark.
  const auto [text, cfg] = dumped_layouts(kernels, [](const std::string &name, const auto &files) {
    return name.find("flex_attention_fwd") == 0 && files.count("00-traced.tir");
  });
  std::string early = text;
  for (size_t at; (at = early.find(" shared>")) != std::string::npos;) early.erase(at, 7);
  early.replace(0, early.find(" for "), "// the lowering plan up to fold_transposes");
  CHECK_THROWS_WITH(stage_of_text(early, "ptx", cfg),
                    Catch::Contains("expected no 'pipelined' in a plan up to fold_transposes (software_pipeline has not run)"));
  std::string unknown = text;
  unknown.replace(0, unknown.find(" for "), "// the lowering plan up to stage_layouts");
  CHECK_THROWS_WITH(stage_of_text(unknown, "ptx", cfg),
                    Catch::Contains("line 1, column 28: expected one of the plan passes before the last (assign_layouts, "
                                    "fold_transposes, software_pipeline, stage_operands, place_waits), found 'stage_layouts for"));
}

TEST_CASE("a folded transpose is the text's decision: marked, the dot reads its source, unmarked, it is lowered",
          "[codegen][layouts][parser]") {
  // The backward's dK/dV kernel reads Pᵀ and dSᵀ as dot operands a: folded into the dots.
  const auto [text, cfg] = dumped_layouts(tilejit::testing::dumped_stages(), [](const std::string &name, const auto &) {
    return name.find("bwd_dkdv") != std::string::npos;
  });
  REQUIRE(text.find("= trans ") != std::string::npos);
  REQUIRE(text.find(" folded>") != std::string::npos);
  // Without the marks nothing is folded, and nothing pipelined either (a pipelined operand of a folded transpose
  // no longer qualifies once the transpose is materialized).
  std::string unfolded = text;
  for (const std::string mark : {" folded", " pipelined", " staged"})
    for (size_t at; (at = unfolded.find(mark + ">")) != std::string::npos;) unfolded.erase(at, mark.size());
  // The dots whose b is a transpose: folded, they read its source K-major from the loop's stage buffer;
  // materialized, they read the transpose N-major from shared memory staged for the dot.
  auto b_from_trans = [](const std::string &lowering) {
    std::vector<std::string> notes;
    std::set<std::string> trans;
    std::istringstream lines(lowering);
    std::smatch m;
    for (std::string line; std::getline(lines, line);) {
      if (std::regex_search(line, m, std::regex(R"((%\d+) = trans )"))) trans.insert(m[1]);
      if (std::regex_search(line, m, std::regex(R"(= dot %\d+, (%\d+),.*// (.*))")) && trans.count(m[1])) notes.push_back(m[2]);
    }
    return notes;
  };
  const auto folded_notes = b_from_trans(stage_of_text(text, "lowering", cfg));
  const auto unfolded_notes = b_from_trans(stage_of_text(unfolded, "lowering", cfg));
  REQUIRE(folded_notes.size() >= 2);
  REQUIRE(unfolded_notes.size() == folded_notes.size());
  for (const std::string &n : folded_notes) CHECK_THAT(n, Catch::Contains("B from the loop's cp.async stage buffer)"));
  for (const std::string &n : unfolded_notes) CHECK_THAT(n, Catch::Contains("B from shared memory staged here, N-major)"));
  CHECK(stage_of_text(unfolded, "specialize_warps", cfg) == unfolded);
  // Where it may not fold, the mark is an error naming its place.
  std::string wrong = unfolded;
  const size_t load = wrong.find("= load ");
  REQUIRE(load != std::string::npos);
  const size_t close = wrong.find(">\n", load);  // the end of the load's type
  REQUIRE(close != std::string::npos);
  wrong.insert(close, " folded");
  const size_t line_start = wrong.rfind('\n', close) + 1;
  const std::string line = fmt::format("line {}, column {}: expected no 'folded' here",
                                       1 + std::count(wrong.begin(), wrong.begin() + long(close), '\n'),
                                       close + 2 - line_start);
  CHECK_THROWS_WITH(stage_of_text(wrong, "ptx", cfg), Catch::Contains(line));
}

TEST_CASE("the lowering uses the layouts a text gives: random layouts compute what the interpreter computes",
          "[codegen][layouts][sim]") {
  // Data movement and max/argmax are exact in any layout; a sum's order follows the layout (f32_sum_bound).
  std::mt19937 gen(1234);
  for (int round = 0; round < 3; ++round) {
    for (int warps : {1, 4}) {
      INFO("round " << round << ", num_warps " << warps);
      {  // round trips through bf16/f16/f32/i32/i64/i1/i8/f64: bit for bit
        std::vector<float> x(128);
        for (auto &v : x) v = std::uniform_real_distribution<float>(-100, 100)(gen);
        std::vector<sim::SimArg> args{sim::buffer(x), sim::poisoned(128 * 64 * 4)};
        ir::Function fn = casts();
        auto [read, plan] = tilejit::testing::with_random_layouts(fn, sim_options(warps), gen);
        require_same_bits(sim::run_interpreted(fn, Grid{1}, args)[1], sim::run_simulated(*read, Grid{1}, warps, args, &plan)[1],
                          "casts");
      }
      {  // an if with a tile result: the yields converted to the result's layout
        std::vector<sim::SimArg> args{sim::buffer(random_floats(256 * 4, gen)), sim::poisoned(256 * 4 * 4)};
        ir::Function fn = branchy();
        auto [read, plan] = tilejit::testing::with_random_layouts(fn, sim_options(warps), gen);
        require_same_bits(sim::run_interpreted(fn, Grid{4}, args)[1], sim::run_simulated(*read, Grid{4}, warps, args, &plan)[1],
                          "branchy");
      }
      {  // a K loop carrying an f32 accumulator (an FMA dot): the loop's init, argument and yield in its layout
        const int32_t N = 32, K = 32;
        const std::vector<float> a = random_floats(size_t(N * K), gen), b = random_floats(size_t(K * N), gen);
        std::vector<sim::SimArg> args{sim::buffer(a), sim::buffer(b), sim::poisoned(size_t(N * N) * 4), sim::i32(N),
                                      sim::i32(K)};
        ir::Function fn = matmul(16, 16, 8, DType::f32);
        auto [read, plan] = tilejit::testing::with_random_layouts(fn, sim_options(warps), gen);
        auto interp = sim::run_interpreted(fn, Grid{2, 2}, args)[2];
        auto simulated = sim::run_simulated(*read, Grid{2, 2}, warps, args, &plan)[2];
        REQUIRE(interp.size() == simulated.size());
        std::vector<float> r(interp.size() / 4), g(r.size());
        std::memcpy(r.data(), interp.data(), interp.size());
        std::memcpy(g.data(), simulated.data(), simulated.size());
        for (size_t i = 0; i < r.size(); ++i) {
          double magnitude = 0;  // Σ_k |a_ik·b_kj|
          for (int k = 0; k < K; ++k) magnitude += std::abs(double(a[i / N * K + size_t(k)]) * b[size_t(k) * N + i % N]);
          INFO("c " << i << ": interpreter " << r[i] << ", simulated " << g[i]);
          REQUIRE(std::abs(double(r[i]) - g[i]) <= f32_sum_bound(K, magnitude));
        }
      }
      {
        const int64_t n = 1000;
        std::vector<sim::SimArg> args{sim::buffer(random_floats(n, gen)), sim::buffer(random_floats(n, gen)),
                                      sim::poisoned(n * 4), sim::i32(int32_t(n))};
        ir::Function fn = vector_add(256);
        auto [read, plan] = tilejit::testing::with_random_layouts(fn, sim_options(warps), gen);
        Grid grid{4};
        require_same_bits(sim::run_interpreted(fn, grid, args)[2], sim::run_simulated(*read, grid, warps, args, &plan)[2],
                          "vector_add");
      }
      {
        const int64_t R = 16, C = 32;
        std::vector<sim::SimArg> args{sim::buffer(random_floats(size_t(R * C), gen)), sim::poisoned(size_t(R * C) * 4)};
        ir::Function fn = transpose_reshape(R, C);
        auto [read, plan] = tilejit::testing::with_random_layouts(fn, sim_options(warps), gen);
        require_same_bits(sim::run_interpreted(fn, Grid{1}, args)[1],
                          sim::run_simulated(*read, Grid{1}, warps, args, &plan)[1], "transpose + reshape");
      }
      {
        const int64_t B = 256, R = 16, C = 32, P = 2;
        std::vector<sim::SimArg> args{sim::buffer(random_floats(size_t(B * P), gen)), sim::poisoned(P * 4),
                                      sim::buffer(random_floats(size_t(R * C), gen)), sim::poisoned(C * 4),
                                      sim::poisoned(P * 4)};
        ir::Function fn = arg_reductions(B, R, C);
        auto [read, plan] = tilejit::testing::with_random_layouts(fn, sim_options(warps), gen);
        auto interp = sim::run_interpreted(fn, Grid{uint32_t(P)}, args);
        auto simulated = sim::run_simulated(*read, Grid{uint32_t(P)}, warps, args, &plan);
        require_same_bits(interp[1], simulated[1], "argmax");
        require_same_bits(interp[3], simulated[3], "argmin along rows");
        std::vector<float> r(P), g(P), x(size_t(B * P));
        std::memcpy(r.data(), interp[4].data(), P * 4);
        std::memcpy(g.data(), simulated[4].data(), P * 4);
        std::memcpy(x.data(), args[0].bytes.data(), x.size() * 4);
        for (size_t i = 0; i < r.size(); ++i) {
          double magnitude = 0;
          for (int64_t j = 0; j < B; ++j) magnitude += std::abs(x[i * size_t(B) + size_t(j)]);
          INFO("sum " << i << ": interpreter " << r[i] << ", simulated " << g[i]);
          REQUIRE(std::abs(double(r[i]) - g[i]) <= f32_sum_bound(B, magnitude));
        }
      }
    }
  }
}

TEST_CASE("a loop's software pipeline is the text's decision: the loads marked pipelined or staged, none else",
          "[codegen][layouts][parser]") {
  // The forward's key loop copies K and V ahead into the stage buffers its dots read.
  const auto [text, cfg] = dumped_layouts(tilejit::testing::dumped_stages(), [](const std::string &name, const auto &files) {
    return name.find("flex_attention_fwd") == 0 && files.count("00-traced.tir");
  });
  REQUIRE(cfg.num_stages >= 2);
  const std::string copied = "copied ahead with cp.async into the stage buffer its dots read";
  auto count = [](const std::string &s, const std::string &what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  };
  const size_t marks = count(text, " pipelined>");
  REQUIRE(marks >= 2);
  CHECK(count(stage_of_text(text, "lowering", cfg), copied) == marks);
  // One mark fewer: that load is read into registers, the others are still copied ahead.
  std::string fewer = text;
  fewer.erase(fewer.rfind(" pipelined>"), 10);
  const std::string lowering = stage_of_text(fewer, "lowering", cfg);
  CHECK(count(lowering, copied) == marks - 1);
  CHECK(stage_of_text(fewer, "specialize_warps", cfg) == fewer);
  // A mark where the pipeline cannot take the load: an error at the mark.
  LaunchConfig one_stage = cfg;
  one_stage.num_stages = 1;
  std::string one_stage_text = text;
  const std::string stages = fmt::format(" warps, {} stages\n", cfg.num_stages);
  REQUIRE(one_stage_text.find(stages) < one_stage_text.find('\n') + 1);
  one_stage_text.replace(one_stage_text.find(stages), stages.size(), " warps, 1 stages\n");
  // The header names the stages asked for; asked for others, the text is refused at its first line.
  CHECK_THROWS_WITH(stage_of_text(text, "ptx", one_stage),
                    Catch::Contains("line 1, column 1: expected the plan header '// the lowering plan for sm_90a, "));
  CHECK_THROWS_WITH(stage_of_text(one_stage_text, "ptx", one_stage),
                    Catch::Contains("expected no 'pipelined' on this load: no loop is pipelined with 1 stages on sm_90a"));
  // On a load before the loop (the forward's Q): no loop copies it.
  std::string before_loop = text;
  const size_t first_load = before_loop.find("= load "), loop = before_loop.find(" = for ");
  REQUIRE(first_load < loop);
  before_loop.insert(before_loop.find(">\n", first_load), " pipelined");
  CHECK_THROWS_WITH(stage_of_text(before_loop, "ptx", cfg),
                    Catch::Contains("expected no 'pipelined' on this load: it is not at the top level of a loop's body"));
  std::string on_arange = text;
  const size_t arange = on_arange.find("= arange ");
  REQUIRE(arange != std::string::npos);
  const size_t remat = on_arange.find(" remat>", arange);
  REQUIRE(remat != std::string::npos);
  on_arange.insert(remat + 6, " pipelined");
  CHECK_THROWS_WITH(stage_of_text(on_arange, "ptx", cfg),
                    Catch::Contains("expected no 'pipelined' on arange's result (only a load is copied ahead"));
}

TEST_CASE("a loop-invariant operand's staging is the text's decision: marked shared, it is staged once before the loop",
          "[codegen][layouts][parser]") {
  // The forward stages its q (the key loop's loop-invariant A) once, before the key loop.
  const auto [text, cfg] = dumped_layouts(tilejit::testing::dumped_stages(), [](const std::string &name, const auto &files) {
    return name.find("flex_attention_fwd") == 0 && files.count("00-traced.tir");
  });
  const std::string once = "operand in shared memory once, before the loop";
  const size_t mark = text.find(" shared>");
  REQUIRE(mark != std::string::npos);
  CHECK(text.find(" shared>", mark + 1) == std::string::npos);
  CHECK_THAT(stage_of_text(text, "lowering", cfg), Catch::Contains(once));
  // Unmarked, q stays in registers and the dot stages it in every iteration.
  std::string unmarked = text;
  unmarked.erase(mark, 7);
  const std::string lowering = stage_of_text(unmarked, "lowering", cfg);
  CHECK_THAT(lowering, !Catch::Contains(once));
  CHECK_THAT(lowering, Catch::Contains("A from shared memory staged here"));
  CHECK(stage_of_text(unmarked, "specialize_warps", cfg) == unmarked);
  CHECK(stage_of_text(unmarked, "ptx", cfg) != stage_of_text(text, "ptx", cfg));
  const size_t pipelined = text.find(" pipelined>");
  REQUIRE(pipelined != std::string::npos);
  // On a value no loop's dot reads as a loop-invariant operand (the first arange): an error at the mark.
  std::string on_arange = text;
  const size_t remat = on_arange.find(" remat>", on_arange.find("= arange "));
  REQUIRE(remat != std::string::npos);
  on_arange.insert(remat + 6, " shared");
  const size_t line_start = on_arange.rfind('\n', remat) + 1;
  CHECK_THROWS_WITH(stage_of_text(on_arange, "ptx", cfg),
                    Catch::Contains(fmt::format("line {}, column {}: expected no 'shared' on this value",
                                                1 + std::count(on_arange.begin(), on_arange.begin() + long(remat), '\n'),
                                                remat + 8 - line_start)));
  // A pipelined load (computed in the loop) is not loop-invariant.
  std::string on_load = text;
  on_load.insert(pipelined, " shared");
  CHECK_THROWS_WITH(stage_of_text(on_load, "ptx", cfg), Catch::Contains("expected no 'shared' on this value"));
  // A mark given twice is refused where the second one stands.
  std::string twice = text;
  twice.insert(mark, " shared");
  CHECK_THROWS_WITH(stage_of_text(twice, "ptx", cfg), Catch::Contains("expected each mark at most once"));
}

TEST_CASE("staged operands: a carried tile round-trips, each dot family reads its own form, a stated plan that does "
          "not fit is refused", "[codegen][layouts][parser]") {
  auto count = [](const std::string &s, const std::string &what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  };
  const std::string staged_note = "operand in shared memory once, before the loop";
  LaunchConfig sm80;
  sm80.arch = "sm_80";
  // An outer loop's carried tile read by an inner loop's dot: no text can mark it, and the text's plan stages it
  // as the compiler's does.
  const std::string carried = stage_of_text(tilejit::testing::kCarriedOperandKernel, "stage_operands", sm80);
  CHECK(count(stage_of_text(carried, "lowering", sm80), staged_note) == 2);
  CHECK(stage_of_text(carried, "ptx", sm80) == stage_of_text(tilejit::testing::kCarriedOperandKernel, "ptx", sm80));
  // An operand of an FMA dot and of a tensor-core dot in one loop: staged once, row-major for the FMA dot, which the
  // tensor-core dot (it reads the swizzled staging) does not take: it stages the operand at the dot.
  const std::string mixed = stage_of_text(tilejit::testing::kMixedFamiliesKernel, "lowering", sm80);
  CHECK(count(mixed, "stages a loop-invariant dot operand") == 2);  // a, and the FMA dot's b
  const size_t mma = mixed.find("// mma.sync");
  REQUIRE(mma != std::string::npos);
  CHECK_THAT(mixed.substr(mma, mixed.find('\n', mma) - mma), Catch::Contains("A from shared memory staged here"));
  // On sm_86 (99 KB a block) with 4 stages, b0 in the dynamic buffer past the stage buffers leaves no room for the
  // scratch: the plan the lowering follows keeps it in registers, and a text that stages it anyway is refused.
  LaunchConfig sm86 = sm80;
  sm86.arch = "sm_86";
  sm86.num_stages = 4;
  const std::string fits = stage_of_text(tilejit::testing::kInvariantDotsKernel, "specialize_warps", sm86);
  REQUIRE(count(fits, " shared>") == 1);
  std::string stated = fits;
  const size_t b0 = stated.find("%13 = load ");
  REQUIRE(b0 != std::string::npos);
  stated.insert(stated.find(">\n", b0), " shared");
  CHECK_THROWS_WITH(stage_of_text(stated, "ptx", sm86),
                    Catch::Contains("more than a block has on sm_86") && Catch::Contains("take the 'shared' mark off"));
}

TEST_CASE("a tensor-core dot's result is written in the MMA layout, or the text is refused", "[codegen][layouts][parser]") {
  auto [text, cfg] = dumped_layouts(tilejit::testing::dumped_stages(), [](const std::string &name, const auto &) {
    return name.find("matmul") == 0;
  });
  const size_t dot = text.find(" = dot ");
  REQUIRE(dot != std::string::npos);
  const size_t alias = text.find("#blocked", dot), alias_end = text.find('>', alias);
  REQUIRE(alias_end != std::string::npos);
  text.replace(alias, alias_end - alias, "#blocked<spt=[1,4] tpw=[8,4] wpc=[" + std::to_string(cfg.num_warps) + ",1] order=[1,0]>");
  const size_t line_start = text.rfind('\n', alias) + 1;
  CHECK_THROWS_WITH(stage_of_text(text, "ptx", cfg),
                    Catch::Contains(fmt::format("line {}, column {}: expected the MMA layout #blocked<spt=[1,2] tpw=[8,4]",
                                                1 + std::count(text.begin(), text.begin() + long(alias), '\n'),
                                                alias - line_start + 1)));
}

TEST_CASE("a layout that does not fit its value or the launch is a ParseError naming its line and column",
          "[codegen][layouts][parser]") {
  const std::string ok = "#blocked<spt=[4] tpw=[32] wpc=[4] order=[0]>";
  auto text = [&](const std::string &load_layout) {
    return layouts_text("  %0 = arange {start = 0, end = 512} : tensor<512xi32, " + ok + " remat>\n"
                        "  %1 = splat %x : tensor<512xptr<f32>, " + ok + " remat>\n"
                        "  %2 = ptr_add %1, %0 : tensor<512xptr<f32>, " + ok + " remat>\n"
                        "  %3 = load %2 : tensor<512xf32, " + load_layout + ">\n"
                        "  %4 = splat %y : tensor<512xptr<f32>, " + ok + " remat>\n"
                        "  %5 = ptr_add %4, %0 : tensor<512xptr<f32>, " + ok + " remat>\n"
                        "  store %5, %3 : tensor<512xf32>\n");
  };
  LaunchConfig cfg;
  cfg.num_warps = 4;
  // Four elements per thread load as one 16-byte access each; one element per thread cannot.
  REQUIRE(stage_of_text(text(ok), "ptx", cfg).find("ld.global.v4") != std::string::npos);
  REQUIRE(stage_of_text(text("#blocked<spt=[1] tpw=[32] wpc=[4] order=[0]>"), "ptx", cfg).find("ld.global.v") ==
          std::string::npos);
  const std::string at = "line 5, column 34";  // where the load's layout starts
  const std::vector<std::pair<std::string, std::string>> bad{
      {"#blocked<spt=[4] tpw=[32] wpc=[8] order=[0]>", "line 5, column 64: expected warps per program whose product is num_warps = 4, not 8"},
      {"#blocked<spt=[4] tpw=[16] wpc=[4] order=[0]>", "line 5, column 55: expected threads per warp whose product is 32, not 16"},
      {"#blocked<spt=[3] tpw=[32] wpc=[4] order=[0]>", "expected powers of two in spt (got 3)"},
      {"#blocked<spt=[4] tpw=[32] wpc=[4] order=[1]>", "expected an order that names each parent dim 0..0 once"},
      {"#blocked<spt=[4,1] tpw=[32] wpc=[4] order=[0]>", "expected 2 entries of tpw (one per parent dim, as spt has), not 1"},
      {"#blocked<spt=[4,1] tpw=[32,1] wpc=[4,1] order=[0,1]>", at + ": expected a layout of rank 1 for tensor<512xf32>"},
      {"#slice<dims=[1,0] of #blocked<spt=[4,1] tpw=[32,1] wpc=[4,1] order=[0,1]>>", at + ": expected a #slice with 1 dims, one per dim of tensor<512xf32>, not 2"},
      {"#slice<dims=[2] of #blocked<spt=[4,1] tpw=[32,1] wpc=[4,1] order=[0,1]>>", "expected distinct parent dims below 2"},
      {ok + " remat", "expected no 'remat' on load's result"},
      {"#blocked<spt=[1048576] tpw=[32] wpc=[4] order=[0]>", at + ": expected a layout giving each thread at most 1024 elements of tensor<512xf32> (8192 registers with copies)"},
      {ok + " x", "expected the end of the layout, found 'x'"},
      {"#blocked<spt=[4] tpw=[32]>", "expected 'wpc=', found '>'"},
  };
  for (const auto &[layout, message] : bad) {
    INFO(layout);
    try {
      stage_of_text(text(layout), "ptx", cfg);
      FAIL("no error");
    } catch (const ParseError &e) {
      CHECK_THAT(e.what(), Catch::Contains(message));
      CHECK_THAT(e.what(), Catch::Contains("line 5, column"));
    }
  }
  // Every tile value states its layout once one does, and the tile IR's stages are behind such a text.
  std::string missing = text(ok);
  missing.replace(missing.find(", " + ok + ">\n  %4"), ok.size() + 2, "");
  CHECK_THROWS_WITH(stage_of_text(missing, "ptx", cfg),
                    Catch::Contains("line 5, column 32: expected a layout in the type of load's result tensor<512xf32> "
                                    "(a text with layouts gives every tile value one), found '>'"));
  // Aliases: defined once before the function, each name once; an error in one is named on its own line.
  const std::string aliased = "#a = " + ok + "  // a comment may follow\n" + text("#a");
  CHECK(stage_of_text(aliased, "ptx", cfg) == stage_of_text(text(ok), "ptx", cfg));
  CHECK_THROWS_WITH(stage_of_text("#a = " + ok + "\n" + aliased, "ptx", cfg),
                    Catch::Contains("line 2, column 1: expected a new alias (#a is defined twice)"));
  CHECK_THROWS_WITH(stage_of_text(text("#b"), "ptx", cfg),
                    Catch::Contains("line 5, column 34: expected a layout (#blocked<...>, #slice<...>) or an alias "
                                    "defined before tt.func, found '#b'"));
  CHECK_THROWS_WITH(stage_of_text("#a = #blocked<spt=[4] tpw=[32] wpc=[2] order=[0]>\n" + text("#a"), "ptx", cfg),
                    Catch::Contains("line 1, column 36: expected warps per program whose product is num_warps = 4, not 2"));
  CHECK_THROWS_WITH(stage_of_text("#a.b = " + ok + "\n" + text("#a"), "ptx", cfg),
                    Catch::Contains("line 1, column 3: expected '='"));
  // Layouts are written on results' types only: not on a store's value type, nor on a cast's source type.
  std::string on_store = text(ok);
  on_store.replace(on_store.find("store %5, %3 : tensor<512xf32>"), 30, "store %5, %3 : tensor<512xf32, " + ok + ">");
  CHECK_THROWS_WITH(stage_of_text(on_store, "ptx", cfg),
                    Catch::Contains("line 8, column 18: expected a type without a layout (only results' types carry one)"));
  std::string on_cast = layouts_text("  %0 = arange {start = 0, end = 512} : tensor<512xi32, " + ok + " remat>\n"
                                     "  %1 = cast %0 : tensor<512xi32, " + ok + "> -> tensor<512xf32, " + ok + " remat>\n");
  CHECK_THROWS_WITH(stage_of_text(on_cast, "ptx", cfg),
                    Catch::Contains("line 3, column 18: expected a type without a layout (only results' types carry one)"));
  // Control bytes in a layout are shown escaped.
  CHECK_THROWS_WITH(stage_of_text(text(ok + std::string(1, '\0') + " remat"), "ptx", cfg),
                    Catch::Contains("expected the end of the layout, found '\\x00 remat'"));
  CHECK_THROWS_WITH(stage_of_text(text("#blocked<spt=[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1] tpw=[32] wpc=[4] order=[0]>"), "ptx", cfg),
                    Catch::Contains("expected sizes per thread: a list of at most 16 whole numbers of at most 2^20"));
  CHECK_THROWS_WITH(stage_of_text(text(ok), "cse", cfg),
                    Catch::Contains("stage 'cse' comes before 'specialize_warps', and this text is a whole plan (after that "
                                    "pass)"));
  cfg.num_warps = 8;
  CHECK_THROWS_WITH(stage_of_text(text(ok), "ptx", cfg),
                    Catch::Contains("line 2, column 86: expected warps per program whose product is num_warps = 8, not 4"));
}

TEST_CASE("a dot left running is the text's decision: marked, the iteration ends with wait_group 1, unmarked with 0, "
          "a mark place_waits would not take is refused",
          "[codegen][layouts][parser]") {
  // A K loop of 64x64x32 bf16 dots on sm_90a with both operands in the loop's stage buffers (3 stages).
  const std::string kloop = R"(tt.func @kloop(%a: ptr<bf16> {align16}, %b: ptr<bf16> {align16}, %c: ptr<f32> {align16}, %K: i32 {div16}) {
  %0 = arange {start = 0, end = 64} : tensor<64xi32>
  %1 = arange {start = 0, end = 32} : tensor<32xi32>
  %2 = constant {value = 0} : tensor<64x64xf32>
  %3 = constant {value = 0} : i32
  %4 = constant {value = 32} : i32
  %5 = for %6 = %3 to %K step %4 iter_args(%7 = %2) -> (tensor<64x64xf32>) {
    %8 = splat %K : tensor<64xi32>
    %9 = mul %0, %8 : tensor<64xi32>
    %10 = expand_dims %9 {axis = 1} : tensor<64x1xi32>
    %11 = broadcast %10 : tensor<64x32xi32>
    %12 = splat %6 : tensor<32xi32>
    %13 = add %12, %1 : tensor<32xi32>
    %14 = expand_dims %13 {axis = 0} : tensor<1x32xi32>
    %15 = broadcast %14 : tensor<64x32xi32>
    %16 = add %11, %15 : tensor<64x32xi32>
    %17 = splat %a : tensor<64x32xptr<bf16>>
    %18 = ptr_add %17, %16 : tensor<64x32xptr<bf16>>
    %19 = load %18 : tensor<64x32xbf16>
    %20 = splat %K : tensor<32xi32>
    %21 = mul %13, %20 : tensor<32xi32>
    %22 = expand_dims %21 {axis = 1} : tensor<32x1xi32>
    %23 = broadcast %22 : tensor<32x64xi32>
    %24 = expand_dims %0 {axis = 0} : tensor<1x64xi32>
    %25 = broadcast %24 : tensor<32x64xi32>
    %26 = add %23, %25 : tensor<32x64xi32>
    %27 = splat %b : tensor<32x64xptr<bf16>>
    %28 = ptr_add %27, %26 : tensor<32x64xptr<bf16>>
    %29 = load %28 : tensor<32x64xbf16>
    %30 = dot %19, %29, %7 : tensor<64x64xf32>
    yield %30
  }
  %31 = constant {value = 64} : tensor<64xi32>
  %32 = mul %0, %31 : tensor<64xi32>
  %33 = expand_dims %32 {axis = 1} : tensor<64x1xi32>
  %34 = broadcast %33 : tensor<64x64xi32>
  %35 = expand_dims %0 {axis = 0} : tensor<1x64xi32>
  %36 = broadcast %35 : tensor<64x64xi32>
  %37 = add %34, %36 : tensor<64x64xi32>
  %38 = splat %c : tensor<64x64xptr<f32>>
  %39 = ptr_add %38, %37 : tensor<64x64xptr<f32>>
  store %39, %5 : tensor<64x64xf32>
}
)";
  LaunchConfig cfg;
  cfg.arch = "sm_90a";
  cfg.num_warps = 4;
  cfg.num_stages = 4;
  const std::string plan = stage_of_text(kloop, "specialize_warps", cfg);
  REQUIRE(plan.find(" running>") != std::string::npos);
  CHECK(stage_of_text(plan, "specialize_warps", cfg) == plan);
  const std::string ptx = stage_of_text(plan, "ptx", cfg);
  CHECK(ptx == stage_of_text(kloop, "ptx", cfg));
  CHECK(ptx.find("wgmma.wait_group.sync.aligned 1;") != std::string::npos);
  CHECK(ptx.find("cp.async.wait_group 1;") != std::string::npos);  // two iterations ahead
  CHECK(ptx.find("cp.async.wait_group 2;") == std::string::npos);
  // Unmarked: the iteration waits for its group, the copies run three iterations ahead.
  std::string unmarked = plan;
  unmarked.erase(unmarked.find(" running>"), 8);
  const std::string waited = stage_of_text(unmarked, "ptx", cfg);
  CHECK(waited.find("wgmma.wait_group.sync.aligned 1;") == std::string::npos);
  CHECK(waited.find("cp.async.wait_group 2;") != std::string::npos);
  CHECK(stage_of_text(unmarked, "specialize_warps", cfg) == unmarked);
  // On a load: only a dot is left running.
  std::string on_load = unmarked;
  const size_t load = on_load.find("%19 = load ");
  REQUIRE(load != std::string::npos);
  on_load.insert(on_load.find(">\n", load), " running");
  CHECK_THROWS_WITH(stage_of_text(on_load, "ptx", cfg),
                    Catch::Contains("expected no 'running' on this value: only a dot's wgmmas are left running "
                                    "(codegen/place_waits.h)"));
  // Its result read by another op too: that op would read the registers the running wgmmas still write.
  std::string read_twice = plan;
  const size_t yield = read_twice.find("    yield %30");
  REQUIRE(yield != std::string::npos);
  const size_t alias = read_twice.find("#blocked", read_twice.find("%30 = dot "));
  const std::string dot_layout = read_twice.substr(alias, read_twice.find(' ', alias) - alias);
  read_twice.insert(yield, "    %99 = add %30, %30 : tensor<64x64xf32, " + dot_layout + ">\n");
  CHECK_THROWS_WITH(stage_of_text(read_twice, "ptx", cfg),
                    Catch::Contains("expected no 'running' on this value: something else reads the accumulator, which "
                                    "the running wgmmas are still writing"));
  // B not in a stage buffer (its pipeline mark taken off): it is staged in the scratch space at the dot.
  std::string b_in_registers = plan;
  const size_t b = b_in_registers.find("%29 = load ");
  REQUIRE(b != std::string::npos);
  b_in_registers.erase(b_in_registers.find(" pipelined>", b), 10);
  CHECK_THROWS_WITH(stage_of_text(b_in_registers, "ptx", cfg),
                    Catch::Contains("expected no 'running' on this value: its B is not in the loop's stage buffer or "
                                    "staged before the loop for wgmma"));
  // With 3 stages the copies would run only one iteration ahead.
  LaunchConfig two = cfg;
  two.num_stages = 3;
  std::string two_stages = stage_of_text(kloop, "specialize_warps", two);
  REQUIRE(two_stages.find(" running>") == std::string::npos);
  const size_t dot = two_stages.find("%30 = dot ");
  REQUIRE(dot != std::string::npos);
  two_stages.insert(two_stages.find(">\n", dot), " running");
  CHECK_THROWS_WITH(stage_of_text(two_stages, "ptx", two),
                    Catch::Contains("expected no 'running' on this value: its loop's copies would run 1 iteration ahead "
                                    "with the 3 stages its pipeline has"));
  // A plan up to stage_operands has no running dot yet.
  std::string early = plan;
  early.replace(0, early.find(" for "), "// the lowering plan up to stage_operands");
  CHECK_THROWS_WITH(stage_of_text(early, "ptx", cfg),
                    Catch::Contains("expected no 'running' in a plan up to stage_operands (place_waits has not run)"));
}
