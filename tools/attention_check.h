// Float64 reference attention for sampled query rows, used by `tilejit attention --check` and the tests.
#pragma once
#include <cstdint>
#include <vector>

namespace tilejit::tools {

struct RowRef {
  std::vector<double> out;  // head_dim values
  double lse;               // natural-log logsumexp of the scaled scores (-inf if no key is visible)
};

/// Reference for query row i of head (b, h). q/k/v hold the inputs already widened to float (the exact
/// bf16/f16 values), layout [batch, heads, seqlen, head_dim].
RowRef reference_row(const std::vector<float> &q, const std::vector<float> &k, const std::vector<float> &v,
                     int heads, int seqlen_q, int seqlen_k, int head_dim, double scale, bool causal, int b,
                     int h, int i);

}  // namespace tilejit::tools
