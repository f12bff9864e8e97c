// Timing one of the CLI's calls: the first (tracing, compiling, running) and, on the GPU, the median of more.
#pragma once
#include <functional>

#include "tilejit/buffer.h"

namespace tilejit::tools {

struct CallTimes {
  double first_ms = 0;   // the first call, waited for
  double median_ms = 0;  // the median of `iters` more on the GPU; the first call's time on the interpreter
};
/// Runs `call` once, then (stream non-null: the GPU) max(1, iters) more times, each waited for on `stream`;
/// wall-clock milliseconds.
CallTimes time_calls(const std::function<void()> &call, Stream *stream, int iters);

}  // namespace tilejit::tools
