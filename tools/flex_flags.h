// `tilejit attention` flags for the flex variants (sliding window, ALiBi, soft-capping, GQA, varlen,
// bottom-right causal, the band as a mask function). When any is given, the command runs attention::flex_forward instead of forward.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/flex/variants_builtin.h"
#include "tilejit/buffer.h"
#include "tools/attention_check.h"

namespace CLI { class App; }

namespace tilejit::tools {

struct FlexFlags {
  int64_t window_left = -1, window_right = -1;  // sliding window (−1: unbounded side)
  bool alibi = false;
  bool learnable_slopes = false;  // ALiBi's slopes get a gradient buffer (the backward fills it)
  float softcap = 0.f;
  int gqa_kv_heads = 0;
  std::string varlen;            // comma-separated sequence lengths (q and k)
  bool varlen_given = false;     // --varlen appeared (an empty list is an error, not the dense layout)
  bool bottom_right = false;     // causal / window aligned bottom-right
  bool band_as_mask = false;     // the causal / window band as a mask function (block mask built automatically)
};

/// The common attention arguments the flex run needs (from tilejit.cpp's AttentionArgs).
struct FlexRunArgs {
  int batch, heads, seqlen_q, seqlen_k, head_dim;
  bool causal, check;
  std::string dtype, backend, arch;
  int block_m, block_n, num_warps, num_stages, iters;
  uint64_t seed;
  bool autotune;
  int check_rows;  // rows sampled by --check, spread over up to 8 (sequence, head) pairs
  bool atomics = false;  // run_flex_backward: dq by atomics (FlexOptions::atomics)
  int min_ctas = 0;       // FlexOptions::min_ctas_per_sm
  bool tma = false;       // FlexOptions::tma
  bool warp_specialize = false;  // FlexOptions::warp_specialize
};

/// The variant flags every attention command takes: --window-left/right, --alibi, --softcap, --band-as-mask.
void add_mod_flags(CLI::App *cmd, FlexFlags &f);
/// add_mod_flags and the flex-only ones: --gqa-kv-heads, --varlen, --bottom-right.
void add_flex_flags(CLI::App *attention, FlexFlags &f);

/// The mods the flags ask for, built as the C ABI builds them (kernels/flex/variants_builtin.h), with their
/// captures set: the paper's ALiBi slopes for heads_q heads uploaded to `slopes` on `be`, the cap.
struct FlagMods {
  attention::flex::BuiltinVariant variant;
  std::vector<float> slopes_host;
  Buffer slopes;
  Buffer slopes_grad;  // FlexFlags::learnable_slopes: zeroed, one f32 per query head
  attention::Mask mask;          // the variant's, or its band as a mask function with --band-as-mask
  attention::ScoreMod score_mod;
  bool has_band = false;
  attention::Band band;
};
/// Throws Error for --band-as-mask without a band, TraceError (starting with `who`) for bad window sides.
FlagMods flag_mods(const FlexFlags &f, bool causal, int heads_q, Backend be, const char *who);
/// The same mods on the host for the float64 references; the band offset seqlen_k − seqlen_q when
/// bottom_right (queries numbered from 0), none when the queries' numbers are their positions.
RefMods flag_ref_mods(const FlexFlags &f, const FlagMods &m, bool bottom_right);
bool flex_requested(const FlexFlags &f);

/// The shape, options and variant of a flex run, shared by run_flex, run_flex_backward and the ir/ptx dumps.
struct FlexSetup {
  attention::FlexShape s;
  attention::FlexOptions opt;
  std::vector<int> lens, cu{0};
  FlagMods mods;
  int Hkv = 0;
  DType dt = DType::bf16;
};
/// Builds it from the flags (mods' captures on `be`); throws Error / TraceError for inconsistent flags.
FlexSetup flex_setup(const FlexFlags &f, const FlexRunArgs &a, Backend be);
/// Runs, times and (with check) verifies sampled rows against float64; returns the exit code.
int run_flex(const FlexFlags &f, const FlexRunArgs &a);
/// The forward, then the backward, timed; with check, dq, dk and dv of up to two KV heads' groups against
/// float64 (tools/backward_command.cpp). Returns the exit code.
int run_flex_backward(const FlexFlags &f, const FlexRunArgs &a);
/// The flex kernel's tile IR (ptx false) or PTX for these flags (arch: a.arch, default sm_90a); no GPU needed.
std::string flex_code(const FlexFlags &f, const FlexRunArgs &a, bool ptx);

}  // namespace tilejit::tools
