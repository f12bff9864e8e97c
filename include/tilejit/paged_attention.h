// Attention over a paged KV cache: serving's decode step (a few new tokens per sequence against a long cache)
// and chunked prefill, with every score_mod and mask that flex_forward takes.
//
//   attention::PagedKVCache cache{...};                       // pages, block table, lengths: device memory
//   attention::paged_kv_append(cache, k_new, v_new, slots, tokens);       // write the new tokens' K/V
//   attention::DecodePlan plan({.batch = 8, .heads_q = 32, .seqlen_q = 1, .max_seq_len = 32768}, cache, opt);
//   plan.run(q, out, lse, cache, &stream);                    // only launches: capturable in a CUDA graph
//
// Layout (vLLM's and FlashInfer's): K and V pages [num_pages, page_size, heads_kv, head_dim] (element strides
// of a page, a token and a head configurable), a block table [batch, max_pages_per_seq] i32 mapping each
// sequence's logical page p (tokens p·page_size … p·page_size + page_size − 1) to a physical page, and the
// sequences' lengths [batch] i32 — the number of tokens in the cache, the new ones included (append first,
// then attend; a sequence shorter than seqlen_q puts its first queries before position 0, where they see no
// key). All three live in device memory and are read only by the kernels, so a captured graph
// replays with new contents at the same addresses. Entries of the block table past a sequence's last page
// are never read. The lengths and block table are NOT checked on the device (as in vLLM / FlashInfer):
// a length above max_pages_per_seq·page_size, or a page index outside [0, num_pages), reads outside the
// pages (the interpreter reports it as an out-of-bounds access).
//
// Positions. The new tokens of a sequence of length L are its last ones: query i (of seqlen_q) sits at
// position L − seqlen_q + i. score_mods and masks see logical positions: q_idx = that position, kv_idx = the
// key's index in its sequence (never a page slot); mod_seqlen_q() is the number of queries, mod_seqlen_k()
// is L. The queries are causal among themselves only through the mask (attention::causal(), as in a
// prefill; a Band is anchored on positions, so its Align does not matter here). Sliding windows (a band)
// visit only the pages inside the window.
//
// Decode kernel (flash-decoding; FlashAttention-2's loop, arXiv 2307.08691, over the cache): one program
// per (KV head, sequence, KV split) holds every query head of the GQA group and every new token of its
// sequence as the rows of one tile ("GQA packing": each K/V page is read once per group), so the rows are
// seqlen_q · heads_q / heads_kv (padded to a power of two ≥ 16). When batch · heads_kv programs cannot fill
// the GPU, each sequence's keys are split into num_splits equal ranges of whole key blocks, each program
// writes its partial output and logsumexp (f32, to the plan's scratch), and a combine kernel merges them
// weighted by exp(lse_split − lse) (a split that sees no key has lse −inf and weight 0; a row that sees no
// key at all gets output 0 and lse −inf).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tilejit/buffer.h"
#include "tilejit/flex_attention.h"
#include "tilejit/launch.h"
#include "tilejit/types.h"

namespace tilejit::attention {

/// A paged KV cache in device memory (host memory on the interpreter). Element strides 0 mean the contiguous
/// layout [num_pages, page_size, heads_kv, head_dim]: token_stride = heads_kv·head_dim, head_stride =
/// head_dim, page_stride = page_size·token_stride; the last dimension is contiguous. K and V share the
/// strides; with head_dim_v ≠ head_dim the contiguous strides are per tensor's own head dim.
struct PagedKVCache {
  DevicePtr k_pages, v_pages;  // dtype elements
  DevicePtr block_table;       // i32 [batch, max_pages_per_seq] (row stride block_table_stride)
  DevicePtr seq_lens;          // i32 [batch]: tokens in each sequence, the new ones included; at most
                               // max_pages_per_seq·page_size (attention takes a longer one as that many, and
                               // a negative one as 0, rather than read past the sequence's block-table row)
  DType dtype = DType::bf16;   // bf16 or f16
  int num_pages = 0;
  int page_size = 16;          // a power of two, 1 … 256
  int heads_kv = 1;
  int head_dim = 128, head_dim_v = 0;  // [16, 256]; head_dim_v 0: head_dim
  int max_pages_per_seq = 0;
  /// Elements; 0: contiguous (see above). token_stride is compiled into the kernels: each distinct value
  /// compiles its own, once.
  int64_t page_stride = 0, token_stride = 0, head_stride = 0;
  int64_t block_table_stride = 0;                               // elements; 0: max_pages_per_seq
};

/// Where paged_kv_append runs and how its inputs are laid out.
struct AppendOptions {
  /// Element strides of k_new / v_new over (token, head); the head dim is contiguous. 0: contiguous
  /// [tokens, heads_kv, head_dim].
  int64_t token_stride = 0, head_stride = 0;
  Backend backend = Backend::Auto;
  Stream *stream = nullptr;
};

/// Writes the K/V of `tokens` new tokens, k_new [tokens, heads_kv, head_dim] and v_new [tokens, heads_kv,
/// head_dim_v] (cache.dtype), into their slots: slot_mapping i32 [tokens], slot = physical page · page_size +
/// offset in the page (vLLM's slot mapping); a negative slot skips its token (padding); slots are not checked
/// on the device (one at or past num_pages · page_size writes outside the pages; the interpreter reports it).
/// One DSL kernel, no host synchronization; the block table and lengths are not touched (the caller sets them). Throws
/// TraceError for a cache that fails validation (see DecodePlan), null pointers, tokens < 0.
void paged_kv_append(const PagedKVCache &cache, DevicePtr k_new, DevicePtr v_new, DevicePtr slot_mapping,
                     int tokens, const AppendOptions &opt = {});

/// The shape of a decode step.
struct DecodeShape {
  int batch = 1;
  int heads_q = 1;       // a multiple of the cache's heads_kv
  int seqlen_q = 1;      // new tokens per sequence, 1 … 16 (speculative decoding, multi-token prediction)
  /// The longest sequence a run will see (sizes the KV split); 0: max_pages_per_seq · page_size. Longer
  /// sequences are still computed correctly, in fewer, longer splits' worth of work per program.
  int max_seq_len = 0;
};

struct DecodeOptions {
  ScoreMod score_mod;
  Mask mask;
  float softmax_scale = 0.f;  // 0: 1/sqrt(head_dim); else as FlexOptions::softmax_scale
  /// KV splits per sequence; 0: chosen from the shape and the SM count (as many as fill one wave of two
  /// programs per SM — of the compiled kernel's programs per SM where the plan compares tilings, below —,
  /// each split at least four key blocks long). 1: no split (the kernel writes out and lse directly).
  int num_splits = 0;
  /// Keys per block (a power of two ≥ 16), warps, pipelining stages; 0: the library's choice for the shape.
  /// All three 0: 64 keys × 4 warps × 3 stages, except on the GPU for sequences of at most 2048 keys
  /// (max_seq_len) whose programs need more than one wave of it: the plan then compiles 32 × 4 × 3 (registers
  /// capped for four programs per SM) and 16 × 1 × 4 in turn and takes the first whose programs, splits
  /// included, run in one wave (the driver's occupancy of the compiled kernel; one that spills is passed
  /// over). Any of them given: that tiling, the others' defaults 64, 4, 3.
  int block_n = 0, num_warps = 0, num_stages = 0;
  Backend backend = Backend::Auto;
  std::string arch;  // GPU arch to compile for; empty: the device's own
};

/// A decode step planned once per batch shape: validation, the split count, the scratch for partial outputs
/// (allocated here), and the kernels traced, compiled and loaded. run() then only launches (no allocation,
/// no host synchronization, no compilation), so it can be captured in a CUDA graph (tilejit/graph.h) and
/// replayed with new lengths, block tables, queries and pages at the same addresses.
class DecodePlan {
 public:
  /// `cache` gives the layout (sizes, strides, dtype); its pointers only give the alignments the kernels are
  /// specialized for, and q, out and lse are assumed 16-byte aligned (run() rejects pointers of another
  /// alignment, which would need other kernels: 16-byte aligned buffers always match). Throws TraceError
  /// naming the field and value: heads_q not a multiple of heads_kv, seqlen_q outside 1 … 16, more than 256
  /// query rows per KV head ((heads_q / heads_kv)·seqlen_q), a page size that is not a power of two in 1 … 256,
  /// head dims outside [16, 256], dtype not bf16/f16, batch < 0, negative strides or counts, num_splits < 0,
  /// and the mods' own errors.
  DecodePlan(const DecodeShape &shape, const PagedKVCache &cache, const DecodeOptions &opt);
  ~DecodePlan();
  DecodePlan(DecodePlan &&) noexcept;  // a moved-from plan may only be destroyed or assigned to (its other
                                       // functions throw TraceError saying so)
  DecodePlan &operator=(DecodePlan &&) noexcept;

  /// out = attention of q over the cache. q [batch, seqlen_q, heads_q, head_dim], out [batch, seqlen_q,
  /// heads_q, head_dim_v] (cache.dtype, contiguous); lse [batch, seqlen_q, heads_q] f32 natural-log
  /// logsumexp, or a null pointer. Launches on `stream` (null: the default stream) and returns. The plan's
  /// scratch is shared by its runs: order them (one stream, or one graph replay at a time). Throws TraceError
  /// for a cache of another layout than the plan's (sizes, strides), null q / out / pages / block table /
  /// lengths, buffers whose byte counts (where known) are too small, and a pointer whose 16-byte alignment
  /// differs from the plan's.
  void run(DevicePtr q, DevicePtr out, DevicePtr lse, const PagedKVCache &cache, Stream *stream = nullptr) const;

  /// KV splits per sequence (1: none, no combine kernel).
  int num_splits() const;
  /// Keys per block of the attention kernel.
  int block_n() const;
  size_t scratch_bytes() const;  // the partial outputs' scratch (0 without a split)
  /// The PTX of the plan's kernels for `arch` (default sm_90a), the attention kernel's module then, with a
  /// split, the combine kernel's; no GPU needed (plan with Backend::Interpreter on a machine without one).
  std::string ptx(const std::string &arch = "sm_90a") const;

 private:
  struct Impl;
  const Impl &impl(const char *what) const;
  std::unique_ptr<Impl> impl_;
};

/// One decode step without a plan: plans and runs (compiled kernels are cached; the scratch is allocated for
/// this call, so this one may wait for the device). Convenient for tests and tools; a serving loop keeps a
/// DecodePlan.
void paged_decode(DevicePtr q, DevicePtr out, DevicePtr lse, const PagedKVCache &cache, const DecodeShape &shape,
                  const DecodeOptions &opt, Stream *stream = nullptr);

}  // namespace tilejit::attention
