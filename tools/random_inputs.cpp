#include "tools/random_inputs.h"

#include <algorithm>

#include "tilejit/numerics.h"

namespace tilejit::tools {

void random_tensor(size_t n, DType dt, std::mt19937_64 &rng, std::vector<uint16_t> &bits, std::vector<float> &vals) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  bits.resize(n);
  vals.resize(n);
  for (size_t i = 0; i < n; ++i) {
    float x = dist(rng);
    bits[i] = dt == DType::bf16 ? float_to_bf16(x) : float_to_f16(x);
    vals[i] = dt == DType::bf16 ? bf16_to_float(bits[i]) : f16_to_float(bits[i]);
  }
}

Buffer random_buffer(size_t n, DType dt, std::mt19937_64 &rng, Backend be, std::vector<float> &vals) {
  std::vector<uint16_t> bits;
  random_tensor(n, dt, rng, bits, vals);
  Buffer b(std::max<size_t>(n, 1) * 2, be);
  if (n) b.upload(bits);
  return b;
}

std::vector<int> sequences_to_sample(int batch, const std::function<int(int)> &tokens) {
  std::vector<int> with_tokens, all;
  for (int b = 0; b < batch; ++b) {
    all.push_back(b);
    if (tokens(b) > 0) with_tokens.push_back(b);
  }
  return with_tokens.empty() ? all : with_tokens;
}

}  // namespace tilejit::tools
