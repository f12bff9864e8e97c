// Scratch memory for one call's kernels, ordered on the call's stream: allocating and freeing it never waits
// for the device (a plain cuMemFree waits for all work in flight).
#pragma once
#include <cstddef>
#include <cstdint>

#include "tilejit/buffer.h"
#include "tilejit/types.h"

namespace tilejit::runtime {

/// `bytes` of device memory allocated with cuMemAllocAsync on `stream` (null: the default stream) and freed
/// with cuMemFreeAsync on it when destroyed (CUDA's stream-ordered allocator), so work queued on that stream
/// after the allocation may use it and the free runs after that work; host memory on the interpreter. Work on
/// other streams must not use it. Throws DriverError naming the call when the allocation fails.
class StreamScratch {
 public:
  StreamScratch(size_t bytes, Backend where, Stream *stream);
  ~StreamScratch();
  StreamScratch(const StreamScratch &) = delete;
  StreamScratch &operator=(const StreamScratch &) = delete;

  /// Zeroes the whole scratch, ordered on the stream (cuMemsetD8Async); a memset on the interpreter. Throws
  /// DriverError naming the call.
  void zero();

  uint64_t address() const { return addr_; }  // 0 when bytes is 0
  size_t bytes() const { return bytes_; }

 private:
  uint64_t addr_ = 0;
  size_t bytes_ = 0;
  void *stream_ = nullptr;  // CUstream
  Buffer host_;             // the interpreter's memory
};

}  // namespace tilejit::runtime
