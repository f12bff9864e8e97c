// Attention forward written in the tilejit DSL, in the FlashAttention-2 loop order (Dao, "FlashAttention-2",
// arXiv 2307.08691, Algorithm 1): one program per (query block, batch·head); K/V blocks streamed through an
// online softmax (Milakov & Gimelshein, arXiv 1805.02867) kept in base 2, normalized once at the end.
#pragma once
#include <cstdint>
#include <string>

#include "tilejit/autotune.h"
#include "tilejit/buffer.h"
#include "tilejit/launch.h"
#include "tilejit/types.h"

namespace tilejit::attention {

/// Problem shape. q, out: [batch, heads, seqlen_q, head_dim]; k, v: [batch, heads, seqlen_k, head_dim];
/// all contiguous (row-major) in `dtype`; lse: [batch, heads, seqlen_q] f32.
struct Shape {
  int batch = 1, heads = 1, seqlen_q = 128, seqlen_k = 128, head_dim = 64;
};

struct Options {
  bool causal = false;           // query i sees keys j ≤ i (top-left aligned; needs seqlen_q == seqlen_k)
  float softmax_scale = 0.f;     // 0: 1/sqrt(head_dim); otherwise positive (the row max is taken on raw
                                 // scores) and at most FLT_MAX/log2(e) ≈ 2.36e38 (scale·log2(e) is an f32);
                                 // each row's largest q·k·scale must stay below 2^30/log2(e) ≈ 7.4e8 in
                                 // magnitude (bf16; 1.9e8 for f16), as in FlashAttention-2's softmax
  DType dtype = DType::bf16;     // bf16 or f16 (q, k, v, out)
  int block_m = 64;              // BLOCK_M: query rows per program (power of two, ≥ 16)
  int block_n = 64;              // BLOCK_N: keys per inner-loop step (power of two, ≥ 16)
  int num_warps = 4;
  int num_stages = 2;            // cp.async pipeline depth of the K/V loads (1: no pipeline; codegen/pipeline.h)
  int min_ctas_per_sm = 0;       // ≥ 1: registers capped so this many programs fit per SM (LaunchConfig)
  bool tma = false;              // K/V tiles copied by TMA where they qualify (LaunchConfig::tma; sm_90a)
  bool warp_specialize = false;  // with tma: a producer warpgroup copies them (LaunchConfig::warp_specialize)
  Backend backend = Backend::Auto;
  Stream *stream = nullptr;
  std::string arch;              // empty: the device's arch
  /// GPU only: ignore block_m/block_n/num_warps/num_stages/min_ctas_per_sm and use the autotuner's winner for
  /// this shape (BLOCK_M ∈ {64,128}, BLOCK_N ∈ {32,64,128}, num_warps ∈ {4,8}, num_stages ∈ {1,2,3}; and,
  /// unless TILEJIT_AUTOTUNE_MORE_PER_SM=0, with registers capped at 128: 8 warps at min_ctas_per_sm 2,
  /// 4 warps with BLOCK_M=64 at 4; on sm_90a each also with tma and, where a producer warpgroup fits, with
  /// warp_specialize — unless tma or warp_specialize is set, which then holds for every candidate), keyed by dtype,
  /// head_dim, causal and the next powers of two of seqlen_q, seqlen_k and batch·heads. The first call for
  /// a key tunes (seconds; outputs are restored afterwards), later calls and later processes reuse the winner.
  bool autotune = false;
};

/// Element strides of a [batch, heads, seqlen, head_dim] tensor. The last dimension must be contiguous
/// (dim == 1); the others must be ≥ 0 and every element's offset must fit in int32.
struct Strides {
  int64_t batch = 0, head = 0, seq = 0, dim = 1;
};
/// The strides of a contiguous (row-major) [batch, heads, seqlen, head_dim] tensor.
Strides contiguous_strides(int heads, int seqlen, int head_dim);

/// out = softmax(q·kᵀ·scale (+ causal mask)) · v, and lse = logsumexp of each query row's scaled scores
/// (natural log). Buffers must live on the backend that runs (GPU or interpreter host memory). The softmax is
/// FlashAttention-2's: each row's largest q·k·scale must stay below 2^30/log2(e) ≈ 7.4e8 in magnitude (bf16;
/// 1.9e8 for f16; Options::softmax_scale), past which the row's result is undefined (NaN or inf) — the scale
/// itself may be anything up to FLT_MAX/log2(e) as long as the scores it gives stay within that bound.
/// Throws TraceError on unsupported shapes (head_dim must be a power of two ≥ 16; causal needs
/// seqlen_q == seqlen_k; sizes must be > 0), DriverError on driver failures.
void forward(const Buffer &q, const Buffer &k, const Buffer &v, Buffer &out, Buffer &lse, const Shape &shape,
             const Options &opt);

/// forward() on raw pointers with arbitrary strides (e.g. PyTorch tensors in [b, s, h, d] memory order).
/// q, k, v, out: `dtype` elements addressed through their Strides; lse: contiguous [batch, heads, seqlen_q]
/// f32. DevicePtr::bytes, when non-zero, is checked against the furthest element addressed. Throws
/// TraceError for a non-contiguous last dimension, negative or too large strides, null pointers and the
/// shape errors of forward(); DriverError on driver failures.
void forward_strided(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse, const Shape &shape,
                     const Strides &q_strides, const Strides &k_strides, const Strides &v_strides,
                     const Strides &o_strides, const Options &opt);

/// Runs the autotuner for this call's shape key (as Options::autotune does) and returns its result: the
/// table of configs and times, the winner, where it came from. `out` and `lse` are restored afterwards.
autotune::Result tune(DevicePtr q, DevicePtr k, DevicePtr v, DevicePtr out, DevicePtr lse, const Shape &shape,
                      const Strides &q_strides, const Strides &k_strides, const Strides &v_strides,
                      const Strides &o_strides, const Options &opt, const autotune::Settings &settings = {});

/// The tile IR / PTX of the attention kernel for a shape and options, without running it (arch from opt).
std::string forward_ir(const Shape &shape, const Options &opt);
std::string forward_ptx(const Shape &shape, const Options &opt);

/// Forward FLOPs as in the FlashAttention papers: 4·batch·heads·seqlen_q·seqlen_k·head_dim, halved when causal.
double forward_flops(const Shape &shape, bool causal);

/// Checks a shape and options without touching memory; throws TraceError with the reason (the same checks
/// forward() makes first). softmax_scale: 0 selects 1/sqrt(head_dim); any other positive value up to
/// FLT_MAX/log2(e) is used as is; negative, non-finite or larger ones throw.
void check_shape(const Shape &shape, const Options &opt);

}  // namespace tilejit::attention
