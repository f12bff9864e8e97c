// The tilejit command line: run and check the attention kernel, print a built-in kernel's IR or PTX.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <bit>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "tilejit/attention.h"
#include "tilejit/c_api.h"
#include "tilejit/error.h"
#include "tilejit/kernels.h"
#include "tilejit/numerics.h"
#include "tilejit/stages.h"
#include "tools/backend_flag.h"
#include "tools/attention_check.h"
#include "tools/call_timing.h"
#include "tools/random_inputs.h"
#include "tools/stage_text.h"
#include "tools/decode_command.h"
#include "tools/flex_flags.h"
#include "tools/tune_command.h"

using namespace tilejit;

namespace {

struct AttentionArgs {
  int batch = 1, heads = 4, seqlen_q = 256, seqlen_k = -1, head_dim = 64;
  bool causal = false, check = false, backward = false, atomics = false;
  std::string dtype = "bf16", backend = "auto", arch;
  int block_m = 64, block_n = 64, num_warps = 4, num_stages = 2, iters = 10, check_rows = 64;
  int min_ctas = 0;
  bool autotune = false, tma = false, warp_specialize = false;
  uint64_t seed = 0;
};

// Head dims the plain attention kernel takes (powers of two from 16); `attention`, `ir` and `ptx` send the
// others to the flex kernel, which pads them.
bool plain_head_dim(int d) { return d >= 16 && std::has_single_bit(unsigned(d)); }

using tools::parse_backend;

int run_attention(const AttentionArgs &a) {
  attention::Shape shape{a.batch, a.heads, a.seqlen_q, a.seqlen_k < 0 ? a.seqlen_q : a.seqlen_k, a.head_dim};
  attention::Options opt;
  opt.causal = a.causal;
  opt.dtype = parse_dtype(a.dtype);
  opt.block_m = a.block_m;
  opt.block_n = a.block_n;
  opt.num_warps = a.num_warps;
  opt.num_stages = a.num_stages;
  opt.min_ctas_per_sm = a.min_ctas;
  opt.tma = a.tma;
  opt.warp_specialize = a.warp_specialize;
  opt.autotune = a.autotune;
  opt.backend = parse_backend(a.backend);
  opt.arch = a.arch;
  bool gpu = opt.backend == Backend::GPU;
  attention::check_shape(shape, opt);  // before allocating anything (sizes are checked in main)

  uint64_t seed = a.seed ? a.seed : std::random_device{}();
  std::mt19937_64 rng(seed);
  size_t nq = size_t(shape.batch) * shape.heads * shape.seqlen_q * shape.head_dim;
  size_t nk = size_t(shape.batch) * shape.heads * shape.seqlen_k * shape.head_dim;
  size_t nl = size_t(shape.batch) * shape.heads * shape.seqlen_q;
  std::vector<uint16_t> qb, kb, vb;
  std::vector<float> qf, kf, vf;
  tools::random_tensor(nq, opt.dtype, rng, qb, qf);
  tools::random_tensor(nk, opt.dtype, rng, kb, kf);
  tools::random_tensor(nk, opt.dtype, rng, vb, vf);

  Buffer q(nq * 2, opt.backend), k(nk * 2, opt.backend), v(nk * 2, opt.backend);
  Buffer out(nq * 2, opt.backend), lse(nl * 4, opt.backend);
  q.upload(qb);
  k.upload(kb);
  v.upload(vb);
  out.fill_bytes(0xff);  // NaN in bf16/f16 and f32: an unwritten element cannot pass the check
  lse.fill_bytes(0xff);

  std::optional<Stream> stream;
  if (gpu) {
    stream.emplace();
    opt.stream = &*stream;
  }
  // The first call traces and compiles (or hits the cache).
  const tools::CallTimes t =
      tools::time_calls([&] { attention::forward(q, k, v, out, lse, shape, opt); }, opt.stream, a.iters);
  const double first_ms = t.first_ms, ms = t.median_ms;
  double tflops = attention::forward_flops(shape, opt.causal) / (ms * 1e-3) / 1e12;
  fmt::print("attention {} b={} h={} sq={} sk={} d={} causal={} dtype={} backend={}\n", gpu ? "gpu" : "interp",
             shape.batch, shape.heads, shape.seqlen_q, shape.seqlen_k, shape.head_dim, opt.causal, a.dtype,
             gpu ? "gpu" : "interp");
  if (gpu) {
    fmt::print("  first call (trace+compile+run): {:.2f} ms\n", first_ms);
    fmt::print("  time: {:.3f} ms (median of {} launches), {:.1f} TFLOP/s\n", ms, std::max(1, a.iters), tflops);
  } else {
    fmt::print("  time: {:.1f} ms (trace + one run on the CPU interpreter)\n", ms);
  }
  if (!a.check) return 0;

  // Every element must have been written (the poison is NaN), then sampled rows against float64.
  auto ob = out.download_as<uint16_t>(nq);
  auto lb = lse.download_as<float>(nl);
  size_t bad = 0;
  for (auto x : ob) bad += !std::isfinite(opt.dtype == DType::bf16 ? bf16_to_float(x) : f16_to_float(x));
  if (bad) {
    fmt::print("  CHECK FAILED: {} of {} output elements are not finite (unwritten or NaN)\n", bad, nq);
    return 1;
  }
  double scale = 1.0 / std::sqrt(double(shape.head_dim));
  std::uniform_int_distribution<int> pick_b(0, shape.batch - 1), pick_h(0, shape.heads - 1),
      pick_i(0, shape.seqlen_q - 1);
  double err2 = 0, ref2 = 0, lse_err = 0;
  int rows = std::min<int>(a.check_rows, int(nl));
  for (int r = 0; r < rows; ++r) {
    int b = pick_b(rng), h = pick_h(rng);
    int i = r == 0 ? shape.seqlen_q - 1 : r == 1 ? 0 : pick_i(rng);  // always include the edges
    auto ref = tools::reference_row(qf, kf, vf, shape.heads, shape.seqlen_q, shape.seqlen_k, shape.head_dim,
                                    scale, opt.causal, b, h, i);
    size_t base = ((size_t(b) * shape.heads + h) * shape.seqlen_q + i) * shape.head_dim;
    for (int d = 0; d < shape.head_dim; ++d) {
      double got = opt.dtype == DType::bf16 ? bf16_to_float(ob[base + d]) : f16_to_float(ob[base + d]);
      err2 += (got - ref.out[d]) * (got - ref.out[d]);
      ref2 += ref.out[d] * ref.out[d];
    }
    lse_err = std::max(lse_err, std::abs(double(lb[(size_t(b) * shape.heads + h) * shape.seqlen_q + i]) - ref.lse));
  }
  double rel = std::sqrt(err2 / std::max(ref2, 1e-300));
  const double tol = 1e-2, lse_tol = 1e-3;  // bf16/f16 inputs and output, f32 accumulation
  bool ok = rel <= tol && lse_err <= lse_tol;
  fmt::print("  check ({} sampled rows vs float64, seed {}): rel. Frobenius error {:.3e} (bound {:.0e}), max |lse "
             "error| {:.3e} (bound {:.0e}): {}\n",
             rows, seed, rel, tol, lse_err, lse_tol, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace

namespace {

int run_cli(int argc, char **argv) {
  CLI::App app{"tilejit: a C++ tile DSL JIT-compiled through LLVM NVPTX"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tilejit ") + tilejit_version());
  app.option_defaults()->always_capture_default();
  const auto arch_names = CLI::IsMember({"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"});

  AttentionArgs a;
  auto *att = app.add_subcommand("attention", "run the attention forward kernel, time it, optionally check it");
  att->add_option("--batch", a.batch, "batch size")->check(CLI::Range(1, std::numeric_limits<int>::max()));
  att->add_option("--heads", a.heads, "heads")->check(CLI::Range(1, std::numeric_limits<int>::max()));
  att->add_option("--seqlen-q", a.seqlen_q, "query length")->check(CLI::Range(1, std::numeric_limits<int>::max()));
  att->add_option("--seqlen-k", a.seqlen_k, "key length (default: seqlen-q)");
  att->add_option("--head-dim", a.head_dim, "head dimension");
  att->add_flag("--causal", a.causal, "causal mask");
  att->add_option("--dtype", a.dtype, "bf16 or f16")->check(CLI::IsMember({"bf16", "f16"}));
  att->add_option("--backend", a.backend, "gpu, interp (CPU interpreter) or auto (the GPU if a driver and device are "
                  "present, else the interpreter)")->check(CLI::IsMember({"gpu", "interp", "auto"}));
  att->add_option("--arch", a.arch, "GPU arch (default: the device's)")->check(arch_names);
  att->add_option("--block-m", a.block_m, "BLOCK_M");
  att->add_option("--block-n", a.block_n, "BLOCK_N");
  att->add_option("--num-warps", a.num_warps, "num_warps");
  att->add_option("--num-stages", a.num_stages, "num_stages (software pipeline depth)");
  att->add_option("--min-ctas", a.min_ctas, "programs per SM to cap registers for (0: no cap)")
      ->check(CLI::Range(0, 32));
  att->add_flag("--tma", a.tma, "copy the K/V tiles with TMA where they qualify (sm_90a)");
  att->add_flag("--warp-specialize", a.warp_specialize, "a producer warpgroup issues the K/V copies by TMA (implies --tma)");
  att->add_flag("--autotune", a.autotune,
                "GPU: pick BLOCK_M/BLOCK_N/num_warps/num_stages/--min-ctas and, on sm_90a, the copy method by measuring "
                "(the first call per shape bucket tunes; TILEJIT_PRINT_AUTOTUNING=1 shows the table); --block-m, "
                "--block-n, --num-warps, --num-stages and --min-ctas are then validated but not used, --tma and "
                "--warp-specialize hold for every candidate; with --backward the backward is tuned too (its own candidates, "
                "the pick printed)");
  att->add_option("--iters", a.iters, "timed launches (GPU)")->check(CLI::Range(1, 1000000));
  att->add_flag("--check", a.check, "compare sampled rows against a float64 reference");
  att->add_flag("--backward", a.backward,
                "run the backward (flex_backward) after the forward and time it; with --check, compare dq, dk, dv of "
                "up to two KV heads against float64");
  att->add_flag("--atomics", a.atomics,
                "with --backward: dq (and learnable captures' gradients) accumulated with f32 atomics instead of "
                "in dq's own pass (and in fixed point): not bitwise reproducible, and slower on the H200 at every "
                "measured shape (bench/results/backward.md)");
  att->add_option("--check-rows", a.check_rows, "rows sampled by --check");
  att->add_option("--seed", a.seed, "random seed (0: a random one, printed with the check)");
  tools::FlexFlags flex;
  tools::add_flex_flags(att, flex);
  att->add_flag("--learn-slopes", flex.learnable_slopes,
                "with --backward --alibi: the slopes are learnable (a capture with a gradient buffer); the backward "
                "also computes their gradient, which --check compares with float64");

  std::string kname;
  kernels::BuiltinSpec spec;
  std::string dtype;  // empty: the kernel's own default (f32 for vector_add, bf16 otherwise)
  auto add_spec = [&](CLI::App *c, bool kernel_required) {
    CLI::Option *k = c->add_option("kernel", kname, "vector_add, softmax, matmul or attention");
    if (kernel_required) k->required();
    c->add_option("--dtype", dtype, "element dtype: f32, f16 or bf16 (default: f32 for vector_add, bf16 otherwise)")
        ->check(CLI::IsMember({"f32", "f16", "bf16"}));
    c->add_option("--head-dim", spec.head_dim, "attention head dim");
    c->add_flag("--causal", spec.causal, "attention causal");
    c->add_option("--block-m", spec.block_m, "BLOCK_M");
    c->add_option("--block-n", spec.block_n, "BLOCK_N");
    c->add_option("--block-k", spec.block_k, "BLOCK_K (matmul)");
    c->add_option("--cols", spec.cols, "softmax row length");
    c->add_option("--num-warps", spec.num_warps, "num_warps");
    c->add_option("--num-stages", spec.num_stages, "num_stages");
    c->add_option("--min-ctas", spec.min_ctas_per_sm, "programs per SM to cap registers for (0: no cap)")
        ->check(CLI::Range(0, 32));
    c->add_flag("--tma", spec.tma, "copy pipelined operand tiles with TMA where they qualify (sm_90a)");
    c->add_flag("--warp-specialize", spec.warp_specialize,
                "a producer warpgroup issues the TMA copies of the loops that qualify (implies --tma)");
  };
  tools::FlexFlags code_flex;  // ir/ptx of attention with variant flags: the flex kernel
  auto *ir = app.add_subcommand("ir", "print the tile IR of a built-in kernel, or a stage of one given as text");
  add_spec(ir, false);
  tools::add_flex_flags(ir, code_flex);
  bool list_stages = false;
  std::string stage;
  auto *stages_flag =
      ir->add_flag("--stages", list_stages, "list the compile stages, from the traced tile IR to PTX, and exit");
  ir->add_option("--stage", stage,
                 "print this compile stage instead of the optimized tile IR (--stages lists them; the plan passes' "
                 "(assign_layouts ... specialize_warps), lowering, llvm and ptx are compiled for --arch; TILEJIT_DUMP_STAGES=<dir> writes every stage of every "
                 "kernel a run traces)")
      ->excludes(stages_flag);
  ir->add_option("--arch", spec.arch, "target GPU arch of the stages after optimized (the plan passes', lowering, llvm, ptx)")
      ->check(arch_names);
  std::string input;
  ir->add_option("--input", input,
                 "instead of a built-in kernel, a kernel's tile IR read from this file ('-': standard input), as any "
                 "tile-IR stage prints it (a file TILEJIT_DUMP_STAGES wrote, edited or not): prints its --stage "
                 "(default optimized), the passes run from the text, the codegen stages with --arch, --num-warps, "
                 "--num-stages, --min-ctas, --tma and --warp-specialize (a lowering-plan text must match them)");
  auto *ptx = app.add_subcommand("ptx", "print the PTX of a built-in kernel");
  add_spec(ptx, true);
  ptx->add_option("--arch", spec.arch, "target GPU arch")->check(arch_names);
  tools::add_flex_flags(ptx, code_flex);

  auto *tune = tools::add_tune_command(app);
  auto *decode = tools::add_decode_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    // --help and --version exit 0; a command line CLI11 refuses exits 2 (its own codes run past 100).
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (att->parsed() && parse_backend(a.backend) != Backend::GPU) {
      if (a.autotune)
        fmt::print(stderr, "tilejit: note: --autotune has no effect on the interpreter (it times configs on a GPU); "
                           "using --block-m/--block-n/--num-warps/--num-stages\n");
      for (const char *gpu_only : {"--arch", "--iters"})
        if (att->count(gpu_only) > 0)
          fmt::print(stderr, "tilejit: note: {} has no effect on the interpreter (one untimed run)\n", gpu_only);
    }
    // The flex kernel also runs what the plain one rejects: causal with seqlen_q ≠ seqlen_k (top-left, as
    // --window-right 0) and head dims that are not powers of two (padded).
    if (att->parsed()) {  // checks both paths share, before allocating anything
      if (a.seqlen_k < -1 || a.seqlen_k == 0) throw Error("--seqlen-k must be positive (or -1: same as --seqlen-q)");
      if (a.check_rows < 1) throw Error("--check-rows must be positive");
      if (a.head_dim < 1) throw Error(fmt::format("--head-dim {} must be positive", a.head_dim));
      const int seqlen = std::max(a.seqlen_q, a.seqlen_k);
      double total = double(a.batch) * a.heads * seqlen * a.head_dim;
      // With --varlen the lengths replace --batch and --seqlen-q/-k (flex_setup checks its tokens).
      if (!flex.varlen_given && total > double(1u << 31))
        throw Error(fmt::format("--batch {} × --heads {} × {} {} × --head-dim {}: the tensors would hold {:.3g} "
                                "elements each; at most 2^31",
                                a.batch, a.heads, a.seqlen_k > a.seqlen_q ? "--seqlen-k" : "--seqlen-q", seqlen,
                                a.head_dim, total));
    }
    if (att->parsed() && flex.learnable_slopes && !a.backward) throw Error("--learn-slopes needs --backward");
    if (att->parsed() && a.atomics && !a.backward) throw Error("--atomics needs --backward");
    bool plain_cannot = (a.causal && a.seqlen_k > 0 && a.seqlen_k != a.seqlen_q) || !plain_head_dim(a.head_dim);
    // The backward runs on the flex kernels (plain attention is flex attention without mods).
    if (att->parsed() && (tools::flex_requested(flex) || plain_cannot || a.backward)) {
      tools::FlexRunArgs fa{a.batch, a.heads, a.seqlen_q, a.seqlen_k, a.head_dim, a.causal, a.check, a.dtype,
                            a.backend, a.arch, a.block_m, a.block_n, a.num_warps, a.num_stages, a.iters, a.seed,
                            a.autotune, a.check_rows, a.atomics, a.min_ctas, a.tma, a.warp_specialize};
      return a.backward ? tools::run_flex_backward(flex, fa) : tools::run_flex(flex, fa);
    }
    if (att->parsed()) return run_attention(a);
    if (tune->parsed()) return tools::run_tune_command();
    if (decode->parsed()) return tools::run_decode_command();
    // The stages after the optimized tile IR come from compiling a configuration.
    const std::vector<std::string> all_stages = compile_stages();
    const auto stage_at = std::find(all_stages.begin(), all_stages.end(), stage);
    const bool codegen_stage =
        stage_at != all_stages.end() && stage_at > std::find(all_stages.begin(), all_stages.end(), "optimized");
    if (ir->parsed() && !input.empty() && !list_stages) {
      if (!kname.empty()) throw Error(fmt::format("give a kernel name ('{}') or --input, not both", kname));
      if (tools::flex_requested(code_flex)) throw Error("variant flags apply to the built-in attention, not to --input");
      if (ir->count("--stage") > 0 && stage.empty()) throw Error("--stage needs a stage name (--stages lists them)");
      for (const char *builtin_only : {"--dtype", "--head-dim", "--causal", "--block-m", "--block-n", "--block-k", "--cols"})
        if (ir->count(builtin_only) > 0)
          fmt::print(stderr, "tilejit: note: {} applies to built-in kernels, not to --input\n", builtin_only);
      std::string text;
      if (input == "-") {
        text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      } else {
        std::error_code ec;
        std::ifstream in(input, std::ios::binary);
        if (!std::filesystem::is_regular_file(input, ec) || !in)
          throw Error(fmt::format("--input {}: not a readable file", input));
        text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
      LaunchConfig target;
      target.arch = spec.arch;
      target.num_warps = spec.num_warps;
      target.num_stages = spec.num_stages;
      target.min_ctas_per_sm = spec.min_ctas_per_sm;
      target.tma = spec.tma;
      target.warp_specialize = spec.warp_specialize;
      try {
        fmt::print("{}", stage_of_text(text, stage.empty() ? "optimized" : stage, target));
      } catch (const Error &e) {  // the text's errors (ParseError, VerifyError), and compiling it
        throw Error(fmt::format("{}: {}", input == "-" ? "<stdin>" : input, e.what()));
      }
      return 0;
    }
    if (ir->parsed() && kname.empty() && !list_stages) throw Error("ir needs a kernel name or --input FILE");
    if (ir->parsed() && (list_stages || ir->count("--stage") > 0)) {
      if (!list_stages && !kernels::is_builtin(kname))
        throw Error(fmt::format("unknown built-in kernel '{}' (known: vector_add, softmax, matmul, attention)", kname));
      if (ir->count("--stage") > 0 && stage.empty()) throw Error("--stage needs a stage name (--stages lists them)");
      if (ir->count("--arch") > 0 && !codegen_stage)
        fmt::print(stderr, "tilejit: note: --arch applies only to the stages compiled for it (after optimized)\n");
    }
    if (ir->parsed() && list_stages) {
      for (const std::string &s : compile_stages()) fmt::print("{}\n", s);
      return 0;
    }
    // --stage: render the kernel (as PTX for the LLVM and PTX stages) and print the stage it wrote.
    const bool as_ptx = ptx->parsed() || (ir->parsed() && codegen_stage);
    auto show = [&](const std::function<std::string()> &render) {
      if (ir->parsed() && !stage.empty()) fmt::print("{}", tools::stage_text(stage, [&] { render(); }));
      else fmt::print("{}", render());
    };
    // As for `attention`: variant flags, and head dims the plain kernel rejects, dump the flex kernel.
    if ((ir->parsed() || ptx->parsed()) &&
        (tools::flex_requested(code_flex) || (kname == "attention" && !plain_head_dim(spec.head_dim)))) {
      if (kname != "attention") throw Error("variant flags (--alibi, --softcap, windows, ...) apply to attention only");
      tools::FlexRunArgs fa{1, 4, 1024, -1, spec.head_dim, spec.causal, false, dtype.empty() ? "bf16" : dtype, "interp",
                            as_ptx ? spec.arch : "", spec.block_m, spec.block_n, spec.num_warps,
                            spec.num_stages, 1, 0, false, 0, false, spec.min_ctas_per_sm, spec.tma,
                            spec.warp_specialize};
      show([&] { return tools::flex_code(code_flex, fa, as_ptx); });
      return 0;
    }
    spec.dtype = !dtype.empty() ? parse_dtype(dtype) : kname == "vector_add" ? DType::f32 : DType::bf16;
    show([&] { return as_ptx ? kernels::builtin_ptx(kname, spec) : kernels::builtin_ir(kname, spec); });
    return 0;
  } catch (const DriverError &e) {
    // Without the library's advice for C++ callers (DriverError::cause): the CLI gives its own below.
    fmt::print(stderr, "tilejit: error: {}\n", e.cause.empty() ? std::string(e.what()) : e.cause);
    if (tune->parsed()) fmt::print(stderr, "tilejit: tuning times configs on a GPU; it cannot run on the interpreter\n");
    else if (!gpu_available()) fmt::print(stderr, "tilejit: no usable GPU here: use --backend interp (or auto)\n");
    return 1;
  } catch (const std::exception &e) {
    fmt::print(stderr, "tilejit: error: {}\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char **argv) {
  int rc = 1;
  try {
    rc = run_cli(argc, argv);
  } catch (...) {  // an error message that could not be written (stderr unwritable): the status says it
  }
  // What was printed must have reached its destination (a full disk, a closed pipe): else the run failed.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "tilejit: error: cannot write the output: %s\n", std::strerror(errno));  // may fail too
    return 1;
  }
  return rc;
}
