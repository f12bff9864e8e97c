// Timing GPU work with CUDA events (for benchmarks).
#pragma once

namespace tilejit {

class Stream;

/// Measures the GPU time between start() and stop() on a stream (null: the default stream).
/// Usage: GpuTimer t; t.start(s); <launches on s>; t.stop(s); float ms = t.milliseconds();
/// Every method throws DriverError without a GPU.
class GpuTimer {
 public:
  GpuTimer();   // creates the two CUDA events
  ~GpuTimer();
  GpuTimer(const GpuTimer &) = delete;
  GpuTimer &operator=(const GpuTimer &) = delete;

  void start(Stream *stream = nullptr);  // records the start event on `stream`
  void stop(Stream *stream = nullptr);   // records the stop event on `stream`
  /// Waits for the stop event, then returns the elapsed time in milliseconds (resolution ~0.5 µs).
  float milliseconds();

 private:
  void *start_ = nullptr;  // CUevent
  void *stop_ = nullptr;   // CUevent
};

}  // namespace tilejit
