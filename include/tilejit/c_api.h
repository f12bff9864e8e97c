/* tilejit's C ABI: the attention forward and matmul on raw device pointers (e.g. PyTorch tensors through
 * ctypes), compile statistics and the version. No C++ type crosses this interface.
 *
 * Every int-returning function returns TILEJIT_OK (0) or a nonzero TILEJIT_ERROR_* code; then
 * tilejit_last_error() holds a sentence saying what was wrong (per thread, valid until the next call on
 * that thread). Functions launch asynchronously on `stream` (a CUstream, NULL: the default stream) and do
 * not synchronize, except when they compile or tune. Memory must be device memory of the current CUDA
 * device (device 0, or $TILEJIT_DEVICE). */
#ifndef TILEJIT_C_API_H
#define TILEJIT_C_API_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  TILEJIT_OK = 0,
  TILEJIT_ERROR_INVALID_ARGUMENT = 1, /* bad dtype, shape, stride, null pointer */
  TILEJIT_ERROR_DRIVER = 2,           /* a CUDA driver call failed, or there is no GPU */
  TILEJIT_ERROR_COMPILE = 3,          /* tracing/lowering the kernel failed */
  TILEJIT_ERROR_INTERNAL = 4          /* anything else */
};

enum { TILEJIT_DTYPE_BF16 = 0, TILEJIT_DTYPE_F16 = 1, TILEJIT_DTYPE_F32 = 2 /* matmul only */ };

/* out = softmax(q·kᵀ·scale (+ causal mask)) · v, per (batch, head).
 * q, out: [batch, heads, seqlen_q, head_dim]; k, v: [batch, heads, seqlen_k, head_dim], dtype bf16 (0) or
 * f16 (1), addressed through 4 strides in elements (batch, head, seq, dim); the dim stride must be 1.
 * lse: contiguous [batch, heads, seqlen_q] f32 natural-log logsumexp of each row, or NULL (not wanted).
 * head_dim: a power of two in [16, 256]; causal (nonzero) needs seqlen_q == seqlen_k.
 * softmax_scale <= 0: 1/sqrt(head_dim). autotune nonzero: use the autotuner's config for this shape (the
 * first call per shape bucket tunes, for seconds; later processes read the winner from the disk cache).
 * Runs on the GPU (pointers are device memory); with TILEJIT_INTERPRET=1, on the CPU interpreter with host
 * pointers (no autotuning there). */
int tilejit_attention_forward(const void *q, const void *k, const void *v, void *out, float *lse, int dtype,
                              int batch, int heads, int seqlen_q, int seqlen_k, int head_dim,
                              const int64_t *q_strides, const int64_t *k_strides, const int64_t *v_strides,
                              const int64_t *o_strides, int causal, float softmax_scale, int autotune,
                              void *stream);

/* Same with an explicit configuration (no tuning): BLOCK_M, BLOCK_N (powers of two >= 16), num_warps,
 * num_stages. For benchmarks and experiments. */
int tilejit_attention_forward_config(const void *q, const void *k, const void *v, void *out, float *lse,
                                     int dtype, int batch, int heads, int seqlen_q, int seqlen_k, int head_dim,
                                     const int64_t *q_strides, const int64_t *k_strides,
                                     const int64_t *v_strides, const int64_t *o_strides, int causal,
                                     float softmax_scale, int block_m, int block_n, int num_warps,
                                     int num_stages, void *stream);

/* The built-in flex attention variants (see tilejit/flex_attention.h and flex_variants.h), all optional
 * and combinable. Fill it with tilejit_flex_variant_init (everything off, library defaults), then set
 * fields: a zeroed struct is NOT "no mod" (window sides 0 would be a window of one key). */
typedef struct tilejit_flex_variant {
  int causal;          /* nonzero: query i sees keys j ≤ i + off */
  int bottom_right;    /* alignment of causal and window: 0 top-left (off = 0), nonzero bottom-right
                        * (off = seqlen_k − seqlen_q); ignored without causal or a window */
  int window_left;     /* sliding window: keys j ≥ i + off − window_left; −1: unbounded */
  int window_right;    /* keys j ≤ i + off + window_right; −1: unbounded (with causal, at most 0) */
  int alibi;           /* nonzero: score − slope[h]·|i − j|, slopes of the ALiBi paper for heads_q heads
                        * (kept by the library in a device buffer per head count) */
  float softcap;       /* > 0: cap·tanh(score / cap) (Gemma 2, e.g. 50); 0: off */
  const int32_t *doc_ids; /* document masking: contiguous [batch, seqlen] i32 document id per token
                        * (needs seqlen_q == seqlen_k), device memory; NULL: off */
  int reuse_block_mask; /* with doc_ids: 0 builds the block mask on every call (always right); nonzero
                        * caches it by pointer (see below): the caller promises the ids at this address
                        * do not change between such calls */
  int block_m, block_n;   /* tile sizes, powers of two ≥ 16; 0: the library's default (64) */
  int num_warps, num_stages; /* 0: the library's defaults (4, 2) */
  int autotune;           /* nonzero (GPU): the autotuner picks block_m, block_n, num_warps, num_stages for this
                           * shape and variant (the four fields above are still validated but not used); the
                           * first call per key tunes (FlexOptions::autotune in flex_attention.h); ignored on
                           * the interpreter */
  int atomics;            /* backward only: nonzero accumulates dq with f32 atomics in the dK/dV kernel (not
                           * bitwise reproducible); 0 computes it in its own pass (FlexOptions::atomics) */
} tilejit_flex_variant;

/* Everything off, every tuning field 0 (defaults): window_left = window_right = −1, the rest 0/NULL. */
void tilejit_flex_variant_init(tilejit_flex_variant *variant);

/* Flex attention forward with built-in variants, composed in this order: score = softcap(alibi(q·kᵀ·scale)),
 * visible = causal ∧ window ∧ same document; out = softmax over visible keys · v.
 * q, out: [batch, heads_q, seqlen_q, head_dim]; k, v: [batch, heads_kv, seqlen_k, head_dim] (GQA / MQA:
 * heads_q a multiple of heads_kv; query head h reads key/value head h / (heads_q / heads_kv)); dtype bf16
 * (0) or f16 (1); 4 element strides each (batch, head, seq, dim), dim stride 1 (the seq strides are compiled
 * into the kernels: each distinct value compiles its own, once). lse: contiguous
 * [batch, heads_q, seqlen_q] f32 natural-log logsumexp (−inf for a row that sees no key; its output is
 * 0), or NULL. head_dim in [16, 256]. softmax_scale <= 0: 1/sqrt(head_dim). variant NULL: no mod, defaults.
 *
 * Caching: the kernel for a combination of mods (which of alibi / softcap / doc_ids are on; causal and
 * window only add runtime arguments) is traced and compiled on its first call, then reused: window sides,
 * the cap, the slopes and the doc_ids pointer are kernel arguments (window sides, like every integer
 * argument, are specialized on divisibility by 16). With doc_ids, a block mask (which key blocks each
 * query block can see; one small extra kernel) is built on the device on every call, unless
 * reuse_block_mask is set: then it is cached per (doc_ids pointer, batch, heads_q, seqlen_q, seqlen_k,
 * causal/window settings, block sizes), and only a call with a new key rebuilds it (the 16 most recent
 * are kept). The ids' *contents* are not part of the key: after writing new ids at a cached address (or
 * freeing them and allocating new ones there), call tilejit_flex_clear_cache. Thread-safe (calls are
 * serialized). Besides compiling, a call waits for the device only when it grows its scratch lse (lse
 * NULL) or evicts a cached block mask.
 * With TILEJIT_INTERPRET=1 it runs on the CPU interpreter and every pointer is host memory (tests).
 * Errors (TILEJIT_ERROR_INVALID_ARGUMENT): null pointers, heads_q not a multiple of heads_kv, window
 * sides < −1, softcap < 0 or not finite, doc_ids with seqlen_q ≠ seqlen_k, bad dtype/strides/head_dim/blocks. */
int tilejit_flex_attention_forward(const void *q, const void *k, const void *v, void *out, float *lse, int dtype,
                                   int batch, int heads_q, int heads_kv, int seqlen_q, int seqlen_k, int head_dim,
                                   const int64_t *q_strides, const int64_t *k_strides, const int64_t *v_strides,
                                   const int64_t *o_strides, float softmax_scale,
                                   const tilejit_flex_variant *variant, void *stream);

/* Gradients of tilejit_flex_attention_forward with the same arguments (attention::flex_backward): dq, dk, dv
 * (the dtype, shape and strides of q, k, v) from q, k, v, the forward's out and lse (required here: contiguous
 * [batch, heads_q, seqlen_q] f32) and dout (out's strides). Variants as in the forward; the document mask's
 * block mask is built per call (reuse_block_mask does not apply). autotune nonzero (GPU): the backward's own
 * autotuner picks the tiling and copy method (FlexOptions::autotune in flex_backward, flex_attention.h; dq, dk,
 * dv end as one call leaves them), and tilejit_last_launch_config reports its pick; else the variant's block
 * sizes or the defaults. dq, dk and dv are bitwise reproducible unless the variant sets atomics. Errors as the
 * forward's, and lse NULL. */
int tilejit_flex_attention_backward(const void *q, const void *k, const void *v, const void *out, const float *lse,
                                    const void *dout, void *dq, void *dk, void *dv, int dtype, int batch, int heads_q,
                                    int heads_kv, int seqlen_q, int seqlen_k, int head_dim, const int64_t *q_strides,
                                    const int64_t *k_strides, const int64_t *v_strides, const int64_t *o_strides,
                                    float softmax_scale, const tilejit_flex_variant *variant, void *stream);

/* Drops the cached document block masks (waits for the device first). Compiled kernels stay. */
int tilejit_flex_clear_cache(void);

/* A paged KV cache (tilejit/paged_attention.h; here K and V share one head dim): K and V pages
 * [num_pages, page_size, heads_kv, head_dim], block_table [batch, max_pages_per_seq] i32 (logical page →
 * physical page), seq_lens [batch] i32 (tokens in each sequence, the new ones included), all device memory.
 * Strides in elements, 0: contiguous. */
typedef struct tilejit_paged_kv {
  void *k_pages, *v_pages;
  const int32_t *block_table, *seq_lens;
  int dtype;             /* TILEJIT_DTYPE_BF16 or TILEJIT_DTYPE_F16 */
  int num_pages, page_size, heads_kv, head_dim, max_pages_per_seq;
  int64_t page_stride, token_stride, head_stride, block_table_stride;
} tilejit_paged_kv;

/* Writes tokens' K/V, k_new / v_new contiguous [tokens, heads_kv, head_dim], into slot_mapping[t] =
 * page·page_size + offset (negative: skipped). Asynchronous on `stream`. */
int tilejit_paged_kv_append(const tilejit_paged_kv *cache, const void *k_new, const void *v_new,
                            const int32_t *slot_mapping, int tokens, void *stream);

typedef struct tilejit_decode_plan tilejit_decode_plan;

/* Plans a decode step (attention::DecodePlan): batch sequences, heads_q query heads, seqlen_q (1..16) new
 * tokens each, sequences up to max_seq_len tokens (0: max_pages_per_seq·page_size), the variant's mods
 * (causal, window, alibi, softcap; doc_ids must be NULL; block sizes and autotune are not used here),
 * softmax_scale <= 0: 1/sqrt(head_dim), num_splits 0: automatic; block_n, num_warps, num_stages 0: the library's choice.
 * Compiles and loads the kernels and allocates the scratch (this call may wait for the device). */
int tilejit_decode_plan_create(tilejit_decode_plan **plan, const tilejit_paged_kv *cache, int batch, int heads_q,
                               int seqlen_q, int max_seq_len, const tilejit_flex_variant *variant,
                               float softmax_scale, int num_splits, int block_n, int num_warps, int num_stages);

/* Runs a planned step: q [batch, seqlen_q, heads_q, head_dim], out [batch, seqlen_q, heads_q, head_dim]
 * contiguous, lse [batch, seqlen_q, heads_q] f32 or NULL; cache with the plan's layout. Only launches
 * (no allocation, no synchronization): capturable in a CUDA graph on `stream`. */
int tilejit_decode_plan_run(const tilejit_decode_plan *plan, const void *q, void *out, float *lse,
                            const tilejit_paged_kv *cache, void *stream);

/* The plan's split count, keys per block and scratch bytes (any pointer may be NULL). */
int tilejit_decode_plan_info(const tilejit_decode_plan *plan, int *num_splits, int *block_n, int64_t *scratch_bytes);

/* Frees the plan and its scratch (waits for the device first). NULL is a no-op. */
int tilejit_decode_plan_destroy(tilejit_decode_plan *plan);

/* c[M,N] = a[M,K]·b[K,N], contiguous row-major, dtype bf16 (0), f16 (1) or f32 (2), f32 accumulation.
 * Uses the autotuner's config for the shape (the first call per shape bucket tunes). With TILEJIT_INTERPRET=1:
 * the CPU interpreter on host pointers, default blocks, no tuning. */
int tilejit_matmul(const void *a, const void *b, void *c, int M, int N, int K, int dtype, void *stream);

/* What one compile cost (milliseconds) and where the kernel came from. */
typedef struct tilejit_compile_stats {
  double trace_ms;   /* DSL trace + IR passes (0 when the trace was cached in this process) */
  double codegen_ms; /* IR → LLVM → PTX (0 when the PTX or cubin came from the disk cache) */
  double link_ms;    /* driver JIT PTX → cubin (0 on a cubin cache hit) */
  double load_ms;    /* cuModuleLoadData and function setup */
  double total_ms;   /* the whole call: trace + cache lookups + codegen + link + load */
  char source[16];   /* "memory", "cubin cache", "ptx cache" or "compiled" */
} tilejit_compile_stats;

/* Traces, compiles and loads (without running) the attention kernel for this variant and configuration,
 * and fills *stats. Run it in a fresh process with an empty TILEJIT_CACHE_DIR for the cold time, and in a
 * second process for the warm (disk cache) time. */
int tilejit_attention_compile(int dtype, int head_dim, int causal, int seqlen, int block_m, int block_n,
                              int num_warps, int num_stages, tilejit_compile_stats *stats);

/* The statistics of the most recent kernel compile/load lookup in this process (trace_ms is 0). */
int tilejit_last_compile_stats(tilejit_compile_stats *stats);

/* The launch configuration of a kernel call. */
typedef struct tilejit_launch_config {
  char kernel[32];       /* "attention_fwd", "flex_attention_fwd" or "matmul"; "" before the first call */
  int block_m, block_n;  /* tile sizes of the output (rows, columns / keys per block) */
  int block_k;           /* matmul's reduction tile; 0 for attention */
  int num_warps, num_stages;
  int min_ctas_per_sm;   /* 0: registers uncapped; n > 0: capped so that n programs fit per SM */
  int autotuned;         /* nonzero: the autotuner chose it (tuned by this call or found in its cache) */
  int copy_method;       /* how the loops' operand tiles that qualify are copied to shared memory, the environment
                            (TILEJIT_TMA, ...) applied: 0 cp.async by every thread (any arch but sm_90a, the
                            interpreter), 1 TMA issued by one thread, 2 TMA issued by a producer warpgroup (only
                            where one fits beside num_warps; elsewhere a request for it runs as 1) */
} tilejit_launch_config;

/* The configuration used by the most recent tilejit_attention_forward, tilejit_attention_forward_config,
 * tilejit_flex_attention_forward or tilejit_matmul call on this thread that launched a kernel (a successful
 * call on a non-empty problem): with autotuning, the autotuner's pick for that shape (e.g. to report it, or
 * to build a block mask at the block sizes the tuner prefers); otherwise the given or default configuration.
 * Before any such call, kernel is "" and every number 0. Errors: TILEJIT_ERROR_INVALID_ARGUMENT for a null
 * pointer. */
int tilejit_last_launch_config(tilejit_launch_config *config);

/* The message of the last failed call on this thread ("" if none). */
const char *tilejit_last_error(void);

/* "0.1.0" (the library's version). */
const char *tilejit_version(void);

#ifdef __cplusplus
}
#endif

#endif /* TILEJIT_C_API_H */
