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
std::map<std::string, StoredWinner> g_winners; // entry hash → winner, for this process

int compile_threads(const Settings &s, size_t jobs) {
  int n = s.threads;
  if (n <= 0) {
    if (auto v = runtime::env_int(runtime::Env::AutotuneThreads)) n = int(std::clamp<int64_t>(*v, 0, 1024));
  }
  if (n <= 0) n = std::clamp(int(std::thread::hardware_concurrency()), 1, 16);
  return std::clamp(n, 1, int(std::max<size_t>(jobs, 1)));
}

// Compiles the trials at `which` on a pool of threads; each trial records the result or the error and its wall
// time. get_kernel runs codegen and the driver's link outside its lock, so both overlap across threads.
void compile_all(const Tunable &t, const Settings &s, std::vector<Trial> &trials, const std::vector<size_t> &which) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t j = next++; j < which.size(); j = next++) {
      Trial &tr = trials[which[j]];
      auto t0 = Clock::now();
      try {
        tr.compiled = t.compile(tr.config);
        tr.status = "ok";
      } catch (const std::exception &e) {
        tr.status = std::string("failed: ") + e.what();
      }
      tr.compile_ms = ms_since(t0);
    }
  };
  int n = compile_threads(s, which.size());
  std::vector<std::thread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(work);
  work();  // the calling thread works too
  for (auto &th : pool) th.join();
}

int max_shared(const Settings &s) {
  return s.max_shared_bytes >= 0 ? s.max_shared_bytes : device_info().max_shared_per_block_optin;
}

// Drops compiled configs that cannot run on the device.
void prune(const Settings &s, std::vector<Trial> &trials, const std::vector<size_t> &which) {
  int max_smem = max_shared(s);
  for (size_t i : which) {
    Trial &tr = trials[i];
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

bool is_ok(const Trial &tr) { return tr.status == "ok"; }
bool in_prior(const Tunable &t, const Config &c) {
  return std::find(t.prior.begin(), t.prior.end(), c) != t.prior.end();
}

std::string spill_status(const Compiled &c) {
  return fmt::format("pruned: spills {} B / reloads {} B per thread (ptxas)", c.spill_stores, c.spill_loads);
}

// Before compiling: why the Tunable's estimate says the config cannot run well ("" when it can).
std::string over_estimate(const Tunable &t, const Settings &s, const Config &c, int max_smem) {
  if (!t.estimate) return "";
  Estimate e = t.estimate(c);
  if (e.shared_bytes > max_smem)
    return fmt::format("pruned before compiling: needs at least {} B shared memory > the device's {} B per block",
                       e.shared_bytes, max_smem);
  int threads = 32 * c.num_warps;
  int cap = register_cap(threads, e.min_ctas_per_sm, s.max_regs_per_block);
  if (e.registers > cap)
    return fmt::format("pruned before compiling: needs at least {} registers per thread > the cap of {} for {} "
                       "threads{} (it would spill)",
                       e.registers, cap, threads,
                       e.min_ctas_per_sm > 1 ? fmt::format(" at {} programs per SM", e.min_ctas_per_sm) : "");
  return "";
}

// Compiles in rounds until some config can be timed: first the contenders (round 0), then the configs outside
// the prior (1), then those over an estimate (2). Configs never compiled keep their pruning reason. Spilling
// configs are dropped, except those of the prior (they won with their spills) and unless every compiled config
// that runs spills.
void compile_and_prune(const Tunable &t, const Settings &s, std::vector<Trial> &trials, bool full) {
  std::vector<int> round(trials.size(), 0);
  if (!full) {
    int max_smem = t.estimate ? max_shared(s) : 0;
    for (size_t i = 0; i < trials.size(); ++i) {
      std::string why = over_estimate(t, s, trials[i].config, max_smem);
      if (!why.empty()) {
        trials[i].status = why;
        round[i] = 2;
      }
    }
    bool any = false;  // a prior that names none of the contenders says nothing about this candidate list
    for (size_t i = 0; i < trials.size(); ++i) any |= round[i] == 0 && in_prior(t, trials[i].config);
    if (any)
      for (size_t i = 0; i < trials.size(); ++i)
        if (round[i] == 0 && !in_prior(t, trials[i].config)) {
          trials[i].status = fmt::format("pruned before compiling: never won this class of shape on {} "
                                         "(TILEJIT_AUTOTUNE_FULL=1 tries it)",
                                         t.arch);
          round[i] = 1;
        }
  }
  auto timeable = [&](const Trial &tr) { return is_ok(tr) && (!tr.compiled.spills() || in_prior(t, tr.config)); };
  for (int r = 0; r <= 2; ++r) {
    std::vector<size_t> which;
    for (size_t i = 0; i < trials.size(); ++i)
      if (round[i] == r) which.push_back(i);
    if (which.empty()) continue;
    compile_all(t, s, trials, which);
    prune(s, trials, which);
    if (full || std::any_of(trials.begin(), trials.end(), timeable)) break;
  }
  if (full || !std::any_of(trials.begin(), trials.end(), timeable)) return;  // all spill: keep them
  for (Trial &tr : trials)
    if (is_ok(tr) && !timeable(tr)) tr.status = spill_status(tr.compiled);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// How many launches make one sample last about min_sample_ms, given one launch's time.
int inner_launches(const Settings &s, double one_launch_ms) {
  return std::clamp(int(std::ceil(s.min_sample_ms / std::max(one_launch_ms, 1e-3))), 1, 1000);
}

struct Launcher {
  const Tunable &t;
  int rotation = 0;
  void operator()(const Config &cfg) {
    t.launch(cfg, t.stream, rotation);
    rotation = (rotation + 1) % std::max(1, t.rotations);
  }
};

// Screening: one warm-up launch (the module's first launch loads it), then one sample. A config whose single
// timed launch is already twice the best screened so far is clearly losing: that launch is its sample.
double screen_on_gpu(const Tunable &t, const Settings &s, const Config &cfg, Launcher &launch, double best_ms) {
  launch(cfg);
  GpuTimer timer;
  timer.start(t.stream);
  launch(cfg);
  timer.stop(t.stream);
  double one = std::max<double>(timer.milliseconds(), 1e-3);
  if (one >= s.min_sample_ms || (best_ms > 0 && one > 2 * best_ms)) return one;
  int inner = inner_launches(s, one);
  timer.start(t.stream);
  for (int i = 0; i < inner; ++i) launch(cfg);
  timer.stop(t.stream);
  return double(timer.milliseconds()) / inner;
}

// Median milliseconds of one launch of `cfg` on the GPU. Each sample repeats the launch enough times to
// last about min_sample_ms, so event resolution (~0.5 µs) does not dominate small kernels.
double time_on_gpu(const Tunable &t, const Settings &s, const Config &cfg, Launcher &launch, int &samples) {
  for (int i = 0; i < s.warmup; ++i) launch(cfg);
  GpuTimer timer;
  timer.start(t.stream);
  launch(cfg);
  timer.stop(t.stream);
  double estimate = std::max<double>(timer.milliseconds(), 1e-3);
  int inner = inner_launches(s, estimate);
  int repeats = std::max(1, estimate > 5 ? std::min(s.repeats, 5) : s.repeats);  // slow configs: fewer samples
  std::vector<double> v;
  for (int r = 0; r < repeats; ++r) {
    timer.start(t.stream);
    for (int i = 0; i < inner; ++i) launch(cfg);
    timer.stop(t.stream);
    v.push_back(double(timer.milliseconds()) / inner);
  }
  samples = repeats;
  return median(v);
}

// Times the ok trials: each once (screening), then the `finalists` fastest with the full protocol — or, for a
// full search or few survivors, all of them with the full protocol. A config whose launch throws (e.g. out of
// resources) is dropped; the others go on.
void time_all(const Tunable &t, const Settings &s, std::vector<Trial> &trials, bool full) {
  std::vector<Trial *> ok;
  for (Trial &tr : trials)
    if (is_ok(tr)) ok.push_back(&tr);
  Launcher launch{t};
  auto run = [&](Trial &tr, bool final_timing, double best_ms) {
    try {
      tr.finalist = final_timing;
      if (s.measure) {
        tr.ms = s.measure(tr.config);
        tr.samples = final_timing ? std::max(1, s.repeats) : 1;
      } else if (final_timing) {
        tr.ms = time_on_gpu(t, s, tr.config, launch, tr.samples);
      } else {
        tr.ms = screen_on_gpu(t, s, tr.config, launch, best_ms);
        tr.samples = 1;
      }
    } catch (const std::exception &e) {
      tr.status = std::string("failed: ") + e.what();
      tr.ms = -1;
      tr.samples = 0;
      tr.finalist = false;
    }
  };
  if (t.snapshot) t.snapshot(t.stream);
  try {
    if (full || s.finalists <= 0 || ok.size() <= size_t(s.finalists)) {
      for (Trial *tr : ok) run(*tr, true, -1);
    } else {
      double best = -1;
      for (Trial *tr : ok) {
        run(*tr, false, best);
        if (is_ok(*tr) && (best < 0 || tr->ms < best)) best = tr->ms;
      }
      std::vector<Trial *> screened;
      for (Trial *tr : ok)
        if (is_ok(*tr)) screened.push_back(tr);
      std::stable_sort(screened.begin(), screened.end(), [](const Trial *a, const Trial *b) { return a->ms < b->ms; });
      for (size_t i = 0; i < screened.size() && i < size_t(s.finalists); ++i) run(*screened[i], true, -1);
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

bool full_search(const Settings &s) { return s.full_search || runtime::env_flag(runtime::Env::AutotuneFull); }

int register_cap(int threads, int min_ctas_per_sm, int regs_per_sm) {
  if (threads <= 0) throw Error(fmt::format("register_cap: {} threads per block", threads));
  int per_thread = regs_per_sm / (std::max(1, min_ctas_per_sm) * threads);
  return std::min(255, per_thread / 8 * 8);
}

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
  bool full = full_search(s);
  Result r;
  r.cache_file = entry_path(dir, entry);

  if (s.use_cache) {
    std::unique_lock lock(g_mutex);
    if (auto it = g_winners.find(entry); it != g_winners.end() && (it->second.full || !full)) {
      r.best = it->second.config;
      r.source = "memory";
      return r;
    }
    lock.unlock();
    if (std::optional<StoredWinner> w = read_winner(dir, entry, t); w && (w->full || !full)) {
      r.best = w->config;
      r.source = "disk";
      lock.lock();
      g_winners[entry] = *w;
      lock.unlock();
      if (print_enabled())
        fmt::print(stderr, "tilejit autotune: {} [{}] on {}: {} (from {})\n", t.kernel, t.key, t.arch,
                   w->config.str(), r.cache_file);
      return r;
    }
  }

  std::vector<Trial> trials;
  for (const Config &c : t.configs) trials.push_back(Trial{c, "", {}, -1, 0, false, -1});
  auto t0 = Clock::now();
  compile_and_prune(t, s, trials, full);
  r.compile_ms = ms_since(t0);
  if (std::none_of(trials.begin(), trials.end(), is_ok)) throw Error(no_survivor_message(t, trials));
  auto t1 = Clock::now();
  time_all(t, s, trials, full);
  r.timing_ms = ms_since(t1);

  // The winner is the fastest finalist (screening samples only chose the finalists).
  const Trial *best = nullptr;
  for (const Trial &tr : trials)
    if (is_ok(tr) && tr.finalist && tr.ms >= 0 && (!best || tr.ms < best->ms)) best = &tr;
  if (!best) throw Error(no_survivor_message(t, trials));
  r.best = best->config;
  r.best_ms = best->ms;
  r.source = "tuned";
  r.full_search = full;
  r.trials = std::move(trials);
  {
    std::lock_guard lock(g_mutex);
    g_winners[entry] = StoredWinner{r.best, full};
  }
  write_winner(dir, entry, t, r);
  if (print_enabled()) fmt::print(stderr, "{}", format_result(t, r));
  return r;
}

std::string format_result(const Tunable &t, const Result &r) {
  std::string out = fmt::format("tilejit autotune: {} [{}] on {}", t.kernel, t.key, t.arch);
  if (r.source != "tuned") return out + fmt::format(": {} (cached, {})\n", r.best.str(), r.source);
  size_t compiled = 0, timed = 0, finalists = 0;
  for (const Trial &tr : r.trials) {
    compiled += tr.compile_ms >= 0;
    timed += tr.samples > 0;
    finalists += tr.finalist;
  }
  out += fmt::format(" — {} configs, {} compiled, {} timed ({} finalists){}; compile {:.0f} ms, timing {:.0f} ms\n",
                     r.trials.size(), compiled, timed, finalists, r.full_search ? ", full search" : "", r.compile_ms,
                     r.timing_ms);
  size_t width = 6;
  for (const Trial &tr : r.trials) width = std::max(width, tr.config.str().size());
  out += fmt::format("  {:<{}}  {:>5}  {:>9}  {:>7}  {:>10}  {:>10}  {:>3}  {:>8}  {}\n", "config", width, "regs",
                     "spill B", "smem B", "compile ms", "ms", "n", "TFLOP/s", "status");
  for (const Trial &tr : r.trials) {
    bool built = tr.compile_ms >= 0;
    std::string regs = built ? std::to_string(tr.compiled.num_regs) : "-";
    std::string smem = built ? std::to_string(tr.compiled.shared_bytes) : "-";
    std::string spill = built && tr.compiled.spill_stores >= 0
                            ? fmt::format("{}/{}", tr.compiled.spill_stores, tr.compiled.spill_loads)
                            : "-";
    std::string cms = built ? fmt::format("{:.0f}", tr.compile_ms) : "-";
    std::string ms = tr.ms >= 0 ? fmt::format("{:.4f}", tr.ms) : "-";
    std::string n = tr.samples > 0 ? std::to_string(tr.samples) : "-";
    std::string tf = tr.ms > 0 && t.flops > 0 ? fmt::format("{:.1f}", t.flops / (tr.ms * 1e-3) / 1e12) : "-";
    std::string status = tr.status;
    if (status.size() > 110) status = status.substr(0, 107) + "...";
    for (char &c : status)
      if (c == '\n') c = ' ';
    out += fmt::format("  {:<{}}  {:>5}  {:>9}  {:>7}  {:>10}  {:>10}  {:>3}  {:>8}  {}{}\n", tr.config.str(), width,
                       regs, spill, smem, cms, ms, n, tf, status, tr.config == r.best ? "  <== best" : "");
  }
  std::string tf = t.flops > 0 && r.best_ms > 0 ? fmt::format(", {:.1f} TFLOP/s", t.flops / (r.best_ms * 1e-3) / 1e12) : "";
  out += fmt::format("  winner: {} ({:.4f} ms{}); stored in {}\n", r.best.str(), r.best_ms, tf, r.cache_file);
  return out;
}

std::string memo_key(const std::string &key, const std::string &arch, const Settings &s) {
  return key + " " + arch + (full_search(s) ? " full " : " ") + runtime::env_tuning_key();
}

}  // namespace tilejit::autotune
