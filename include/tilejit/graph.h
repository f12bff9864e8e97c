// CUDA graphs through the driver API: capture the launches a function issues on a stream once, replay them
// for the cost of one launch (CUDA Programming Guide, "CUDA Graphs" / stream capture).
//
//   Stream s;
//   plan.run(q, out, lse, cache, &s);                  // warm up: everything compiled and loaded
//   CudaGraph step(s, [&] { plan.run(q, out, lse, cache, &s); });
//   for (...) { /* write new lengths, block table, q at the same addresses */ step.replay(s); }
//
// Capture runs in CU_STREAM_CAPTURE_MODE_GLOBAL: a call inside `record` that is unsafe during capture — a
// host synchronization, a synchronous copy, a device allocation or free, a module load — fails with
// DriverError naming the driver call, so a successful capture also shows that `record` only launches.
//
// On sm_90 and newer the captured launches keep their programmatic dependencies (see LaunchConfig::stream):
// a replay overlaps each kernel's start with its predecessor's end as a direct launch does, or not, as
// TILEJIT_DISABLE_OVERLAP was at capture.
#pragma once
#include <functional>

#include "tilejit/buffer.h"

namespace tilejit {

class CudaGraph {
 public:
  /// Captures every launch `record` issues on `stream` (which must be a created Stream, not the default
  /// stream) and instantiates the graph. Throws DriverError without a GPU or when the capture fails (the
  /// stream is left out of capture mode either way); rethrows what `record` throws after ending the capture.
  CudaGraph(Stream &stream, const std::function<void()> &record);
  ~CudaGraph();
  CudaGraph(const CudaGraph &) = delete;
  CudaGraph &operator=(const CudaGraph &) = delete;

  /// Launches the captured work on `stream` (asynchronous; cuGraphLaunch), which may be another stream than
  /// the captured one. Throws DriverError naming the driver's error when the launch fails.
  void replay(Stream &stream) const;
  /// Kernel launches captured.
  int num_kernels() const;

 private:
  void *graph_ = nullptr;  // CUgraph
  void *exec_ = nullptr;   // CUgraphExec
  int num_kernels_ = 0;
};

}  // namespace tilejit
