// The autotuner's logic without a GPU: a fake timing function, fake compile results (registers, shared
// memory) for pruning, the winner, the in-memory and on-disk caches (round trip, corrupt or stale files
// ignored), snapshot/restore of outputs, parallel compilation.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "kernels/launch_options.h"
#include "runtime/autotune_store.h"
#include "runtime/cache.h"
#include "test_runtime_scoped_env.h"
#include "tilejit/attention.h"
#include "tilejit/autotune.h"
#include "tilejit/error.h"

using namespace tilejit;
using namespace tilejit::autotune;
namespace fs = std::filesystem;

namespace {

std::string fresh_dir() {
  std::random_device rd;
  return (fs::temp_directory_path() / ("tilejit-autotune-test-" + std::to_string(rd()) + std::to_string(rd())))
      .string();
}

// A fake kernel: time = 1 ms / (BLOCK_M·BLOCK_N) scaled by warps, so bigger tiles "win" unless pruned.
struct FakeKernel {
  std::atomic<int> compiles{0}, snapshots{0}, restores{0};
  std::mutex mu;
  std::vector<std::string> events;  // "snapshot", "measure <config>", "restore" in order
  Tunable tunable(const std::string &key) {
    Tunable t;
    t.kernel = "fake_kernel";
    t.key = key;
    t.arch = "sm_test";
    t.configs = cartesian({{"BLOCK_M", {32, 64, 128}}, {"BLOCK_N", {32, 64}}}, {4, 8}, {1, 2});
    t.compile = [this](const Config &c) {
      ++compiles;
      int bm = c.get("BLOCK_M"), bn = c.get("BLOCK_N");
      if (bm == 32 && bn == 32 && c.num_warps == 8) throw CompileError("fake compile failure for tiny tiles");
      Compiled r;
      r.num_threads = 32 * c.num_warps;
      r.num_regs = bm == 128 && c.num_warps == 8 ? 255 : 128;  // 255 × 256 = 65280: still fits
      if (bm == 64 && bn == 32 && c.num_warps == 4) r.num_regs = 600;  // 600 × 128 > 64K: pruned
      r.shared_bytes = bm * bn * 2 * c.num_stages * 16;                   // 128·64·2·2·16 = 512 KiB: pruned
      return r;
    };
    t.snapshot = [this](Stream *) {
      ++snapshots;
      std::lock_guard l(mu);
      events.push_back("snapshot");
    };
    t.restore = [this](Stream *) {
      ++restores;
      std::lock_guard l(mu);
      events.push_back("restore");
    };
    t.flops = 1e9;
    return t;
  }
  Settings settings(const std::string &dir) {
    Settings s;
    s.cache_dir = dir;
    s.max_shared_bytes = 232448;  // the H100/H200 opt-in limit
    s.threads = 4;
    s.measure = [this](const Config &c) {
      {
        std::lock_guard l(mu);
        events.push_back("measure " + c.str());
      }
      double ms = 1000.0 / (c.get("BLOCK_M") * c.get("BLOCK_N"));
      return ms * (c.num_warps == 8 ? 0.9 : 1.0) * (c.num_stages == 2 ? 0.95 : 1.0) * (c.get("BLOCK_N") == 64 ? 0.99 : 1.0);
    };
    return s;
  }
};

const Trial &trial_of(const Result &r, const std::string &config) {
  for (const Trial &t : r.trials)
    if (t.config.str() == config) return t;
  FAIL("no trial for " << config);
  throw;
}

}  // namespace

TEST_CASE("autotune configs: cartesian product, canonical text, named constants", "[autotune]") {
  auto cs = cartesian({{"BLOCK_M", {64, 128}}, {"BLOCK_N", {32, 64, 128}}}, {4, 8}, {1, 2, 3});
  REQUIRE(cs.size() == 36);
  CHECK(cs.front().str() == "BLOCK_M=64 BLOCK_N=32 num_warps=4 num_stages=1");
  CHECK(cs.back().str() == "BLOCK_M=128 BLOCK_N=128 num_warps=8 num_stages=3");
  std::set<std::string> distinct;
  for (auto &c : cs) distinct.insert(c.str());
  CHECK(distinct.size() == 36);
  CHECK(cs[7].get("BLOCK_N") == 64);
  CHECK_THROWS_WITH(cs[0].get("BLOCK_K"), Catch::Contains("no constant named 'BLOCK_K'") &&
                                              Catch::Contains("BLOCK_M=64 BLOCK_N=32"));
  CHECK(cartesian({}, {4}, {1}).size() == 1);
}

TEST_CASE("attention candidates: registers capped at 128 (8 warps at two per SM, 4 warps with BLOCK_M=64 at four), "
          "the config reaches the options",
          "[autotune]") {
  auto cs = tilejit::kernels::with_more_per_sm(
      cartesian({{"BLOCK_M", {64, 128}}, {"BLOCK_N", {32, 64, 128}}}, {4, 8}, {1, 2, 3}));
  REQUIRE(cs.size() == 36 + 18 + 9);
  size_t two = 0, four = 0;
  for (const auto &c : cs) {
    int per_sm = c.get_or("MIN_CTAS", 0);
    CHECK((per_sm == 0 || per_sm * c.num_warps == 16));  // 512 threads per SM: 128 registers each
    if (per_sm == 2) ++two;
    if (per_sm == 4) {
      ++four;
      CHECK(c.get("BLOCK_M") == 64);
    }
  }
  CHECK(two == 18);
  CHECK(four == 9);
  CHECK(cs.back().str() == "BLOCK_M=128 BLOCK_N=128 MIN_CTAS=2 num_warps=8 num_stages=3");
  attention::Options o = tilejit::kernels::with_tuned_config(attention::Options{}, cs.back());
  CHECK(o.min_ctas_per_sm == 2);
  CHECK(o.block_m == 128);
  CHECK_FALSE(o.autotune);
  CHECK(tilejit::kernels::with_tuned_config(attention::Options{}, cs.front()).min_ctas_per_sm == 0);
}

TEST_CASE("autotune shape keys bucket sizes to powers of two", "[autotune]") {
  CHECK(pow2_bucket(-5) == 1);
  CHECK(pow2_bucket(1) == 1);
  CHECK(pow2_bucket(1000) == 1024);
  CHECK(pow2_bucket(1024) == 1024);
  CHECK(pow2_bucket(1025) == 2048);
  CHECK(pow2_bucket(int64_t(3) << 40) == int64_t(1) << 42);
}

TEST_CASE("autotune prunes by shared memory and registers, drops failed compiles, picks the fastest",
          "[autotune]") {
  std::string dir = fresh_dir();
  clear_memory_cache();
  FakeKernel fk;
  Tunable t = fk.tunable("prune");
  Result r = tune(t, fk.settings(dir));
  CHECK(r.source == "tuned");
  REQUIRE(r.trials.size() == t.configs.size());
  CHECK(fk.compiles == int(t.configs.size()));  // every candidate compiled before pruning

  // 64×32, 4 warps: 600 registers × 128 threads > 65536.
  CHECK_THAT(trial_of(r, "BLOCK_M=64 BLOCK_N=32 num_warps=4 num_stages=1").status,
             Catch::StartsWith("pruned: 600 registers × 128 threads"));
  // 128×64×2 stages: 524288 B of shared memory > 232448.
  CHECK_THAT(trial_of(r, "BLOCK_M=128 BLOCK_N=64 num_warps=8 num_stages=2").status,
             Catch::StartsWith("pruned: 524288 B dynamic shared memory"));
  // 255 registers × 256 threads = 65280 fits.
  CHECK(trial_of(r, "BLOCK_M=128 BLOCK_N=32 num_warps=8 num_stages=1").status == "ok");
  CHECK_THAT(trial_of(r, "BLOCK_M=32 BLOCK_N=32 num_warps=8 num_stages=1").status,
             Catch::StartsWith("failed: fake compile failure"));

  // The fastest survivor by the fake timing: the largest tile that fits, 8 warps, 2 stages if it fits,
  // BLOCK_N = 64 on a tie. Every 128×64 config has ≥ 262144 B: pruned; 128×32 and 64×64 fit with 1 stage
  // only (131072 B), and 64×64 wins the tie → 1000/4096·0.9·0.99.
  CHECK(r.best.str() == "BLOCK_M=64 BLOCK_N=64 num_warps=8 num_stages=1");
  CHECK(r.best_ms == Approx(1000.0 / 4096 * 0.9 * 0.99));
  for (const Trial &tr : r.trials) {
    if (tr.status == "ok") CHECK(tr.ms >= r.best_ms);
    else CHECK(tr.ms < 0);  // dropped configs are never timed
  }
  // Outputs are snapshot before the first timing and restored after the last, once.
  CHECK(fk.snapshots == 1);
  CHECK(fk.restores == 1);
  REQUIRE(fk.events.size() >= 3);
  CHECK(fk.events.front() == "snapshot");
  CHECK(fk.events.back() == "restore");

  std::string table = format_result(t, r);
  CHECK_THAT(table, Catch::Contains("<== best") && Catch::Contains("winner: BLOCK_M=64 BLOCK_N=64 num_warps=8") &&
                        Catch::Contains("TFLOP/s") && Catch::Contains("pruned: 600 registers"));
  fs::remove_all(dir);
}

TEST_CASE("autotune winners are cached in memory and on disk, corrupt and stale files are ignored",
          "[autotune]") {
  std::string dir = fresh_dir();
  clear_memory_cache();
  FakeKernel fk;
  Tunable t = fk.tunable("cache");
  Settings s = fk.settings(dir);
  Result first = tune(t, s);
  REQUIRE(first.source == "tuned");
  std::string path = entry_path(dir, entry_name(t));
  CHECK(first.cache_file == path);
  REQUIRE(fs::exists(path));
  CHECK_THAT(path, Catch::Contains("autotune-") && Catch::EndsWith(".json"));
  int compiles = fk.compiles;

  SECTION("second call in the process: memory, nothing compiled or timed") {
    Result again = tune(t, s);
    CHECK(again.source == "memory");
    CHECK(again.best == first.best);
    CHECK(fk.compiles == compiles);
    CHECK(fk.snapshots == 1);
  }
  SECTION("a new process (memory forgotten) reads the disk") {
    clear_memory_cache();
    Result again = tune(t, s);
    CHECK(again.source == "disk");
    CHECK(again.best == first.best);
    CHECK(again.trials.empty());
    CHECK(fk.compiles == compiles);
  }
  SECTION("another shape key or another candidate list is another entry") {
    Tunable other = fk.tunable("cache-other-shape");
    CHECK(entry_name(other) != entry_name(t));
    Tunable fewer = t;
    fewer.configs.pop_back();
    CHECK(entry_name(fewer) != entry_name(t));
    Tunable arch = t;
    arch.arch = "sm_other";
    CHECK(entry_name(arch) != entry_name(t));
    CHECK(tune(other, s).source == "tuned");
  }
  SECTION("a corrupt file is ignored (and tuning runs again)") {
    clear_memory_cache();
    {
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(long(runtime::kCacheHeaderBytes) + 5);
      f.write("#####", 5);
    }
    Result again = tune(t, s);
    CHECK(again.source == "tuned");
    CHECK(again.best == first.best);
    CHECK(fk.compiles == 2 * compiles);
    clear_memory_cache();
    CHECK(tune(t, s).source == "disk");  // rewritten
  }
  SECTION("a well-formed file naming a config that is not a candidate is ignored") {
    clear_memory_cache();
    Result fake = first;
    fake.best.constants = {{"BLOCK_M", 4096}, {"BLOCK_N", 1}};
    runtime::write_entry(dir, entry_name(t), "json", winner_payload(t, fake));
    CHECK(tune(t, s).source == "tuned");
  }
  SECTION("garbage JSON with a valid checksum is ignored") {
    clear_memory_cache();
    runtime::write_entry(dir, entry_name(t), "json", "{\"kernel\": \"fake_kernel\", \"key\": ");
    CHECK(tune(t, s).source == "tuned");
  }
  SECTION("use_cache = false tunes again and stores the new winner") {
    Settings again = s;
    again.use_cache = false;
    CHECK(tune(t, again).source == "tuned");
    CHECK(fk.compiles == 2 * compiles);
  }
  SECTION("an unwritable cache directory only loses the disk copy") {
    clear_memory_cache();
    std::string file_not_dir = dir + "/not-a-dir";
    std::ofstream(file_not_dir) << "x";
    Settings bad = s;
    bad.cache_dir = file_not_dir;
    CHECK(tune(t, bad).source == "tuned");
    clear_memory_cache();
    CHECK(tune(t, bad).source == "tuned");
  }
  fs::remove_all(dir);
}

TEST_CASE("autotune reports when no config survives, and restores outputs when timing throws", "[autotune]") {
  std::string dir = fresh_dir();
  clear_memory_cache();
  FakeKernel fk;
  Settings s = fk.settings(dir);

  Tunable none = fk.tunable("none");
  none.compile = [](const Config &c) -> Compiled {
    throw CompileError("cannot lower " + c.str());
  };
  CHECK_THROWS_WITH(tune(none, s), Catch::Contains("no config can run") &&
                                       Catch::Contains("BLOCK_M=32 BLOCK_N=32 num_warps=4 num_stages=1: failed: "
                                                       "cannot lower"));
  CHECK(fk.snapshots == 0);  // nothing was timed, nothing to restore

  Tunable all_fail_timing = fk.tunable("timing-fails");
  Settings throwing = s;
  throwing.measure = [](const Config &) -> double { throw Error("launch failed"); };
  CHECK_THROWS_WITH(tune(all_fail_timing, throwing), Catch::Contains("no config can run") &&
                                                         Catch::Contains("failed: launch failed"));
  CHECK(fk.snapshots == 1);
  CHECK(fk.restores == 1);

  Tunable empty = fk.tunable("empty");
  empty.configs.clear();
  CHECK_THROWS_WITH(tune(empty, s), Catch::Contains("candidate list is empty"));
  fs::remove_all(dir);
}

TEST_CASE("autotune compiles candidates on several threads", "[autotune]") {
  std::string dir = fresh_dir();
  clear_memory_cache();
  FakeKernel fk;
  Tunable t = fk.tunable("threads");
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> running{0}, max_running{0};
  t.compile = [&](const Config &) {
    int now = ++running;
    int prev = max_running;
    while (now > prev && !max_running.compare_exchange_weak(prev, now)) {}
    {
      std::lock_guard l(mu);
      ids.insert(std::this_thread::get_id());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    --running;
    return Compiled{32, 0, 128};
  };
  Settings s = fk.settings(dir);
  s.threads = 4;
  Result r = tune(t, s);
  CHECK(r.source == "tuned");
  CHECK(ids.size() == 4);
  CHECK(max_running > 1);

  testing::ScopedEnv env("TILEJIT_AUTOTUNE_THREADS", "1");
  clear_memory_cache();
  ids.clear();
  s.threads = 0;
  s.use_cache = false;
  tune(t, s);
  CHECK(ids.size() == 1);
  fs::remove_all(dir);
}

TEST_CASE("TILEJIT_PRINT_AUTOTUNING switches the decision printing", "[autotune]") {
  {
    testing::ScopedEnv env("TILEJIT_PRINT_AUTOTUNING", "1");
    CHECK(print_enabled());
  }
  {
    testing::ScopedEnv env("TILEJIT_PRINT_AUTOTUNING", "0");
    CHECK_FALSE(print_enabled());
  }
}

namespace {

// A fake kernel whose compile results and times are scripted per config; it counts compiles and timings per
// config (the pruning tests check what was never compiled or never timed).
struct Scripted {
  std::mutex mu;
  std::map<std::string, int> compiles, measures;
  std::function<Compiled(const Config &)> result = [](const Config &c) {
    return Compiled{64, 1024, 32 * c.num_warps, 0, 0};
  };
  // Default time: bigger tiles are faster, 8 warps a little faster still; `nth` counts this config's timings.
  std::function<double(const Config &, int nth)> time = [](const Config &c, int) {
    return 1000.0 / (c.get("BLOCK_M") * c.get("BLOCK_N")) * (c.num_warps == 8 ? 0.9 : 1.0) *
           (c.get_or("MIN_CTAS", 0) ? 0.8 : 1.0);
  };

  // 21 candidates: BLOCK_M {64,128} × BLOCK_N {32,64,128} × warps {4,8}, one stage count, plus the
  // register-capped ones (8 warps at two per SM, 4 warps with BLOCK_M=64 at four).
  Tunable tunable(const std::string &key) {
    Tunable t;
    t.kernel = "scripted_kernel";
    t.key = key;
    t.arch = "sm_test";
    t.configs = kernels::with_more_per_sm(cartesian({{"BLOCK_M", {64, 128}}, {"BLOCK_N", {32, 64, 128}}}, {4, 8}, {2}));
    t.compile = [this](const Config &c) {
      {
        std::lock_guard l(mu);
        ++compiles[c.str()];
      }
      return result(c);
    };
    return t;
  }
  Settings settings(const std::string &dir) {
    Settings s;
    s.cache_dir = dir;
    s.max_shared_bytes = 232448;
    s.threads = 3;
    s.measure = [this](const Config &c) {
      int nth;
      {
        std::lock_guard l(mu);
        nth = measures[c.str()]++;
      }
      return time(c, nth);
    };
    return s;
  }
  int compiled(const std::string &c) {
    std::lock_guard l(mu);
    return compiles.count(c) ? compiles[c] : 0;
  }
  int measured(const std::string &c) {
    std::lock_guard l(mu);
    return measures.count(c) ? measures[c] : 0;
  }
  size_t distinct_compiled() {
    std::lock_guard l(mu);
    return compiles.size();
  }
};

// Accumulators as in attention with head dim 128: BLOCK_M×128 + BLOCK_M×BLOCK_N f32 over the threads, plus 16.
Estimate attention_like(const Config &c) {
  int threads = 32 * c.num_warps, bm = c.get("BLOCK_M"), bn = c.get("BLOCK_N");
  return Estimate{bn * 256 * 2, (bm * 128 + bm * bn) / threads + 16, c.get_or("MIN_CTAS", 0)};
}

const char *kBig = "BLOCK_M=128 BLOCK_N=128 num_warps=8 num_stages=2";
const char *kCapped = "BLOCK_M=128 BLOCK_N=64 MIN_CTAS=2 num_warps=8 num_stages=2";
const char *kSmall = "BLOCK_M=64 BLOCK_N=32 MIN_CTAS=4 num_warps=4 num_stages=2";

Config config_of(const Tunable &t, const std::string &text) {
  for (const Config &c : t.configs)
    if (c.str() == text) return c;
  FAIL("no candidate " << text);
  throw;
}

}  // namespace

TEST_CASE("register_cap: what ptxas may use per thread for min_ctas_per_sm programs per SM", "[autotune]") {
  CHECK(register_cap(256, 2) == 128);  // 8 warps at two per SM
  CHECK(register_cap(128, 4) == 128);  // 4 warps at four per SM
  CHECK(register_cap(256, 0) == 255);  // uncapped: the ISA's limit
  CHECK(register_cap(128, 1) == 255);
  CHECK(register_cap(1024, 0) == 64);  // one block of 1024 threads shares 64K registers
  CHECK(register_cap(96, 3) == 224);   // 65536 / 288 = 227, allocated in multiples of 8
  CHECK_THROWS_WITH(register_cap(0, 1), Catch::Contains("0 threads"));
}

TEST_CASE("autotune estimates prune before compiling: accumulators over the register cap, shared memory",
          "[autotune]") {
  std::string dir = fresh_dir();
  clear_memory_cache();
  Scripted k;
  Tunable t = k.tunable("estimates");
  t.estimate = attention_like;
  Result r = tune(t, k.settings(dir));
  REQUIRE(r.trials.size() == 21);
  // (128·128 + 128·128) / 128 + 16 = 272 > 255; (128·128 + 128·128) / 256 + 16 = 144 > 128 at two per SM;
  // (64·128 + 64·128) / 128 + 16 = 144 > 128 at four per SM. Everything else fits.
  CHECK_THAT(trial_of(r, "BLOCK_M=128 BLOCK_N=128 num_warps=4 num_stages=2").status,
             Catch::Equals("pruned before compiling: needs at least 272 registers per thread > the cap of 255 for 128 "
                           "threads (it would spill)"));
  CHECK_THAT(trial_of(r, "BLOCK_M=128 BLOCK_N=128 MIN_CTAS=2 num_warps=8 num_stages=2").status,
             Catch::Equals("pruned before compiling: needs at least 144 registers per thread > the cap of 128 for 256 "
                           "threads at 2 programs per SM (it would spill)"));
  CHECK_THAT(trial_of(r, "BLOCK_M=64 BLOCK_N=128 MIN_CTAS=4 num_warps=4 num_stages=2").status,
             Catch::StartsWith("pruned before compiling: needs at least 144 registers per thread > the cap of 128"));
  CHECK(trial_of(r, kCapped).status == "ok");  // 64 + 32 + 16 = 112 ≤ 128
  CHECK(k.distinct_compiled() == 18);
  for (const char *c : {"BLOCK_M=128 BLOCK_N=128 num_warps=4 num_stages=2",
                        "BLOCK_M=128 BLOCK_N=128 MIN_CTAS=2 num_warps=8 num_stages=2"}) {
    CHECK(k.compiled(c) == 0);
    CHECK(trial_of(r, c).compile_ms < 0);
    CHECK(trial_of(r, c).ms < 0);
  }
  CHECK(r.best.str() == kBig);  // the fastest that fits: 144 ≤ 255 registers

  // Shared memory: a lower bound above the device's limit is not compiled either.
  Settings small = k.settings(dir);
  small.max_shared_bytes = 40000;  // BLOCK_N=128: 65536 B > 40000; BLOCK_N=64: 32768 fits
  small.use_cache = false;
  Result r2 = tune(t, small);
  CHECK_THAT(trial_of(r2, kBig).status,
             Catch::Equals("pruned before compiling: needs at least 65536 B shared memory > the device's 40000 B per "
                           "block"));
  CHECK(k.compiled(kBig) == 1);  // from the first tuning only
  fs::remove_all(dir);
}

TEST_CASE("autotune priors: only the configs that won the class are compiled, stray entries are ignored",
          "[autotune]") {
  std::string dir = fresh_dir();
  clear_memory_cache();
  Scripted k;
  Tunable t = k.tunable("prior");
  t.estimate = attention_like;
  Config not_a_candidate{8, 2, {{"BLOCK_M", 256}, {"BLOCK_N", 256}}};
  t.prior = {config_of(t, kCapped), config_of(t, kSmall), not_a_candidate};
  Result r = tune(t, k.settings(dir));
  CHECK(k.distinct_compiled() == 2);
  CHECK(k.compiled(kCapped) == 1);
  CHECK(k.compiled(kSmall) == 1);
  CHECK(r.best.str() == kCapped);
  CHECK_THAT(trial_of(r, kBig).status,
             Catch::Equals("pruned before compiling: never won this class of shape on sm_test "
                           "(TILEJIT_AUTOTUNE_FULL=1 tries it)"));
  // An estimate's reason wins over the prior's for configs both would skip.
  CHECK_THAT(trial_of(r, "BLOCK_M=128 BLOCK_N=128 num_warps=4 num_stages=2").status,
             Catch::StartsWith("pruned before compiling: needs at least 272 registers"));
  std::string table = format_result(t, r);
  CHECK_THAT(table, Catch::Contains("21 configs, 2 compiled, 2 timed") && Catch::Contains("never won this class"));

  SECTION("a prior that names no contender says nothing: every contender is compiled") {
    Tunable stray = k.tunable("prior-stray");
    stray.estimate = attention_like;
    // Not a candidate, and a candidate the estimate rules out.
    stray.prior = {not_a_candidate, config_of(stray, "BLOCK_M=128 BLOCK_N=128 MIN_CTAS=2 num_warps=8 num_stages=2")};
    Result rs = tune(stray, k.settings(dir));
    CHECK(rs.source == "tuned");
    for (const Trial &tr : rs.trials) CHECK_THAT(tr.status, !Catch::Contains("never won"));
    CHECK(rs.best.str() == kBig);
  }
  fs::remove_all(dir);
}

TEST_CASE("autotune pruning never removes every config", "[autotune]") {
  std::string dir = fresh_dir();
  clear_memory_cache();
  Scripted k;
  Settings s = k.settings(dir);

  SECTION("the prior's configs fail to compile: the others are compiled next") {
    Tunable t = k.tunable("prior-fails");
    t.prior = {config_of(t, kCapped), config_of(t, kSmall)};
    k.result = [](const Config &c) -> Compiled {
      if (c.str() == kCapped || c.str() == kSmall) throw CompileError("no such luck for " + c.str());
      return Compiled{64, 1024, 32 * c.num_warps, 0, 0};
    };
    Result r = tune(t, s);
    CHECK(r.source == "tuned");
    CHECK(k.distinct_compiled() == 21);
    for (const auto &[c, n] : k.compiles) CHECK(n == 1);  // each compiled once, in its round
    CHECK_THAT(trial_of(r, kCapped).status, Catch::StartsWith("failed: no such luck"));
    CHECK(r.best.str() == "BLOCK_M=128 BLOCK_N=128 MIN_CTAS=2 num_warps=8 num_stages=2");
  }
  SECTION("spilling configs outside the prior are not timed; the prior's are (they won with their spills)") {
    Tunable t = k.tunable("spills");
    const std::string other = "BLOCK_M=128 BLOCK_N=128 MIN_CTAS=2 num_warps=8 num_stages=2";
    k.result = [&](const Config &c) {
      bool spills = c.str() == kCapped || c.str() == other;
      return Compiled{128, 1024, 32 * c.num_warps, spills ? 8 : 0, spills ? 12 : 0};
    };
    Result r = tune(t, s);  // no prior: every spilling config is dropped
    CHECK(k.distinct_compiled() == 21);
    CHECK_THAT(trial_of(r, kCapped).status, Catch::Equals("pruned: spills 8 B / reloads 12 B per thread (ptxas)"));
    CHECK_THAT(trial_of(r, other).status, Catch::StartsWith("pruned: spills"));
    CHECK(k.measured(kCapped) == 0);
    CHECK(k.measured(other) == 0);
    CHECK(r.best.str() == kBig);  // the fastest that does not spill
    CHECK_THAT(format_result(t, r), Catch::Contains("8/12"));

    Tunable with_prior = k.tunable("spills-prior");
    with_prior.prior = {config_of(with_prior, kCapped), config_of(with_prior, kSmall)};
    Result rp = tune(with_prior, s);
    CHECK(trial_of(rp, kCapped).status == "ok");
    CHECK(rp.best.str() == kCapped);
    CHECK(k.compiled(kBig) == 1);  // from the first tuning only
  }
  SECTION("every config is over its estimate: all are compiled after all") {
    Tunable t = k.tunable("estimate-all");
    t.estimate = [](const Config &) { return Estimate{0, 1000, 0}; };
    Result r = tune(t, s);
    CHECK(k.distinct_compiled() == 21);
    CHECK(r.best.str() == "BLOCK_M=128 BLOCK_N=128 MIN_CTAS=2 num_warps=8 num_stages=2");
    for (const Trial &tr : r.trials) CHECK(tr.status == "ok");
  }
  SECTION("every config spills: they are all timed") {
    Tunable t = k.tunable("all-spill");
    k.result = [](const Config &c) { return Compiled{255, 1024, 32 * c.num_warps, 4, 4}; };
    Result r = tune(t, s);
    for (const Trial &tr : r.trials) CHECK(tr.status == "ok");
    CHECK(r.best.str() == "BLOCK_M=128 BLOCK_N=128 MIN_CTAS=2 num_warps=8 num_stages=2");
  }
  SECTION("spill counts unknown (-1) are not spills") {
    Tunable t = k.tunable("unknown-spills");
    k.result = [](const Config &c) { return Compiled{64, 1024, 32 * c.num_warps, -1, -1}; };
    Result r = tune(t, s);
    for (const Trial &tr : r.trials) CHECK(tr.status == "ok");
  }
  fs::remove_all(dir);
}

TEST_CASE("autotune screens survivors with one sample and times the fastest few again", "[autotune]") {
  std::string dir = fresh_dir();
  clear_memory_cache();
  Scripted k;
  Tunable t = k.tunable("screen");
  // A config that looks best in its screening sample but is slower when timed properly, two steady ones, and
  // the rest clearly slower.
  const std::string lucky = "BLOCK_M=64 BLOCK_N=32 num_warps=4 num_stages=2";
  const std::string steady = "BLOCK_M=64 BLOCK_N=64 num_warps=4 num_stages=2";
  const std::string third = "BLOCK_M=64 BLOCK_N=128 num_warps=4 num_stages=2";
  k.time = [&](const Config &c, int nth) {
    if (c.str() == lucky) return nth == 0 ? 1.0 : 3.0;
    if (c.str() == steady) return 2.0;
    if (c.str() == third) return 2.5;
    return 10.0;
  };
  Settings s = k.settings(dir);
  s.finalists = 3;
  Result r = tune(t, s);
  CHECK(r.best.str() == steady);
  CHECK(r.best_ms == 2.0);
  for (const Trial &tr : r.trials) {
    bool finalist = tr.config.str() == lucky || tr.config.str() == steady || tr.config.str() == third;
    INFO(tr.config.str());
    CHECK(k.measured(tr.config.str()) == (finalist ? 2 : 1));
    CHECK(tr.samples == (finalist ? s.repeats : 1));
    CHECK(tr.finalist == finalist);
  }
  CHECK(trial_of(r, lucky).ms == 3.0);  // its final timing replaces the screening sample
  CHECK_THAT(format_result(t, r), Catch::Contains("21 timed (3 finalists)"));

  SECTION("finalists = 0: every survivor is timed fully, once") {
    Scripted k2;
    Tunable t2 = k2.tunable("screen-off");
    Settings s2 = k2.settings(dir);
    s2.finalists = 0;
    Result r2 = tune(t2, s2);
    for (const Trial &tr : r2.trials) {
      CHECK(k2.measured(tr.config.str()) == 1);
      CHECK(tr.samples == s2.repeats);
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("autotune full search (Settings::full_search, TILEJIT_AUTOTUNE_FULL=1) compiles and times everything",
          "[autotune]") {
  std::string dir = fresh_dir();
  clear_memory_cache();
  Scripted k;
  k.result = [](const Config &c) {
    bool spills = c.get("BLOCK_N") == 128;
    return Compiled{200, 1024, 32 * c.num_warps, spills ? 16 : 0, spills ? 16 : 0};
  };
  Tunable t = k.tunable("full");
  t.estimate = attention_like;
  t.prior = {config_of(t, kSmall)};
  Settings s = k.settings(dir);

  {
    testing::ScopedEnv off("TILEJIT_AUTOTUNE_FULL", "0");
    CHECK_FALSE(full_search(s));
    Result pruned = tune(t, s);
    CHECK(pruned.source == "tuned");
    CHECK_FALSE(pruned.full_search);
    CHECK(k.distinct_compiled() == 1);
    CHECK(pruned.best.str() == kSmall);
  }
  Result full;
  {
    testing::ScopedEnv on("TILEJIT_AUTOTUNE_FULL", "1");
    CHECK(full_search(s));
    // The pruned winner, in memory and on disk, does not answer a full search.
    full = tune(t, s);
    CHECK(full.source == "tuned");
    CHECK(full.full_search);
    CHECK(k.distinct_compiled() == 21);
    for (const Trial &tr : full.trials) {
      CHECK(tr.status == "ok");  // spilling and over-estimate configs included
      CHECK(tr.samples == s.repeats);
    }
    CHECK(full.best.str() == "BLOCK_M=128 BLOCK_N=128 MIN_CTAS=2 num_warps=8 num_stages=2");
    CHECK_THAT(format_result(t, full), Catch::Contains("full search"));
    CHECK(tune(t, s).source == "memory");
  }
  // A full search's winner answers later pruned searches, from memory and from disk.
  Result again = tune(t, s);
  CHECK(again.source == "memory");
  CHECK(again.best == full.best);
  clear_memory_cache();
  again = tune(t, s);
  CHECK(again.source == "disk");
  CHECK(again.best == full.best);
  Settings full_setting = s;
  full_setting.full_search = true;
  CHECK(tune(t, full_setting).source == "memory");
  clear_memory_cache();
  CHECK(tune(t, full_setting).source == "disk");

  // Pruned again (use_cache = false stores a pruned winner): a full search tunes anew.
  Settings fresh = s;
  fresh.use_cache = false;
  CHECK_FALSE(tune(t, fresh).full_search);
  clear_memory_cache();
  CHECK(tune(t, full_setting).source == "tuned");
  fs::remove_all(dir);
}
