// A user-written attention variant in a few lines: Gemma 2's local layers, tanh soft-capping of the
// scores (cap 50) plus a causal sliding window of 4096 keys, traced into the attention kernel.
// Runs on the GPU, or on the CPU interpreter (then on a small shape) when there is no GPU or
// TILEJIT_INTERPRET=1 is set.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "tilejit/flex_attention.h"
#include "tilejit/launch.h"
#include "tilejit/ops.h"

using namespace tilejit;

int main() {
  Backend be = gpu_available() ? resolve_backend(Backend::Auto) : Backend::Interpreter;
  bool cpu = be == Backend::Interpreter;
  attention::FlexShape shape{.batch = 1, .heads_q = 8, .heads_kv = 4, .seqlen_q = cpu ? 64 : 8192,
                             .seqlen_k = cpu ? 64 : 8192, .head_dim_qk = cpu ? 32 : 128};

  attention::FlexOptions opt;
  auto cap = capture(50.f);  // a kernel argument: changing it never recompiles
  opt.score_mod = [cap](Tile score, Tile, Tile, Tile, Tile) { return cap() * tanh(score / cap()); };
  opt.mask = [](Tile, Tile, Tile q, Tile kv) { return (kv <= q) & (q - kv < 4096); };

  size_t nq = size_t(shape.heads_q) * shape.seqlen_q * shape.head_dim_qk;
  size_t nk = size_t(shape.heads_kv) * shape.seqlen_k * shape.head_dim_qk;
  std::vector<uint16_t> ones_q(nq, 0x3c00), ones_k(nk, 0x3c00);  // f16 1.0
  opt.dtype = DType::f16;
  opt.backend = be;
  Buffer q(nq * 2, be), k(nk * 2, be), v(nk * 2, be), out(nq * 2, be), lse(nq / shape.head_dim_qk * 4, be);
  q.upload(ones_q);
  k.upload(ones_k);
  v.upload(ones_k);
  attention::flex_forward(q, k, v, out, lse, shape, opt);
  auto o = out.download_as<uint16_t>(1);
  auto l = lse.download_as<float>(size_t(shape.seqlen_q));
  // All scores equal: out = 1, lse of the last row = cap·tanh(d·scale/cap) + log(visible keys).
  double score = 50.0 * std::tanh(shape.head_dim_qk / std::sqrt(double(shape.head_dim_qk)) / 50.0);
  double want = score + std::log(double(std::min(shape.seqlen_q, 4096)));
  bool ok = o[0] == 0x3c00 && std::abs(l.back() - want) < 1e-3 * std::abs(want);
  std::printf("out[0] = 0x%04x (f16 1.0 = 0x3c00), lse[last] = %.4f (expected %.4f): %s\n", o[0], l.back(), want,
              ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
