// `tilejit tune`, tools/tune_command.h.
#include "tools/tune_command.h"

#include <fmt/format.h>

#include <chrono>
#include <limits>
#include <random>
#include <vector>

#include "kernels/matmul_autotune.h"
#include "tilejit/attention.h"
#include "tilejit/autotune.h"
#include "tilejit/buffer.h"
#include "tilejit/device.h"
#include "tilejit/error.h"
#include "tilejit/numerics.h"

namespace tilejit::tools {
namespace {

struct TuneArgs {
  std::string kernel;
  int batch = 4, heads = 16, seqlen_q = 4096, seqlen_k = -1, head_dim = 128;
  int M = 4096, N = 4096, K = 4096;
  bool causal = false, use_cache = false, full = false;
  std::string dtype = "bf16";
  int repeats = 15, warmup = 3, threads = 0, finalists = 3;
};
TuneArgs g_args;

// Random values in [-1, 1) as 16-bit floats (tuning times real data, not zeros).
Buffer random_buffer(size_t n, DType dt, std::mt19937_64 &rng) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  Buffer b(n * dtype_bytes(dt), Backend::GPU);
  if (dt == DType::f32) {
    std::vector<float> v(n);
    for (auto &x : v) x = d(rng);
    b.upload(v);
  } else {
    std::vector<uint16_t> v(n);
    for (auto &x : v) x = dt == DType::bf16 ? float_to_bf16(d(rng)) : float_to_f16(d(rng));
    b.upload(v);
  }
  return b;
}

autotune::Settings settings(const TuneArgs &a) {
  autotune::Settings s;
  s.use_cache = a.use_cache;
  s.repeats = a.repeats;
  s.warmup = a.warmup;
  s.threads = a.threads;
  s.finalists = a.finalists;
  s.full_search = a.full;
  return s;
}

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The table (unless TILEJIT_PRINT_AUTOTUNING printed it already) and the wall time of the whole tuning call:
// tracing, compiling, copies of the inputs and outputs, timing.
void print(const autotune::Tunable &t, const autotune::Result &r, double wall_ms) {
  if (!autotune::print_enabled() || r.source != "tuned") fmt::print("{}", autotune::format_result(t, r));
  fmt::print("tuning call: {:.0f} ms wall\n", wall_ms);
}

int tune_attention(const TuneArgs &a) {
  attention::Shape s{a.batch, a.heads, a.seqlen_q, a.seqlen_k < 0 ? a.seqlen_q : a.seqlen_k, a.head_dim};
  attention::Options opt;
  opt.causal = a.causal;
  opt.dtype = parse_dtype(a.dtype);
  opt.backend = Backend::GPU;
  std::mt19937_64 rng(std::random_device{}());
  size_t nq = size_t(s.batch) * s.heads * s.seqlen_q * s.head_dim, nk = size_t(s.batch) * s.heads * s.seqlen_k * s.head_dim;
  Buffer q = random_buffer(nq, opt.dtype, rng), k = random_buffer(nk, opt.dtype, rng), v = random_buffer(nk, opt.dtype, rng);
  Buffer out(nq * 2, Backend::GPU), lse(size_t(s.batch) * s.heads * s.seqlen_q * 4, Backend::GPU);
  Stream stream;
  opt.stream = &stream;
  auto ptr = [](const Buffer &b) { return DevicePtr{b.address(), b.bytes()}; };
  auto sq = attention::contiguous_strides(s.heads, s.seqlen_q, s.head_dim);
  auto sk = attention::contiguous_strides(s.heads, s.seqlen_k, s.head_dim);
  fmt::print("tuning attention b={} h={} sq={} sk={} d={} causal={} {} ({:.3g} GFLOP per call)\n", s.batch, s.heads,
             s.seqlen_q, s.seqlen_k, s.head_dim, a.causal, a.dtype, attention::forward_flops(s, a.causal) / 1e9);
  auto t0 = Clock::now();
  autotune::Result r = attention::tune(ptr(q), ptr(k), ptr(v), ptr(out), ptr(lse), s, sq, sk, sk, sq, opt, settings(a));
  double wall = ms_since(t0);
  autotune::Tunable t;  // only what format_result prints
  t.kernel = "attention_fwd";
  t.flops = attention::forward_flops(s, a.causal);
  t.arch = device_info().arch;
  t.key = fmt::format("b={} h={} sq={} sk={} d={} causal={} {}", s.batch, s.heads, s.seqlen_q, s.seqlen_k, s.head_dim,
                      a.causal, a.dtype);
  print(t, r, wall);
  return 0;
}

int tune_matmul(const TuneArgs &a) {
  DType dt = parse_dtype(a.dtype);
  std::mt19937_64 rng(std::random_device{}());
  Buffer A = random_buffer(size_t(a.M) * a.K, dt, rng), B = random_buffer(size_t(a.K) * a.N, dt, rng);
  Buffer C(size_t(a.M) * a.N * dtype_bytes(dt), Backend::GPU);
  Stream stream;
  fmt::print("tuning matmul M={} N={} K={} {}\n", a.M, a.N, a.K, a.dtype);
  autotune::Result r;
  auto t0 = Clock::now();
  kernels::matmul_autotuned(DevicePtr{A.address(), A.bytes()}, DevicePtr{B.address(), B.bytes()},
                            DevicePtr{C.address(), C.bytes()}, a.M, a.N, a.K, dt, &stream, settings(a), &r);
  double wall = ms_since(t0);
  autotune::Tunable t;
  t.kernel = "matmul";
  t.flops = 2.0 * a.M * a.N * a.K;
  t.arch = device_info().arch;
  t.key = fmt::format("M={} N={} K={} {}", a.M, a.N, a.K, a.dtype);
  print(t, r, wall);
  return 0;
}

}  // namespace

CLI::App *add_tune_command(CLI::App &app) {
  TuneArgs &a = g_args;
  auto *c = app.add_subcommand("tune", "autotune a kernel for a shape; print every config's time and the winner");
  c->add_option("kernel", a.kernel, "attention or matmul")->required()->check(CLI::IsMember({"attention", "matmul"}));
  c->add_option("--batch", a.batch, "attention: batch")->check(CLI::Range(1, std::numeric_limits<int>::max()));
  c->add_option("--heads", a.heads, "attention: heads")->check(CLI::Range(1, std::numeric_limits<int>::max()));
  c->add_option("--seqlen-q", a.seqlen_q, "attention: query length")->check(CLI::Range(1, std::numeric_limits<int>::max()));
  c->add_option("--seqlen-k", a.seqlen_k, "attention: key length (default: seqlen-q)");
  c->add_option("--head-dim", a.head_dim, "attention: head dimension");
  c->add_flag("--causal", a.causal, "attention: causal mask");
  c->add_option("-M", a.M, "matmul: rows of a and c")->check(CLI::Range(1, std::numeric_limits<int>::max()));
  c->add_option("-N", a.N, "matmul: columns of b and c")->check(CLI::Range(1, std::numeric_limits<int>::max()));
  c->add_option("-K", a.K, "matmul: columns of a, rows of b")->check(CLI::Range(1, std::numeric_limits<int>::max()));
  c->add_option("--dtype", a.dtype, "bf16 or f16 (matmul also f32)")->check(CLI::IsMember({"bf16", "f16", "f32"}));
  c->add_flag("--use-cache", a.use_cache, "print the cached winner if there is one instead of tuning again");
  c->add_option("--repeats", a.repeats, "timed samples per finalist (median wins)")->check(CLI::Range(1, std::numeric_limits<int>::max()));
  c->add_option("--warmup", a.warmup, "untimed launches per finalist")->check(CLI::Range(0, std::numeric_limits<int>::max()));
  c->add_option("--threads", a.threads, "compile threads (0: TILEJIT_AUTOTUNE_THREADS or the hardware's, ≤ 16)");
  c->add_option("--finalists", a.finalists,
                "configs timed with --warmup/--repeats after one screening sample each (0: all of them)");
  c->add_flag("--full", a.full,
              "search every candidate: no pruning by estimate, prior or spills, no screening "
              "(TILEJIT_AUTOTUNE_FULL=1)");
  return c;
}

int run_tune_command() {
  const TuneArgs &a = g_args;
  if (a.kernel == "attention") {
    if (a.dtype == "f32") throw Error("tilejit tune attention: --dtype must be bf16 or f16");
    return tune_attention(a);
  }
  return tune_matmul(a);
}

}  // namespace tilejit::tools
