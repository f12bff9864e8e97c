// Deterministic gradients of learnable captures (tilejit/capture.h) for flex_backward: 64-bit fixed-point
// accumulators in per-call scratch (CaptureGrads::ScatterFixedPoint, tilejit/autodiff.h). Not installed.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/stream_scratch.h"
#include "tilejit/kernel.h"

namespace tilejit::attention::flex {

/// For each of `learnable` (a kernel's captures made with a gradient buffer, KernelBase::captures: each once):
/// an accumulator of four i64 per f32 of its gradient buffer (of the captured buffer where the gradient
/// buffer's size is unknown), zeroed on `stream` and bound to the capture's grad_fixed_point, so that launches
/// traced with CaptureGrads::ScatterFixedPoint add into it. Throws TraceError naming `op` when both sizes are unknown
/// (DevicePtrs of 0 bytes).
class FixedPointGrads {
 public:
  FixedPointGrads(const std::vector<std::shared_ptr<detail::CaptureState>> &learnable, Backend backend,
                  Stream *stream, const char *op);
  ~FixedPointGrads();
  FixedPointGrads(const FixedPointGrads &) = delete;
  FixedPointGrads &operator=(const FixedPointGrads &) = delete;

  /// grad[i] += the accumulated sum of element i (f64, rounded once; NaN or ±inf where such terms were
  /// counted) for every accumulator, in one elementwise launch each (cfg's backend and stream; after the
  /// kernels that add into the accumulators).
  void add_into_grads(const LaunchConfig &cfg) const;

 private:
  struct Accumulator {
    std::shared_ptr<detail::CaptureState> capture;  // its grad and grad_fixed_point
    int64_t n;                                      // elements
    size_t offset;                                  // bytes into the scratch
  };
  std::vector<Accumulator> accs_;
  std::unique_ptr<runtime::StreamScratch> scratch_;
};

}  // namespace tilejit::attention::flex
