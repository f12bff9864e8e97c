// What the autotuners of the built-in kernels know before compiling a candidate (autotune::Tunable's estimate
// and prior; include/tilejit/autotune.h):
//   - estimates: lower bounds of a config's registers per thread (its f32 accumulator tiles spread over the
//     block's threads, plus kReservedRegisters for addresses, indices and row statistics) and shared memory
//     (one stage of the tensor-core operand tiles), so that a config whose accumulators alone exceed its
//     register cap (min_ctas_per_sm) — it would spill — is never compiled;
//   - priors: the configs that have won each class of shape on the H200 (sm_90a) in the autotuner's full
//     searches over the same candidate list (bench/results/LEARNED.md); the others are not compiled there. A class nobody has measured (another arch, head dim, shorter sequences or
//     another band shape) gets no prior: every candidate that passes the estimate is compiled.
//     TILEJIT_AUTOTUNE_FULL=1 ignores priors and estimates.
// When new measurements show another winner, add it to the class's list (and say where it was measured).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tilejit/autotune.h"
#include "tilejit/types.h"

namespace tilejit::kernels {

/// Registers per thread a kernel needs beside its accumulator tiles (at least: pointers, loop counters,
/// masks' indices, the online softmax's row max and sum). Calibrated with ptxas on the attention kernels: no
/// config of kernels/attention_fwd.cpp that fits its cap by this bound spills for lack of registers, and
/// every config it rejects spills (tests/test_autotune_prior.cpp checks rejected configs with ptxas).
constexpr int kReservedRegisters = 16;

/// An attention-style forward (attention_fwd, flex): f32 accumulators BLOCK_M×dim_v (output) and
/// BLOCK_M×BLOCK_N (scores) over 32·num_warps threads; one stage of a BLOCK_N×dim_qk key tile and a
/// BLOCK_N×dim_v value tile in 16-bit elements; MIN_CTAS as the programs per SM. Head dims as the kernel pads
/// them (powers of two ≥ 16). Throws tilejit::Error when the config lacks BLOCK_M or BLOCK_N.
autotune::Estimate attention_estimate(const autotune::Config &c, int dim_qk, int dim_v);
/// The tiled matmul: f32 accumulators BLOCK_M×BLOCK_N over 32·num_warps threads; one stage of BLOCK_M×BLOCK_K
/// and BLOCK_K×BLOCK_N operand tiles of `elem_bytes` bytes.
autotune::Estimate matmul_estimate(const autotune::Config &c, int elem_bytes);

/// The attention forward's winners on `arch` for this head dim (bf16/f16) and key length (the shape key's bucket,
/// a power of two). `register_capped`: whether the candidates include the register-capped configs
/// (kernels::more_per_sm_candidates(), on by default); without them other configs won. Empty for a class never
/// measured.
std::vector<autotune::Config> attention_prior(const std::string &arch, int head_dim, int64_t seqlen_k_bucket,
                                              bool register_capped);

/// How a flex call's mask shapes the work per program, for its prior.
enum class FlexBandClass {
  Dense,   // no band, or a band open on one side (causal): every program visits many key blocks
  Narrow,  // a band bounded on both sides with at most 512 keys: few key blocks per program
  Other,   // a wider bounded band: never measured
};
/// The flex kernel's winners on `arch` for these (padded) head dims, key length bucket and band class, with or
/// without the register-capped candidates: empty for a class never measured.
std::vector<autotune::Config> flex_prior(const std::string &arch, int dim_qk, int dim_v, int64_t seqlen_k_bucket,
                                         FlexBandClass band, bool register_capped);

/// The flex backward's winners on `arch` for these (padded) head dims, key length bucket, band class and dq mode:
/// the tiling 64x64 on 4 warps with 2 stages with each copy method of the arch; empty for a class never measured
/// (another arch, head dims other than 64 and 128 alike, keys under 2048, a band bounded on both sides, atomics).
std::vector<autotune::Config> flex_backward_prior(const std::string &arch, int dim_qk, int dim_v, int64_t seqlen_k_bucket,
                                                  FlexBandClass band, bool atomics);

/// The matmul's winners on `arch` for this dtype and bucketed shape (powers of two): empty for a class never
/// measured.
std::vector<autotune::Config> matmul_prior(const std::string &arch, DType dtype, int64_t M, int64_t N, int64_t K);

/// A config from its canonical text (Config::str(): "BLOCK_M=128 BLOCK_N=64 MIN_CTAS=2 num_warps=8
/// num_stages=2"). Throws tilejit::Error naming the text when it is malformed.
autotune::Config parse_config(const std::string &text);

}  // namespace tilejit::kernels
