// The autotuner (include/tilejit/autotune.h): cache lookup, parallel compile, pruning, GPU timing, storing.
#include "tilejit/autotune.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "runtime/autotune_store.h"
#include "runtime/cache.h"
#include "runtime/env.h"
#include "runtime/runtime.h"
#include "tilejit/buffer.h"
#include "tilejit/device.h"
#include "tilejit/error.h"
#include "tilejit/timer.h"

namespace tilejit::autotune {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::mutex g_mutex;                            // guards g_winners
std::map<std::string, Config> g_winners;       // entry hash → winner, for this process

int compile_threads(const Settings &s, size_t jobs) {
  int n = s.threads;
  if (n <= 0) {
    if (auto v = runtime::env_int(runtime::Env::AutotuneThreads)) n = int(std::clamp<int64_t>(*v, 0, 1024));
  }
  if (n <= 0) n = std::clamp(int(std::thread::hardware_concurrency()), 1, 16);
  return std::clamp(n, 1, int(std::max<size_t>(jobs, 1)));
}

// Compiles every candidate on a pool of threads; the trial records the result or the error.
void compile_all(const Tunable &t, const Settings &s, std::vector<Trial> &trials) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < trials.size(); i = next++) {
      try {
        trials[i].compiled = t.compile(trials[i].config);
        trials[i].status = "ok";
      } catch (const std::exception &e) {
        trials[i].status = std::string("failed: ") + e.what();
      }
    }
  };
  int n = compile_threads(s, trials.size());
  std::vector<std::thread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(work);
  work();  // the calling thread works too
  for (auto &th : pool) th.join();
}

void prune(const Settings &s, std::vector<Trial> &trials) {
  int max_smem = s.max_shared_bytes >= 0 ? s.max_shared_bytes : device_info().max_shared_per_block_optin;
  for (Trial &tr : trials) {
    if (tr.status != "ok") continue;
    const Compiled &c = tr.compiled;
    if (c.shared_bytes > max_smem)
      tr.status = fmt::format("pruned: {} B dynamic shared memory > the device's {} B per block", c.shared_bytes,
                              max_smem);
    else if (int64_t(c.num_regs) * c.num_threads > s.max_regs_per_block)
      tr.status = fmt::format("pruned: {} registers × {} threads > {} per block", c.num_regs, c.num_threads,
                              s.max_regs_per_block);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median milliseconds of one launch of `cfg` on the GPU. Each sample repeats the launch enough times to
// last about min_sample_ms, so event resolution (~0.5 µs) does not dominate small kernels.
double time_on_gpu(const Tunable &t, const Settings &s, const Config &cfg, int &rotation) {
  auto launch = [&] {
    t.launch(cfg, t.stream, rotation);
    rotation = (rotation + 1) % std::max(1, t.rotations);
  };
  for (int i = 0; i < s.warmup; ++i) launch();
  GpuTimer timer;
  timer.start(t.stream);
  launch();
  timer.stop(t.stream);
  double estimate = std::max<double>(timer.milliseconds(), 1e-3);
  int inner = std::clamp(int(std::ceil(s.min_sample_ms / estimate)), 1, 1000);
  int repeats = estimate > 5 ? std::min(s.repeats, 5) : s.repeats;  // slow configs: fewer samples
  std::vector<double> samples;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    timer.start(t.stream);
    for (int i = 0; i < inner; ++i) launch();
    timer.stop(t.stream);
    samples.push_back(double(timer.milliseconds()) / inner);
  }
  return median(samples);
}

void time_all(const Tunable &t, const Settings &s, std::vector<Trial> &trials) {
  if (t.snapshot) t.snapshot(t.stream);
  try {
    int rotation = 0;
    for (Trial &tr : trials) {
      if (tr.status != "ok") continue;
      try {
        tr.ms = s.measure ? s.measure(tr.config) : time_on_gpu(t, s, tr.config, rotation);
      } catch (const std::exception &e) {  // e.g. a launch out of resources: drop this config only
        tr.status = std::string("failed: ") + e.what();
      }
    }
  } catch (...) {
    if (t.restore) {
      try {
        t.restore(t.stream);
      } catch (...) {
      }
    }
    throw;
  }
  if (t.restore) t.restore(t.stream);
}

std::string no_survivor_message(const Tunable &t, const std::vector<Trial> &trials) {
  std::string m = fmt::format("autotune of kernel '{}' [{}]: no config can run:", t.kernel, t.key);
  for (const Trial &tr : trials) m += fmt::format("\n  {}: {}", tr.config.str(), tr.status);
  return m;
}

}  // namespace

int Config::get(const std::string &name) const {
  for (const auto &[n, v] : constants)
    if (n == name) return v;
  throw Error(fmt::format("autotune config '{}' has no constant named '{}'", str(), name));
}

int Config::get_or(const std::string &name, int fallback) const {
  for (const auto &[n, v] : constants)
    if (n == name) return v;
  return fallback;
}

std::string Config::str() const {
  std::string s;
  for (const auto &[n, v] : constants) s += fmt::format("{}={} ", n, v);
  return s + fmt::format("num_warps={} num_stages={}", num_warps, num_stages);
}

int64_t pow2_bucket(int64_t x) {
  int64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

std::vector<Config> cartesian(const std::vector<std::pair<std::string, std::vector<int>>> &constants,
                              const std::vector<int> &num_warps, const std::vector<int> &num_stages) {
  std::vector<Config> out{Config{}};
  out[0].constants.clear();
  for (const auto &[name, values] : constants) {
    std::vector<Config> next;
    for (const Config &c : out)
      for (int v : values) {
        Config d = c;
        d.constants.emplace_back(name, v);
        next.push_back(std::move(d));
      }
    out = std::move(next);
  }
  std::vector<Config> result;
  for (const Config &c : out)
    for (int w : num_warps)
      for (int st : num_stages) {
        Config d = c;
        d.num_warps = w;
        d.num_stages = st;
        result.push_back(std::move(d));
      }
  return result;
}

bool print_enabled() { return runtime::env_flag(runtime::Env::PrintAutotuning); }

void clear_memory_cache() {
  std::lock_guard lock(g_mutex);
  g_winners.clear();
}

Result tune(const Tunable &t_in, const Settings &s) {
  if (t_in.configs.empty())
    throw Error(fmt::format("autotune of kernel '{}' [{}]: the candidate list is empty", t_in.kernel, t_in.key));
  if (!t_in.compile || (!t_in.launch && !s.measure))
    throw Error(fmt::format("autotune of kernel '{}': the Tunable needs compile and launch functions", t_in.kernel));
  Tunable t = t_in;
  if (t.arch.empty()) t.arch = runtime::device_arch();
  std::string dir = s.cache_dir.empty() ? runtime::cache_dir() : s.cache_dir;
  std::string entry = entry_name(t);
  Result r;
  r.cache_file = entry_path(dir, entry);

  if (s.use_cache) {
    std::unique_lock lock(g_mutex);
    if (auto it = g_winners.find(entry); it != g_winners.end()) {
      r.best = it->second;
      r.source = "memory";
      return r;
    }
    lock.unlock();
    if (std::optional<Config> c = read_winner(dir, entry, t)) {
      r.best = *c;
      r.source = "disk";
      lock.lock();
      g_winners[entry] = *c;
      lock.unlock();
      if (print_enabled())
        fmt::print(stderr, "tilejit autotune: {} [{}] on {}: {} (from {})\n", t.kernel, t.key, t.arch, c->str(),
                   r.cache_file);
      return r;
    }
  }

  std::vector<Trial> trials;
  for (const Config &c : t.configs) trials.push_back(Trial{c, "", {}, -1});
  auto t0 = Clock::now();
  compile_all(t, s, trials);
  prune(s, trials);
  r.compile_ms = ms_since(t0);
  if (std::none_of(trials.begin(), trials.end(), [](const Trial &tr) { return tr.status == "ok"; }))
    throw Error(no_survivor_message(t, trials));
  auto t1 = Clock::now();
  time_all(t, s, trials);
  r.timing_ms = ms_since(t1);

  const Trial *best = nullptr;
  for (const Trial &tr : trials)
    if (tr.status == "ok" && tr.ms >= 0 && (!best || tr.ms < best->ms)) best = &tr;
  if (!best) throw Error(no_survivor_message(t, trials));
  r.best = best->config;
  r.best_ms = best->ms;
  r.source = "tuned";
  r.trials = std::move(trials);
  {
    std::lock_guard lock(g_mutex);
    g_winners[entry] = r.best;
  }
  write_winner(dir, entry, t, r);
  if (print_enabled()) fmt::print(stderr, "{}", format_result(t, r));
  return r;
}

std::string format_result(const Tunable &t, const Result &r) {
  std::string out = fmt::format("tilejit autotune: {} [{}] on {}", t.kernel, t.key, t.arch);
  if (r.source != "tuned") return out + fmt::format(": {} (cached, {})\n", r.best.str(), r.source);
  out += fmt::format(" — {} configs, compile {:.0f} ms, timing {:.0f} ms\n", r.trials.size(), r.compile_ms,
                     r.timing_ms);
  size_t width = 6;
  for (const Trial &tr : r.trials) width = std::max(width, tr.config.str().size());
  out += fmt::format("  {:<{}}  {:>5}  {:>7}  {:>10}  {:>8}  {}\n", "config", width, "regs", "smem B", "ms",
                     "TFLOP/s", "status");
  for (const Trial &tr : r.trials) {
    std::string ms = tr.ms >= 0 ? fmt::format("{:.4f}", tr.ms) : "-";
    std::string tf = tr.ms > 0 && t.flops > 0 ? fmt::format("{:.1f}", t.flops / (tr.ms * 1e-3) / 1e12) : "-";
    std::string status = tr.status;
    if (status.size() > 100) status = status.substr(0, 97) + "...";
    for (char &c : status)
      if (c == '\n') c = ' ';
    out += fmt::format("  {:<{}}  {:>5}  {:>7}  {:>10}  {:>8}  {}{}\n", tr.config.str(), width, tr.compiled.num_regs,
                       tr.compiled.shared_bytes, ms, tf, status, tr.config == r.best ? "  <== best" : "");
  }
  std::string tf = t.flops > 0 && r.best_ms > 0 ? fmt::format(", {:.1f} TFLOP/s", t.flops / (r.best_ms * 1e-3) / 1e12) : "";
  out += fmt::format("  winner: {} ({:.4f} ms{}); stored in {}\n", r.best.str(), r.best_ms, tf, r.cache_file);
  return out;
}

}  // namespace tilejit::autotune
