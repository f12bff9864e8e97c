// The decode plan's choice of tiling and splits, kernels/paged/decode_tiling.h.
#include "kernels/paged/decode_tiling.h"

#include <algorithm>

namespace tilejit::attention::paged {

int auto_splits(int64_t programs, int max_len, int block_n, int64_t slots) {
  if (programs <= 0) return 1;
  int64_t want = slots / programs;
  int64_t blocks = (int64_t(max_len) + block_n - 1) / block_n;
  return int(std::clamp<int64_t>(std::min<int64_t>(want, blocks / 4), 1, kMaxSplits));
}

TilingChoice choose_tiling(const TilingProblem &p, const std::function<int(const Tiling &, int)> &probe) {
  auto splits = [&](const Tiling &t, int64_t slots) {
    return p.num_splits > 0 ? p.num_splits : auto_splits(p.programs, p.max_len, t.block_n, slots);
  };
  const int64_t two_per_sm = 2 * int64_t(p.sms);
  if (p.search) {
    for (const Tiling &t : kTilings) {
      const int guess = splits(t, two_per_sm);
      int per_sm = probe(t, guess);
      const int n = splits(t, int64_t(std::max(per_sm, 1)) * p.sms);
      if ((n > 1) != (guess > 1)) per_sm = probe(t, n);
      if (per_sm > 0 && p.programs * n <= int64_t(per_sm) * p.sms) return {t, n};
    }
  }
  return {p.first, splits(p.first, two_per_sm)};
}

}  // namespace tilejit::attention::paged
