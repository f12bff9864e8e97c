// The compile stages: ir::optimize reports each pass by name in pipeline order, and TILEJIT_DUMP_STAGES writes
// every stage of a kernel it traces and compiles (tilejit/stages.h).
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <regex>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "ir/passes.h"
#include "test_dsl_helpers.h"
#include "test_runtime_scoped_env.h"
#include "tilejit/error.h"
#include "tilejit/kernel.h"
#include "tilejit/launch.h"
#include "tilejit/ops.h"
#include "tilejit/stages.h"

using namespace tilejit;
using namespace tilejit::dsl_testing;
namespace fs = std::filesystem;

namespace {
std::unique_ptr<ir::Function> foldable() {
  return trace(
      [&] {
        Ptr<f32> x = param(0), out = param(1);
        Tile i = arange(0, 64);
        store(out + i, load(x + i) * (2.f * 3.f) + load(x + 64 + i));  // 2·3 folds; the product and sum fuse
      },
      {P(DType::f32), P(DType::f32)});
}

std::string read(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("optimize reports every stage in pipeline order: the input, each pass of the first round, the result",
          "[ir][passes]") {
  auto fn = foldable();
  std::vector<std::string> seen, texts;
  ir::optimize(*fn, ir::FloatRewrites::Fast, [&](const char *stage, const ir::Function &f) {
    seen.emplace_back(stage);
    texts.push_back(ir::print(f));
  });
  CHECK(seen == ir::pipeline_stages());
  REQUIRE(seen.size() == texts.size());
  CHECK(texts.front() != texts.back());            // something was optimized
  CHECK(texts.back() == ir::print(*fn));           // "optimized" is the result
  CHECK(texts.front().find("fma") == std::string::npos);
  const auto at = [&](const char *name) { return size_t(std::find(seen.begin(), seen.end(), name) - seen.begin()); };
  CHECK(texts[at("contract_fma")].find("fma") != std::string::npos);  // the stage after the pass that made it
  CHECK(texts[at("cse")].find("fma") == std::string::npos);

  auto exact = foldable();
  std::vector<std::string> exact_seen;
  ir::optimize(*exact, ir::FloatRewrites::Exact,
               [&](const char *stage, const ir::Function &) { exact_seen.emplace_back(stage); });
  // The float rewrites do not run, so they report nothing.
  for (const char *rewrite : {"reciprocal_division", "reassociate_scalar_factors", "contract_fma"})
    CHECK(std::find(exact_seen.begin(), exact_seen.end(), rewrite) == exact_seen.end());
  CHECK(exact_seen.front() == "traced");
  CHECK(exact_seen.back() == "optimized");

  const std::vector<std::string> all = compile_stages();
  CHECK(std::equal(ir::pipeline_stages().begin(), ir::pipeline_stages().end(), all.begin()));
  CHECK(all.size() == ir::pipeline_stages().size() + 9);
  CHECK(all[all.size() - 9] == "assign_layouts");
  CHECK(all[all.size() - 8] == "fold_transposes");
  CHECK(all[all.size() - 7] == "software_pipeline");
  CHECK(all[all.size() - 6] == "stage_operands");
  CHECK(all[all.size() - 5] == "place_waits");
  CHECK(all[all.size() - 4] == "specialize_warps");
  CHECK(all[all.size() - 3] == "lowering");
  CHECK(all[all.size() - 2] == "llvm");
  CHECK(all.back() == "ptx");
}

TEST_CASE("TILEJIT_DUMP_STAGES writes each stage of a traced and compiled kernel, changes no PTX, and a directory "
          "it cannot write fails nothing",
          "[runtime]") {
  const fs::path dir = fs::temp_directory_path() / fs::path("tilejit-stage-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto k = Kernel("staged_axpy", [](Ptr<f32> x, Ptr<f32> out) {
    Tile i = arange(0, 64);
    store(out + i, load(x + i) * 6.f + load(x + 64 + i));
  });
  LaunchConfig cfg;
  cfg.arch = "sm_80";
  std::string dumped_ptx;
  {
    testing::ScopedEnv dump("TILEJIT_DUMP_STAGES", dir.string());
    dumped_ptx = k.ptx(cfg, DevicePtr{256, 0}, DevicePtr{512, 0}).ptx;  // traces, then compiles one configuration
  }
  {
    testing::ScopedEnv dump("TILEJIT_DUMP_STAGES", std::nullopt);
    auto fresh = Kernel("staged_axpy", [](Ptr<f32> x, Ptr<f32> out) {
      Tile i = arange(0, 64);
      store(out + i, load(x + i) * 6.f + load(x + 64 + i));
    });
    CHECK(fresh.ptx(cfg, DevicePtr{256, 0}, DevicePtr{512, 0}).ptx == dumped_ptx);
  }
  std::vector<fs::path> kernels;
  for (const auto &e : fs::directory_iterator(dir)) kernels.push_back(e.path());
  REQUIRE(kernels.size() == 1);
  CHECK(kernels[0].filename().string().rfind("staged_axpy-", 0) == 0);
  std::vector<std::string> files;
  for (const auto &e : fs::directory_iterator(kernels[0])) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  const std::vector<std::string> &tile = ir::pipeline_stages();
  REQUIRE(files.size() == tile.size() + 9);
  for (size_t i = 0; i < tile.size(); ++i) CHECK(files[i] == fmt::format("{:02}-{}.tir", i, tile[i]));
  // Then, by name: each plan pass's plan, the LLVM IR, the lowering's decisions and the PTX of the configuration.
  const std::vector<std::string> codegen_files{"assign_layouts",    "fold_transposes", "llvm",
                                               "lowering",          "place_waits",     "ptx",
                                               "software_pipeline", "specialize_warps", "stage_operands"};
  for (size_t i = 0; i < codegen_files.size(); ++i)
    CHECK(files[tile.size() + i] ==
          codegen_files[i] + (codegen_files[i] == "llvm" ? "-sm_80-w4-s1-c0.ll"
                              : codegen_files[i] == "ptx" ? "-sm_80-w4-s1-c0.ptx" : "-sm_80-w4-s1-c0.tir"));
  auto stage_file = [&](const std::string &stage) {
    return read(kernels[0] / *std::find_if(files.begin(), files.end(), [&](const std::string &f) {
      return f.rfind(stage + "-", 0) == 0;
    }));
  };
  CHECK(read(kernels[0] / files.front()).find("tt.func @staged_axpy") != std::string::npos);
  // Each tile result's layout in its type (the loaded values', the fma's), named by an alias defined first.
  const std::string layouts = stage_file("specialize_warps");
  CHECK(layouts.rfind("// the lowering plan for sm_80, 4 warps, 1 stages\n#blocked0 = #blocked<spt=", 0) == 0);
  CHECK(stage_file("assign_layouts").rfind("// the lowering plan up to assign_layouts for sm_80, 4 warps, 1 stages\n", 0) == 0);
  for (const char *op : {"= load ", "= fma "}) {
    const size_t at = layouts.find(op);
    REQUIRE(at != std::string::npos);
    const std::string line = layouts.substr(at, layouts.find('\n', at) - at);
    INFO(line);
    CHECK(std::regex_search(line, std::regex(": tensor<64xf32, #blocked[0-9]+>")));
  }
  CHECK(stage_file("llvm").find("define ptx_kernel void @staged_axpy") != std::string::npos);
  CHECK(stage_file("lowering").find("tt.func @staged_axpy") != std::string::npos);
  CHECK(stage_file("ptx").find(".target sm_80") != std::string::npos);
  fs::remove_all(dir);

  // A path under a regular file cannot be a directory: a warning on stderr, and the kernel still traces and
  // compiles (a debugging aid never fails a launch).
  const fs::path file = fs::temp_directory_path() / fs::path("tilejit-stage-file-" + std::to_string(::getpid()));
  std::ofstream(file) << "x";
  auto k2 = Kernel("staged_copy", [](Ptr<f32> x, Ptr<f32> out) { store(out + arange(0, 16), load(x + arange(0, 16))); });
  {
    testing::ScopedEnv dump("TILEJIT_DUMP_STAGES", (file / "sub").string());
    std::string ir;
    CHECK_NOTHROW(ir = k2.ir(DevicePtr{256, 0}, DevicePtr{512, 0}));
    CHECK(ir.find("tt.func @staged_copy") != std::string::npos);
    CHECK_NOTHROW(k2.ptx(cfg, DevicePtr{256, 0}, DevicePtr{512, 0}));
  }
  CHECK(fs::is_regular_file(file));
  fs::remove(file);
}

TEST_CASE("The lowering stage names each dot's instruction and operands, each loop's pipeline and each wgmma wait",
          "[codegen]") {
  // C[64, 64] += A[64, 32·k] · B[32·k, 64], k blocks of 32: a pipelined tensor-core loop.
  auto fn = trace(
      [&] {
        Ptr<bf16> a = param(0), b = param(1), c = param(2);
        I32 k = param(3);
        Tile r = arange(0, 64), kk = arange(0, 32);
        Tile acc = zeros({64, 64}, DType::f32);
        for_range(0, k, 32, [&](I32 k0) {
          Tile at = load(a + (r * 1024)(_, None) + (k0 + kk)(None, _));
          Tile bt = load(b + ((k0 + kk) * 64)(_, None) + r(None, _));
          acc = dot(at, bt, acc);
        });
        store(c + (r * 64)(_, None) + r(None, _), acc.to(DType::bf16));
      },
      {P(DType::bf16), P(DType::bf16), P(DType::bf16), S(DType::i32)});
  for (auto &p : fn->params) p.align16 = p.type.is_ptr(), p.div16 = true;
  ir::optimize(*fn);
  auto line_of = [](const std::string &text, const char *what) {
    const size_t at = text.find(what);
    return at == std::string::npos ? std::string() : text.substr(at, text.find('\n', at) - at);
  };
  codegen::CodegenOptions opts;
  opts.num_warps = 4;
  opts.num_stages = 2;
  opts.arch = "sm_90a";
  const std::string hopper = codegen::print_lowering(*fn, opts);
  INFO(hopper);
  CHECK(line_of(hopper, " = for ").find("// cp.async software pipeline: 2 stages") != std::string::npos);
  CHECK(line_of(hopper, " = load ").find("// copied ahead with cp.async") != std::string::npos);
  CHECK(line_of(hopper, " = dot ").find("// wgmma m64n64k16") != std::string::npos);
  CHECK(line_of(hopper, " = dot ").find("not waited for at once") != std::string::npos);
  CHECK(line_of(hopper, "yield ").find("wgmma.wait_group 0") != std::string::npos);
  CHECK(std::regex_search(line_of(hopper, " = dot "), std::regex(": tensor<64x64xf32, #blocked[0-9]+>")));
  opts.arch = "sm_80";
  const std::string ampere = codegen::print_lowering(*fn, opts);
  CHECK(line_of(ampere, " = dot ").find("// mma.sync m16n8k16") != std::string::npos);
  CHECK(ampere.find("wgmma") == std::string::npos);
  opts.num_stages = 1;
  CHECK(codegen::print_lowering(*fn, opts).find("cp.async") == std::string::npos);  // no pipeline asked for

  // A loop-invariant A (attention's q): staged once before the loop, noted on the loop.
  auto qk = trace(
      [&] {
        Ptr<bf16> q = param(0), kp = param(1), out = param(2);
        I32 n = param(3);
        Tile r = arange(0, 64), d = arange(0, 64);
        Tile qt = load(q + (r * 64)(_, None) + d(None, _));
        Tile acc = zeros({64, 64}, DType::f32);
        for_range(0, n, 64, [&](I32 n0) { acc = acc + dot(qt, trans(load(kp + ((n0 + r) * 64)(_, None) + d(None, _)))); });
        store(out + (r * 64)(_, None) + d(None, _), acc.to(DType::bf16));
      },
      {P(DType::bf16), P(DType::bf16), P(DType::bf16), S(DType::i32)});
  for (auto &p : qk->params) p.align16 = p.type.is_ptr(), p.div16 = true;
  ir::optimize(*qk);
  opts.arch = "sm_90a";
  opts.num_stages = 2;
  const std::string staged = codegen::print_lowering(*qk, opts);
  INFO(staged);
  CHECK(line_of(staged, " = for ").find("stages a loop-invariant tensor-core A operand in shared memory once") !=
        std::string::npos);
  CHECK(line_of(staged, " = dot ").find("A from shared memory staged before the loop") != std::string::npos);
}
