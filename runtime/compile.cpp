// get_kernel: compile key → in-process map → on-disk cubin → on-disk PTX → codegen, then load.
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <dlfcn.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include "codegen/codegen.h"
#include "codegen/specialize_warps.h"
#include "ir/passes.h"
#include "runtime/cache.h"
#include "runtime/codegen_options.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/env.h"
#include "runtime/kernel_artifact.h"
#include "runtime/module.h"
#include "runtime/runtime.h"
#include "runtime/stage_dump.h"
#include "tilejit/error.h"

#ifndef TILEJIT_VERSION
#define TILEJIT_VERSION "unknown"
#endif

namespace tilejit::runtime {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::mutex g_mutex;  // guards the maps below (not held while compiling)
std::map<std::string, std::unique_ptr<LoadedKernel>> g_kernels;
std::map<std::string, std::shared_future<const LoadedKernel *>> g_building;  // keys being built now
CompileStats g_last_stats;

// How the parameters were specialized: part of the key, since codegen may rely on it.
std::string specialization(const ir::Function &fn) {
  std::string s;
  for (const ir::ParamInfo &p : fn.params) {
    s += fmt::format("{}:{}:{}{};", p.name, p.type.str(), p.align16 ? "a16" : "", p.div16 ? "d16" : "");
  }
  return s;
}


// Key of the PTX: everything codegen's output depends on. v3: sm_90 kernels wait for the previous grid, and the
// runtime launches them as programmatic dependents, so no entry written before that may be reused.
std::string ptx_key(const ir::Function &fn, const codegen::CodegenOptions &opts) {
  return hash_key({"tilejit-ptx-v3", TILEJIT_VERSION, build_id(), codegen::llvm_version(), opts.arch,
                   std::to_string(opts.num_warps), std::to_string(opts.num_stages),
                   "minctas" + std::to_string(opts.min_ctas_per_sm), opts.wgmma ? "wgmma" : "mma",
                   opts.tma ? "tma" : "cp.async", opts.warp_specialize ? "ws" : "", env_code_key(),
                   specialization(fn),
                   ir::print(fn)});
}

// Key of the cubin: the PTX's key plus what the driver's JIT output depends on.
std::string cubin_key(const std::string &ptx_key) {
  const DeviceInfo &dev = current_device();
  return hash_key({"tilejit-cubin-v1", ptx_key, fmt::format("cc{}.{}", dev.cc_major, dev.cc_minor),
                   std::to_string(driver().version)});
}

std::optional<KernelArtifact> read_artifact(const std::string &dir, const std::string &key, const char *ext) {
  std::optional<std::string> bytes = read_entry(dir, key, ext);
  if (!bytes) return std::nullopt;
  return decode_artifact(*bytes);
}

// The cache is an optimization: a failed write (read-only directory, full disk) is only reported.
void write_artifact(const std::string &dir, const std::string &key, const char *ext, const KernelArtifact &a) {
  try {
    write_entry(dir, key, ext, encode_artifact(a));
  } catch (const Error &e) {
    debug_log("{}", e.what());
  }
}

// The registered variables that change generated code (runtime/env.def), applied to opts.
void apply_env(codegen::CodegenOptions &opts) {
  if (env_flag(Env::DisableWgmma)) opts.wgmma = false;
  if (env_flag(Env::Tma)) opts.tma = true;
  if (env_flag(Env::WarpSpecialize)) opts.tma = opts.warp_specialize = true;
}

}  // namespace

// This build of the library: the size and modification time of the loaded binary that holds this code. The
// version string alone would let a rebuilt library with different codegen (same version) reuse stale PTX.
const std::string &build_id() {
  static const std::string id = [] {
    Dl_info info{};
    struct stat st {};
    if (dladdr(reinterpret_cast<const void *>(&build_id), &info) && info.dli_fname && stat(info.dli_fname, &st) == 0)
      return fmt::format("{}-{}.{}", st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    return std::string("unknown-build");
  }();
  return id;
}

void check_warps_and_stages(const std::string &kernel, const LaunchConfig &cfg) {
  const int w = cfg.num_warps;
  if (w < 1 || w > 32 || (w & (w - 1)))
    throw Error(fmt::format("kernel {}: num_warps must be a power of two in [1, 32], got {}", kernel, w));
  if (cfg.num_stages < 1 || cfg.num_stages > 8)
    throw Error(fmt::format("kernel {}: num_stages must be in [1, 8], got {}", kernel, cfg.num_stages));
}

bool warp_specialization_fits(int num_warps, int min_ctas_per_sm) {
  return codegen::producer_warpgroup_fits(num_warps, min_ctas_per_sm);
}

bool env_fixes_copy_method() {
  return env_flag(Env::Tma) || env_flag(Env::WarpSpecialize) || env_flag(Env::DisableWgmma);
}

codegen::CodegenOptions codegen_options(const LaunchConfig &cfg) {
  codegen::CodegenOptions opts;
  opts.arch = cfg.arch.empty() ? device_arch() : cfg.arch;
  opts.num_warps = cfg.num_warps;
  opts.num_stages = cfg.num_stages;
  opts.min_ctas_per_sm = cfg.min_ctas_per_sm;
  opts.tma = cfg.tma || cfg.warp_specialize;  // a producer warpgroup issues TMA copies
  opts.warp_specialize = cfg.warp_specialize;
  apply_env(opts);
  return opts;
}

int copy_method(const LaunchConfig &cfg) {
  if (resolve_backend(cfg.backend) != Backend::GPU) return 0;
  const codegen::CodegenOptions o = codegen_options(cfg);  // the environment applied, as the launch compiles it
  if (o.arch != "sm_90a" || !o.wgmma) return 0;
  if (o.warp_specialize && warp_specialization_fits(o.num_warps, o.min_ctas_per_sm)) return 2;
  return o.tma ? 1 : 0;
}

const LoadedKernel &get_kernel(const ir::Function &fn, const LaunchConfig &cfg) {
  auto t0 = Clock::now();
  codegen::CodegenOptions opts = codegen_options(cfg);
  std::string key = ptx_key(fn, opts);

  // The lock guards the maps only: codegen (its own LLVMContext per call), the driver's JIT and the cache
  // I/O run outside it, so the autotuner can build several configs on host threads at once. A key being
  // built by another thread is waited for rather than built twice.
  std::unique_lock lock(g_mutex);
  CompileStats stats;
  if (auto it = g_kernels.find(key); it != g_kernels.end()) {
    stats.source = "memory";
    stats.spill_stores = it->second->spill_stores;
    stats.spill_loads = it->second->spill_loads;
    stats.total_ms = ms_since(t0);
    g_last_stats = stats;
    return *it->second;
  }
  if (auto it = g_building.find(key); it != g_building.end()) {
    std::shared_future<const LoadedKernel *> pending = it->second;
    lock.unlock();
    const LoadedKernel &k = *pending.get();  // rethrows the builder's exception
    lock.lock();
    stats.source = "memory";
    stats.spill_stores = k.spill_stores;
    stats.spill_loads = k.spill_loads;
    stats.total_ms = ms_since(t0);
    g_last_stats = stats;
    return k;
  }
  std::promise<const LoadedKernel *> promise;
  g_building.emplace(key, promise.get_future().share());
  lock.unlock();

  std::unique_ptr<LoadedKernel> kernel;
  try {
    std::string dir = cache_dir();
    std::string ckey = cubin_key(key);
    std::optional<KernelArtifact> cubin = read_artifact(dir, ckey, "cubin");
    stats.source = "cubin cache";
    if (!cubin) {
      std::optional<KernelArtifact> ptx = read_artifact(dir, key, "ptx");
      stats.source = "ptx cache";
      if (!ptx) {
        auto tc = Clock::now();
        codegen::PtxResult r = codegen::compile_to_ptx(fn, opts);
        stats.codegen_ms = ms_since(tc);
        ptx = KernelArtifact{.entry = r.entry, .shared_bytes = r.shared_bytes, .num_threads = r.num_threads,
                             .code = std::move(r.ptx), .tensor_maps = std::move(r.tensor_maps)};
        write_artifact(dir, key, "ptx", *ptx);
        if (dumping_stages()) dump_codegen_stages(fn, opts, ptx->code);
        stats.source = "compiled";
      }
      auto tl = Clock::now();
      LinkedCubin linked = link_ptx_to_cubin(ptx->code, ptx->entry);
      cubin = KernelArtifact{ptx->entry, ptx->shared_bytes, ptx->num_threads, std::move(linked.cubin),
                             linked.spills.stores, linked.spills.loads, ptx->tensor_maps};
      stats.link_ms = ms_since(tl);
      write_artifact(dir, ckey, "cubin", *cubin);
    }
    auto tload = Clock::now();
    kernel = std::make_unique<LoadedKernel>(load_kernel(*cubin));
    kernel->waits_for_prior_grid = codegen::waits_for_prior_grid(opts.arch);
    stats.load_ms = ms_since(tload);
    stats.total_ms = ms_since(t0);
    stats.spill_stores = kernel->spill_stores;
    stats.spill_loads = kernel->spill_loads;
    debug_log("kernel '{}' ({} {} warps={} stages={} min_ctas={}) from {}: codegen {:.2f} ms, link {:.2f} ms, load "
              "{:.2f} ms, total {:.2f} ms; {} registers, {} B dynamic shared memory, spills {}; key {} in {}",
              kernel->name, fn.name, opts.arch, opts.num_warps, opts.num_stages, opts.min_ctas_per_sm, stats.source,
              stats.codegen_ms, stats.link_ms, stats.load_ms, stats.total_ms, kernel->num_regs, kernel->shared_bytes,
              kernel->spill_stores < 0 ? std::string("not reported")
                                       : fmt::format("{} B stores / {} B loads per thread", kernel->spill_stores,
                                                     kernel->spill_loads),
              key, dir);
  } catch (...) {
    lock.lock();
    g_building.erase(key);
    promise.set_exception(std::current_exception());
    throw;
  }
  lock.lock();
  g_last_stats = stats;
  const LoadedKernel *loaded = g_kernels.emplace(key, std::move(kernel)).first->second.get();
  g_building.erase(key);
  promise.set_value(loaded);
  return *loaded;
}

namespace {
std::atomic<uint64_t> g_generation{0};
}  // namespace

uint64_t loaded_kernels_generation() { return g_generation.load(std::memory_order_acquire); }

void forget_loaded_kernels() {
  std::lock_guard lock(g_mutex);
  g_generation.fetch_add(1, std::memory_order_acq_rel);
  // Keep the LoadedKernel objects alive: callers may still hold references to them.
  static std::vector<std::unique_ptr<LoadedKernel>> retired;
  for (auto &[key, kernel] : g_kernels) retired.push_back(std::move(kernel));
  g_kernels.clear();
}

CompileStats last_compile_stats() {
  std::lock_guard lock(g_mutex);
  return g_last_stats;
}

}  // namespace tilejit::runtime
