// Attention forward written in the tilejit DSL, in the FlashAttention-2 loop order (Dao, "FlashAttention-2",
// arXiv 2307.08691, Algorithm 1): one program per (query block, batch·head); K/V blocks streamed through an
// online softmax (Milakov & Gimelshein, arXiv 1805.02867) kept in base 2, normalized once at the end.
#pragma once
#include <cstdint>
#include <string>

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
  float softmax_scale = 0.f;     // 0: 1/sqrt(head_dim)
  DType dtype = DType::bf16;     // bf16 or f16 (q, k, v, out)
  int block_m = 64;              // BLOCK_M: query rows per program (power of two, ≥ 16)
  int block_n = 64;              // BLOCK_N: keys per inner-loop step (power of two, ≥ 16)
  int num_warps = 4;
  int num_stages = 1;
  Backend backend = Backend::Auto;
  Stream *stream = nullptr;
  std::string arch;              // empty: the device's arch
};

/// out = softmax(q·kᵀ·scale (+ causal mask)) · v, and lse = logsumexp of each query row's scaled scores
/// (natural log). Buffers must live on the backend that runs (GPU or interpreter host memory).
/// Throws TraceError on unsupported shapes (head_dim must be a power of two ≥ 16; causal needs
/// seqlen_q == seqlen_k; sizes must be > 0), DriverError on driver failures.
void forward(const Buffer &q, const Buffer &k, const Buffer &v, Buffer &out, Buffer &lse, const Shape &shape,
             const Options &opt);

/// The tile IR / PTX of the attention kernel for a shape and options, without running it (arch from opt).
std::string forward_ir(const Shape &shape, const Options &opt);
std::string forward_ptx(const Shape &shape, const Options &opt);

/// Forward FLOPs as in the FlashAttention papers: 4·batch·heads·seqlen_q·seqlen_k·head_dim, halved when causal.
double forward_flops(const Shape &shape, bool causal);

}  // namespace tilejit::attention
