/* A user's attention variants written as C++ lambdas with tilejit's public API (flex_attention.h,
 * flex_variants.h, capture.h), next to tilejit's built-in variants of the same math, behind a small C ABI
 * so that Python (ctypes on PyTorch tensors) can call them: what an application embedding tilejit looks
 * like. bench/bench.py's `mods` and `decode` suites time these against FlexAttention; check_user_mods.cpp checks them
 * against float64 on the CPU interpreter.
 *
 * Tensors (forward): q, k, v, out contiguous [batch, heads, seqlen, head_dim] bf16 (self-attention: one seqlen);
 * lse contiguous [batch, heads, seqlen] f32 (natural-log logsumexp). Pointers are device memory of the
 * current CUDA device; with TILEJIT_INTERPRET=1 every kernel runs on the CPU interpreter and every pointer
 * is host memory. Calls run asynchronously on `stream` (a CUstream; NULL: the default stream), except when
 * they compile, tune or build a block mask.
 *
 * Every int-returning function returns 0 on success, else 1, and user_mods_last_error() says why (per
 * thread). Not thread-safe: call from one thread. */
#ifndef TILEJIT_EXAMPLE_USER_MODS_H
#define TILEJIT_EXAMPLE_USER_MODS_H

#include <stdint.h>

#include "tilejit/c_api.h" /* tilejit_paged_kv */

#ifdef __cplusplus
extern "C" {
#endif

/* The values the mods read; each mod uses only its own fields. Pointers and numbers become kernel
 * arguments (tilejit captures): changing them never recompiles. */
typedef struct user_mods_params {
  const float *alibi_slopes; /* alibi: [heads] f32, score − slope[h]·|q_idx − kv_idx| */
  float softcap;             /* softcap: cap > 0, cap·tanh(score / cap) */
  int window;                /* window: causal sliding window, query i sees keys i − window … i (≥ 0) */
  const int32_t *doc_ids;    /* document: [batch, seqlen] i32 document id per token */
  int prefix_len;            /* prefix_lm: keys < prefix_len visible to every query, the rest causally */
  const float *bias_table;   /* relbias: [heads, 2·max_distance + 1] f32, score + table[h, clamp(kv − q) + max] */
  int max_distance;          /* relbias: relative distances clamped to [−max_distance, max_distance] (≥ 0) */
} user_mods_params;

/* out = softmax(mod(q·kᵀ/sqrt(head_dim))) · v with the mod named `mod`: "alibi", "softcap", "window",
 * "document", "prefix_lm" or "relbias" for the user-written lambda, "builtin:<name>" for tilejit's built-in
 * of the same math (attention::alibi, softcap, sliding_window, document_mask, prefix_lm,
 * relative_position_bias). block_mask: 0, or a handle from user_mods_build_block_mask for this mod and
 * shape; with 0, flex_forward builds a mask function's block mask itself (for only the batches / heads the
 * function reads, and kept between calls when it reads no memory: see attention::BlockMaskMode).
 * autotune nonzero (GPU): the autotuner picks the tile config (the first call per shape and mod tunes; with
 * a block mask, its block sizes stay and the tuner picks warps and stages). Errors: unknown mod, a field the
 * mod needs missing or out of range, head_dim outside [16, 256], an unknown block-mask handle or one built
 * for another mod or shape, and tilejit's own errors. */
int user_mods_forward(const char *mod, const user_mods_params *params, int block_mask, const void *q, const void *k,
                      const void *v, void *out, float *lse, int batch, int heads, int seqlen, int head_dim,
                      int autotune, void *stream);

/* The gradients of user_mods_forward's output (same mod, params and shape; its out and lse): dq, dk, dv
 * (q's layout, bf16) from dout (out's layout), through attention::flex_backward; the score_mod's derivative is
 * traced from the lambda (or built-in) itself. Captures stay constants (no table gradient). block_mask: 0, or
 * a handle from user_mods_build_block_mask for this mod and shape, whose block sizes the backward then uses
 * (its dK/dV pass walks the mask transposed); with 0 a mask function's block mask is built (or reused from
 * the cache) as in the forward. Errors as user_mods_forward's, and flex_backward's. */
int user_mods_backward(const char *mod, const user_mods_params *params, int block_mask, const void *q, const void *k,
                       const void *v, const void *out, const float *lse, const void *dout, void *dq, void *dk,
                       void *dv, int batch, int heads, int seqlen, int head_dim, void *stream);

/* Builds the block mask of mask mod `mod` (window, document, prefix_lm, or their builtin: forms) once, for
 * this shape and these block sizes (powers of two ≥ 16), from params' current values — FlexAttention's
 * create_block_mask — and stores a handle (> 0) for user_mods_forward and user_mods_backward in *handle. The caller promises not
 * to change the values the mask reads (ids, window, prefix) while using it. Errors: a mod without a mask
 * function (a band, e.g. builtin:window, needs none), bad block sizes, a null handle. */
int user_mods_build_block_mask(const char *mod, const user_mods_params *params, int batch, int heads, int seqlen,
                               int head_dim, int block_m, int block_n, void *stream, int *handle);

/* Frees every block mask built by user_mods_build_block_mask (their handles become invalid). Waits for the
 * streams they were built on; calls that used them on other streams must have finished. */
int user_mods_drop_block_masks(void);

/* Decode over a paged KV cache (tilejit/paged_attention.h): a plan for `batch` sequences of `seqlen_q` (1..16) new
 * tokens each, `heads_q` query heads, sequences of up to `max_seq_len` tokens (0: the cache's capacity), with
 * the mod named `mod`: "none", or "alibi", "softcap", "window" for the user-written lambda and
 * "builtin:alibi", "builtin:softcap", "builtin:window" for tilejit's built-in of the same math. Mods see
 * positions in the sequence (the query of new token i at seq_lens[b] − seqlen_q + i). causal nonzero: the new
 * tokens see each other causally (a band added to none / alibi / softcap; the window is causal by its
 * definition). The cache (bf16; see tilejit_paged_kv in tilejit/c_api.h) gives the layout; its pointers and
 * the values of params are read again by every run, so they must stay valid while the plan is used.
 * Compiles the kernels (this call may wait for the device) and stores the plan in *plan. Errors: an unknown
 * mod or one without a decode form (document, prefix_lm, relbias), a field the mod needs missing or out of
 * range, a cache dtype other than bf16, and tilejit's own errors (attention::DecodePlan). */
typedef struct user_mods_decode_plan user_mods_decode_plan;
int user_mods_decode_plan_create(const char *mod, const user_mods_params *params, const tilejit_paged_kv *cache,
                                 int batch, int heads_q, int seqlen_q, int max_seq_len, int causal,
                                 user_mods_decode_plan **plan);

/* Runs a plan: q [batch, seqlen_q, heads_q, head_dim] bf16, out likewise, lse [batch, seqlen_q, heads_q] f32 or
 * NULL; cache with the plan's layout (new contents and pointers are fine). Only launches, on `stream`: it can
 * be captured in a CUDA graph. */
int user_mods_decode_plan_run(user_mods_decode_plan *plan, const void *q, void *out, float *lse,
                              const tilejit_paged_kv *cache, void *stream);

/* Frees a plan (waits for the device first). NULL is a no-op. */
int user_mods_decode_plan_destroy(user_mods_decode_plan *plan);

/* Why the last failed call on this thread failed ("" if it succeeded). */
const char *user_mods_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* TILEJIT_EXAMPLE_USER_MODS_H */
