// The compile cache end to end on the GPU: a DSL kernel is compiled once, then found in memory, then
// (after forgetting the in-process map) in the on-disk cubin cache; a corrupt cubin falls back to the
// cached PTX, and an empty cache recompiles. Every run's result is checked.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>

#include "runtime/runtime.h"
#include "test_runtime_scoped_env.h"
#include "tilejit/tilejit.h"

using namespace tilejit;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> files_with_extension(const fs::path &dir, const std::string &ext) {
  std::vector<fs::path> out;
  for (auto &e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ext) out.push_back(e.path());
  }
  return out;
}

}  // namespace

TEST_CASE("kernels come from memory, then the disk cache, and corrupt entries are rebuilt", "[gpu][runtime]") {
  std::random_device rd;
  fs::path dir = fs::temp_directory_path() / ("tilejit-gpu-cache-" + std::to_string(rd()));
  testing::ScopedEnv env("TILEJIT_CACHE_DIR", dir.string());

  // A kernel unique to this test (the scale constant), so no other test has loaded it in this process.
  auto scale = Kernel("runtime_cache_scale", [](Ptr<f32> x, Ptr<f32> out, I32 n, Constexpr<int> BLOCK) {
    auto offs = program_id(0) * BLOCK + arange(0, BLOCK);
    auto mask = offs < n;
    store(out + offs, load(x + offs, mask, 0.f) * 3.25f, mask);
  });
  const int n = 3000;
  std::mt19937 rng(rd());
  std::uniform_real_distribution<float> dist(-8.f, 8.f);
  std::vector<float> hx(n);
  for (float &v : hx) v = dist(rng);
  Buffer x(n * 4, Backend::GPU), out(n * 4, Backend::GPU);
  x.upload(hx);

  auto run_and_check = [&](const char *expected_source) {
    out.fill_bytes(0xFF);
    scale.launch(Grid{uint32_t((n + 511) / 512)}, LaunchConfig{.num_warps = 4, .backend = Backend::GPU}, x, out, n,
                 512);
    runtime::CompileStats stats = runtime::last_compile_stats();
    INFO("expected " << expected_source << ", got " << stats.source << " (codegen " << stats.codegen_ms
                     << " ms, link " << stats.link_ms << " ms, load " << stats.load_ms << " ms)");
    CHECK(stats.source == expected_source);
    auto got = out.download_as<float>(n);
    for (int i = 0; i < n; ++i) REQUIRE(got[i] == hx[i] * 3.25f);  // one rounding: exact
  };

  run_and_check("compiled");
  REQUIRE(files_with_extension(dir, ".ptx").size() == 1);
  REQUIRE(files_with_extension(dir, ".cubin").size() == 1);
  // A repeated launch of the same specialization reuses the Kernel's memo of the loaded kernel without
  // asking the runtime again (so the last compile is still the first one).
  run_and_check("compiled");

  runtime::forget_loaded_kernels();
  run_and_check("cubin cache");

  // Flip a bit in the cubin: it is detected, deleted and rebuilt from the cached PTX.
  fs::path cubin = files_with_extension(dir, ".cubin").at(0);
  {
    std::fstream f(cubin, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x04);
    f.seekp(100);
    f.write(&c, 1);
  }
  runtime::forget_loaded_kernels();
  run_and_check("ptx cache");
  CHECK(files_with_extension(dir, ".cubin").size() == 1);

  fs::remove_all(dir);
  runtime::forget_loaded_kernels();
  run_and_check("compiled");
  fs::remove_all(dir);
}
