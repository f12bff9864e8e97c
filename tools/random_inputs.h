// Random bf16/f16 inputs for the CLI's runs and checks: values uniform in [-1, 1) rounded to the dtype, with
// their exact float values kept for the float64 references.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "tilejit/buffer.h"
#include "tilejit/types.h"

namespace tilejit::tools {

/// n values: the 16-bit payloads (bf16 or f16) and the float values they hold exactly.
void random_tensor(size_t n, DType dt, std::mt19937_64 &rng, std::vector<uint16_t> &bits, std::vector<float> &vals);
/// The same, uploaded to a Buffer on `be` (at least 2 bytes, so that an empty tensor still has an address).
Buffer random_buffer(size_t n, DType dt, std::mt19937_64 &rng, Backend be, std::vector<float> &vals);
/// The batch entries a check samples from: those with tokens (tokens(b) > 0), or all of them when none has any
/// (so that a varlen batch holding an empty sequence is not checked on that one alone).
std::vector<int> sequences_to_sample(int batch, const std::function<int(int)> &tokens);

}  // namespace tilejit::tools
