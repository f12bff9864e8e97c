// A serving loop over a paged KV cache: two prompts of different lengths are prefilled (their K/V written into
// pages handed out by a small page allocator, their attention computed by flex_forward reading the cache), then
// both sequences decode token by token with a Gemma-2-style local layer — tanh soft-capping at 50 and a causal
// sliding window — each step appending its token's K/V and attending over the cache. On the GPU the step
// (append + decode) is captured once in a CUDA graph and replayed: each step only writes new queries, keys,
// slots, block-table entries and lengths into the same device buffers. On the CPU interpreter (no GPU, or
// TILEJIT_INTERPRET=1) the steps run directly, on a smaller shape. Inputs are random (no weights); each output
// is checked against a float64 computation on the host, and the program exits non-zero on a mismatch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "tilejit/flex_variants.h"
#include "tilejit/graph.h"
#include "tilejit/numerics.h"
#include "tilejit/paged_attention.h"

using namespace tilejit;

namespace {

std::mt19937_64 rng(2026);
// bf16 outputs (|out| < 1, f32 accumulation) against float64: within 1e-2 absolute.
constexpr double kTolerance = 1e-2;

/// Random bf16 values in [-1, 1): the bits for the device, the exact values for the host check.
std::vector<uint16_t> random_bf16(size_t n, std::vector<float> *values = nullptr) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<uint16_t> bits(n);
  for (size_t i = 0; i < n; ++i) {
    bits[i] = float_to_bf16(d(rng));
    if (values) values->push_back(bf16_to_float(bits[i]));
  }
  return bits;
}

DevicePtr ptr(const Buffer &b) { return {b.address(), b.bytes()}; }

/// Float64 attention of one query row over keys 0 … len−1 of one KV head, keys visible where `visible(j)`, scores
/// passed through `mod`. keys / values: [len, heads_kv, d] of the sequence, in order.
std::vector<double> reference_row(const float *q, const std::vector<float> &keys, const std::vector<float> &values,
                                  int len, int heads_kv, int kv_head, int d, double (*mod)(double),
                                  const std::function<bool(int)> &visible) {
  std::vector<double> s(size_t(len), -INFINITY), out(size_t(d), 0.0);
  double mx = -INFINITY;
  for (int j = 0; j < len; ++j) {
    if (!visible(j)) continue;
    double dot = 0;
    for (int e = 0; e < d; ++e) dot += double(q[e]) * keys[(size_t(j) * heads_kv + kv_head) * d + e];
    s[size_t(j)] = mod(dot / std::sqrt(double(d)));
    mx = std::max(mx, s[size_t(j)]);
  }
  if (mx == -INFINITY) return out;
  double sum = 0;
  for (int j = 0; j < len; ++j) {
    if (s[size_t(j)] == -INFINITY) continue;
    double p = std::exp(s[size_t(j)] - mx);
    sum += p;
    for (int e = 0; e < d; ++e) out[size_t(e)] += p * values[(size_t(j) * heads_kv + kv_head) * d + e];
  }
  for (double &o : out) o /= sum;
  return out;
}

double identity(double s) { return s; }
double softcap50(double s) { return 50.0 * std::tanh(s / 50.0); }

}  // namespace

int main() {
  const Backend be = gpu_available() ? resolve_backend(Backend::Auto) : Backend::Interpreter;
  const bool gpu = be == Backend::GPU;
  const int Hq = 8, Hkv = 2, D = gpu ? 128 : 64, P = 16, steps = gpu ? 16 : 6;
  const int window = gpu ? 1024 : 32;  // Gemma 2's local layers use 4096
  const std::vector<int> prompt = gpu ? std::vector<int>{1500, 3001} : std::vector<int>{37, 81};
  const int B = int(prompt.size());
  const int max_prompt = *std::max_element(prompt.begin(), prompt.end()), max_len = max_prompt + steps;
  const int max_pages = (max_len + P - 1) / P;

  // The cache: pages for both sequences' whole lives and a few more, handed out from a shuffled free list (as
  // a serving engine's list looks after requests have come and gone).
  attention::PagedKVCache cache;
  cache.dtype = DType::bf16;
  cache.num_pages = B * max_pages + 4;
  cache.page_size = P;
  cache.heads_kv = Hkv;
  cache.head_dim = D;
  cache.max_pages_per_seq = max_pages;
  const size_t page_elems = size_t(P) * Hkv * D;
  Buffer k_pages(cache.num_pages * page_elems * 2, be), v_pages(cache.num_pages * page_elems * 2, be);
  Buffer table(size_t(B) * max_pages * 4, be), lens(size_t(B) * 4, be);
  cache.k_pages = ptr(k_pages);
  cache.v_pages = ptr(v_pages);
  cache.block_table = ptr(table);
  cache.seq_lens = ptr(lens);
  std::vector<int32_t> free_pages(size_t(cache.num_pages)), block_table(size_t(B) * max_pages, 0), seq_lens(B, 0);
  std::iota(free_pages.begin(), free_pages.end(), 0);
  std::shuffle(free_pages.begin(), free_pages.end(), rng);
  // The slot of sequence b's next token, taking a page from the free list when the last one is full.
  auto next_slot = [&](int b) {
    int pos = seq_lens[size_t(b)]++;
    if (pos % P == 0) {
      block_table[size_t(b) * max_pages + pos / P] = free_pages.back();
      free_pages.pop_back();
    }
    return block_table[size_t(b) * max_pages + pos / P] * P + pos % P;
  };
  // Each sequence's K/V in order, kept on the host for the float64 checks.
  std::vector<std::vector<float>> keys(static_cast<size_t>(B)), values(static_cast<size_t>(B));

  std::optional<Stream> stream;
  if (gpu) stream.emplace();
  Stream *s = stream ? &*stream : nullptr;
  attention::AppendOptions append_opt{.backend = be, .stream = s};
  bool ok = true;

  // ---- prefill: both prompts' K/V appended in one call, then causal attention of the prompts over the cache.
  {
    std::vector<int32_t> slots;
    std::vector<float> k_vals, v_vals;
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < prompt[size_t(b)]; ++t) slots.push_back(next_slot(b));
    const int tokens = int(slots.size());
    std::vector<uint16_t> k_bits = random_bf16(size_t(tokens) * Hkv * D, &k_vals);
    std::vector<uint16_t> v_bits = random_bf16(size_t(tokens) * Hkv * D, &v_vals);
    size_t at = 0;
    for (int b = 0; b < B; ++b) {
      size_t n = size_t(prompt[size_t(b)]) * Hkv * D;
      keys[size_t(b)].assign(k_vals.begin() + at, k_vals.begin() + at + n);
      values[size_t(b)].assign(v_vals.begin() + at, v_vals.begin() + at + n);
      at += n;
    }
    Buffer k_new(k_bits.size() * 2, be), v_new(v_bits.size() * 2, be), slot_buf(slots.size() * 4, be);
    k_new.upload(k_bits);
    v_new.upload(v_bits);
    slot_buf.upload(slots);
    table.upload(block_table);
    lens.upload(seq_lens);
    attention::paged_kv_append(cache, ptr(k_new), ptr(v_new), ptr(slot_buf), tokens, append_opt);

    // Queries of both prompts packed (varlen): q [total, Hq, D]; the cache's lengths give each sequence's keys.
    std::vector<float> q_vals;
    std::vector<uint16_t> q_bits = random_bf16(size_t(tokens) * Hq * D, &q_vals);
    std::vector<int32_t> cu{0};
    for (int n : prompt) cu.push_back(cu.back() + n);
    Buffer q(q_bits.size() * 2, be), out(q_bits.size() * 2, be), lse(size_t(tokens) * Hq * 4, be);
    Buffer cu_buf(cu.size() * 4, be);
    q.upload(q_bits);
    cu_buf.upload(cu);
    attention::FlexOptions opt;
    opt.mask = attention::causal_top_left();  // positions L − q_len + i: the prompt attends causally to itself
    opt.kv_cache = &cache;
    opt.cu_seqlens_q = ptr(cu_buf);
    opt.backend = be;
    opt.stream = s;
    attention::FlexShape shape{.batch = B, .heads_q = Hq, .heads_kv = Hkv, .seqlen_q = max_prompt,
                               .seqlen_k = max_prompt, .head_dim_qk = D, .total_q = tokens};
    attention::flex_forward(ptr(q), DevicePtr{}, DevicePtr{}, ptr(out), ptr(lse), shape, opt);
    if (stream) stream->synchronize();
    std::vector<uint16_t> o = out.download_as<uint16_t>(q_bits.size());
    // Check each prompt's first and last rows, every head.
    double err = 0;
    for (int b = 0; b < B; ++b)
      for (int i : {0, prompt[size_t(b)] - 1})
        for (int h = 0; h < Hq; ++h) {
          size_t row = (size_t(cu[size_t(b)] + i) * Hq + h) * D;
          auto want = reference_row(&q_vals[row], keys[size_t(b)], values[size_t(b)], prompt[size_t(b)], Hkv,
                                    h / (Hq / Hkv), D, identity, [&](int j) { return j <= i; });
          for (int e = 0; e < D; ++e)
            err = std::max(err, std::abs(bf16_to_float(o[row + size_t(e)]) - want[size_t(e)]));
        }
    bool good = err < kTolerance;
    ok = ok && good;
    std::printf("prefill: prompts of %d and %d tokens in %d shuffled pages; max |error| of the checked rows vs "
                "float64 %.2e: %s\n", prompt[0], prompt[1], cache.num_pages - int(free_pages.size()), err,
                good ? "ok" : "FAILED");
  }

  // ---- decode: one new token per sequence per step, the buffers below reused by every step.
  attention::DecodeOptions dopt;
  dopt.score_mod = attention::softcap(50.f);
  dopt.mask = attention::sliding_window(window - 1, 0);  // each token sees itself and the window − 1 before it
  dopt.backend = be;
  attention::DecodePlan plan({.batch = B, .heads_q = Hq, .seqlen_q = 1, .max_seq_len = max_len}, cache, dopt);
  Buffer q(size_t(B) * Hq * D * 2, be), out(size_t(B) * Hq * D * 2, be), lse(size_t(B) * Hq * 4, be);
  Buffer k_step(size_t(B) * Hkv * D * 2, be), v_step(size_t(B) * Hkv * D * 2, be), slot_step(size_t(B) * 4, be);
  auto step_work = [&] {
    attention::paged_kv_append(cache, ptr(k_step), ptr(v_step), ptr(slot_step), B, append_opt);
    plan.run(ptr(q), ptr(out), ptr(lse), cache, s);
  };
  std::optional<CudaGraph> graph;
  std::printf("decode: %d steps, soft-cap 50 and a sliding window of %d, %d KV split(s) per sequence%s\n", steps,
              window, plan.num_splits(),
              gpu ? "; step 0 runs directly (compiles), then the step is captured in a CUDA graph and replayed"
                  : "; CPU interpreter: no GPU, CUDA graph capture skipped, each step runs directly");
  for (int step = 0; step < steps; ++step) {
    // The step's inputs: a query per head, the new token's K/V and slot, the grown tables.
    std::vector<float> q_vals, k_vals, v_vals;
    std::vector<uint16_t> q_bits = random_bf16(size_t(B) * Hq * D, &q_vals);
    std::vector<uint16_t> k_bits = random_bf16(size_t(B) * Hkv * D, &k_vals);
    std::vector<uint16_t> v_bits = random_bf16(size_t(B) * Hkv * D, &v_vals);
    std::vector<int32_t> slots;
    for (int b = 0; b < B; ++b) {
      slots.push_back(next_slot(b));
      const size_t from = size_t(b) * Hkv * D, to = from + size_t(Hkv) * D;
      keys[size_t(b)].insert(keys[size_t(b)].end(), k_vals.begin() + from, k_vals.begin() + to);
      values[size_t(b)].insert(values[size_t(b)].end(), v_vals.begin() + from, v_vals.begin() + to);
    }
    if (stream) stream->synchronize();  // the previous step has read its inputs
    q.upload(q_bits);
    k_step.upload(k_bits);
    v_step.upload(v_bits);
    slot_step.upload(slots);
    table.upload(block_table);
    lens.upload(seq_lens);
    if (graph) {
      graph->replay(*stream);
    } else {
      step_work();
      if (gpu) {
        graph.emplace(*stream, step_work);
        std::printf("  captured %d kernel launches\n", graph->num_kernels());
      }
    }
    if (stream) stream->synchronize();
    std::vector<uint16_t> o = out.download_as<uint16_t>(size_t(B) * Hq * D);
    double checksum = 0;
    for (uint16_t x : o) checksum += bf16_to_float(x);
    std::printf("  step %2d: lengths %d, %d%s  checksum %+.5f", step, seq_lens[0], seq_lens[1],
                graph && step > 0 ? " (graph replay)" : "", checksum);
    if (step == steps - 1) {  // the last step against float64, every head of both sequences
      double err = 0;
      for (int b = 0; b < B; ++b) {
        const int L = seq_lens[size_t(b)], pos = L - 1;
        for (int h = 0; h < Hq; ++h) {
          auto want = reference_row(&q_vals[(size_t(b) * Hq + h) * D], keys[size_t(b)], values[size_t(b)], L, Hkv,
                                    h / (Hq / Hkv), D, softcap50, [&](int j) { return j > pos - window && j <= pos; });
          for (int e = 0; e < D; ++e)
            err = std::max(err, std::abs(bf16_to_float(o[(size_t(b) * Hq + h) * D + e]) - want[size_t(e)]));
        }
      }
      bool good = err < kTolerance;
      ok = ok && good;
      std::printf("  max |error| vs float64 %.2e: %s", err, good ? "ok" : "FAILED");
    }
    std::printf("\n");
  }
  return ok ? 0 : 1;
}
