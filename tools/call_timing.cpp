#include "tools/call_timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace tilejit::tools {

CallTimes time_calls(const std::function<void()> &call, Stream *stream, int iters) {
  auto timed = [&] {
    auto t0 = std::chrono::steady_clock::now();
    call();
    if (stream) stream->synchronize();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  CallTimes t;
  t.first_ms = t.median_ms = timed();
  if (stream) {
    std::vector<double> times;
    for (int i = 0; i < std::max(1, iters); ++i) times.push_back(timed());
    std::sort(times.begin(), times.end());
    t.median_ms = times[times.size() / 2];
  }
  return t;
}

}  // namespace tilejit::tools
