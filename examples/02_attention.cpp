// Calls the built-in attention forward (written in the DSL, kernels/attention_fwd.cpp) on random inputs.
#include <tilejit/tilejit.h>

#include <cstdio>
#include <random>
#include <vector>

using namespace tilejit;

int main() {
  Backend where = gpu_available() ? Backend::GPU : Backend::Interpreter;
  attention::Shape shape{1, 2, where == Backend::GPU ? 2048 : 128, 0, 64};
  shape.seqlen_k = shape.seqlen_q;
  size_t n = size_t(shape.batch) * shape.heads * shape.seqlen_q * shape.head_dim;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<uint16_t> host(n);
  Buffer q(n * 2, where), k(n * 2, where), v(n * 2, where), out(n * 2, where);
  Buffer lse(size_t(shape.batch) * shape.heads * shape.seqlen_q * 4, where);
  for (Buffer *b : {&q, &k, &v}) {
    for (auto &x : host) x = float_to_bf16(dist(rng));
    b->upload(host);
  }
  const std::vector<uint16_t> v_host = host;  // the last upload was v
  attention::Options opt;
  opt.causal = true;
  opt.backend = where;
  attention::forward(q, k, v, out, lse, shape, opt);
  auto o = out.download_as<uint16_t>(n);
  std::printf("attention on the %s: out[0..3] = %f %f %f %f\n", where == Backend::GPU ? "GPU" : "interpreter",
              bf16_to_float(o[0]), bf16_to_float(o[1]), bf16_to_float(o[2]), bf16_to_float(o[3]));
  // Causal: query 0 sees key 0 only, so its output row is v's first row (softmax weight exactly 1).
  bool ok = true;
  for (int d = 0; d < shape.head_dim; ++d) ok = ok && o[size_t(d)] == v_host[size_t(d)];
  std::printf("row 0 equals v[0] (it sees only key 0): %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
