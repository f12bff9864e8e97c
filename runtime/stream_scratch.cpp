// StreamScratch (runtime/stream_scratch.h): CUDA's stream-ordered allocator, or host memory.
#include "runtime/stream_scratch.h"

#include <cstring>

#include <fmt/format.h>

#include "runtime/driver.h"
#include "tilejit/launch.h"

namespace tilejit::runtime {

StreamScratch::StreamScratch(size_t bytes, Backend where, Stream *stream) : bytes_(bytes) {
  if (bytes == 0) return;
  if (resolve_backend(where) != Backend::GPU) {
    host_ = Buffer(bytes, Backend::Interpreter);
    addr_ = host_.address();
    return;
  }
  stream_ = stream ? stream->handle() : nullptr;
  cu::CUdeviceptr p = 0;
  check(driver().cuMemAllocAsync(&p, bytes, static_cast<cu::CUstream>(stream_)), "cuMemAllocAsync", {},
        fmt::format("allocating {} bytes of scratch", bytes));
  addr_ = p;
}

void StreamScratch::zero() {
  if (bytes_ == 0) return;
  if (host_.bytes()) {
    std::memset(reinterpret_cast<void *>(addr_), 0, bytes_);
    return;
  }
  check(driver().cuMemsetD8Async(addr_, 0, bytes_, static_cast<cu::CUstream>(stream_)), "cuMemsetD8Async", {},
        fmt::format("zeroing {} bytes of scratch", bytes_));
}

StreamScratch::~StreamScratch() {
  if (!addr_ || host_.bytes()) return;  // host memory: freed by host_
  try {
    driver().cuMemFreeAsync(addr_, static_cast<cu::CUstream>(stream_));  // errors ignored: destructors must not throw
  } catch (...) {
  }
}

}  // namespace tilejit::runtime
