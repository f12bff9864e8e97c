// Buffer (device memory or 256-byte aligned host memory) and Stream, include/tilejit/buffer.h.
#include "tilejit/buffer.h"

#include <limits>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "runtime/driver.h"
#include "runtime/runtime.h"
#include "tilejit/error.h"

namespace tilejit {
namespace {

constexpr size_t kHostAlignment = 256;
constexpr int kCaptureUnsupported = 900;  // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED

void check_range(const char *what, size_t offset, size_t bytes, size_t capacity) {
  if (offset > capacity || bytes > capacity - offset) {
    throw Error(fmt::format("Buffer::{}: range [{}, {}) exceeds the buffer's {} bytes", what, offset,
                            offset + bytes, capacity));
  }
}

// Synchronous device operations cannot be part of a graph: while this thread captures one, the driver refuses
// some of them on its own and, on a non-blocking stream, might run others at once, outside the graph. Refusing
// them all here makes CudaGraph's promise hold for every one.
void refuse_during_capture(const char *what, const char *call) {
  if (void *s = runtime::capturing_stream())
    throw DriverError(fmt::format("Buffer::{} ({}) cannot run while this thread captures a CudaGraph on stream {}: a "
                                  "synchronous operation is not captured; do it before the capture or between "
                                  "replays", what, call, fmt::ptr(s)),
                      kCaptureUnsupported);
}

// A copy from pageable memory returns once the data is staged, and a memset of device memory once it is queued,
// both on the legacy default stream, which work on a non-blocking Stream does not wait for. Waiting for that
// stream here makes upload() and fill_bytes() complete, so that a launch or graph replay on any stream that
// follows them reads the new bytes.
void wait_for_legacy_stream(runtime::Driver &d, const char *what) {
  runtime::check(d.cuStreamSynchronize(nullptr), "cuStreamSynchronize", {},
                 fmt::format("waiting for Buffer::{} to complete", what));
}

}  // namespace

// ---- Stream ----

Stream::Stream() {
  auto &d = runtime::driver();
  runtime::cu::CUstream s = nullptr;
  runtime::check(d.cuStreamCreate(&s, runtime::cu::CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  handle_ = s;
}

Stream::~Stream() {
  // Destructors must not throw; a failing destroy (e.g. during process teardown) is ignored.
  if (!handle_ || !owned_) return;
  try {
    runtime::driver().cuStreamDestroy(static_cast<runtime::cu::CUstream>(handle_));
  } catch (...) {
  }
}

void Stream::synchronize() {
  auto &d = runtime::driver();
  runtime::check(d.cuStreamSynchronize(static_cast<runtime::cu::CUstream>(handle_)), "cuStreamSynchronize");
}

// ---- Buffer ----

Buffer::Buffer(size_t bytes, Backend where) : bytes_(bytes) {
  on_gpu_ = resolve_backend(where) == Backend::GPU;
  if (bytes == 0) return;  // an empty buffer owns nothing (address 0)
  if (on_gpu_) {
    refuse_during_capture("Buffer", "cuMemAlloc");
    auto &d = runtime::driver();
    runtime::cu::CUdeviceptr p = 0;
    runtime::check(d.cuMemAlloc(&p, bytes), "cuMemAlloc", {}, fmt::format("allocating {} bytes", bytes));
    addr_ = p;
  } else {
    // Rounding up to the alignment must not wrap around (a negative count cast to size_t lands here).
    if (bytes > std::numeric_limits<size_t>::max() - kHostAlignment)
      throw Error(fmt::format("Buffer: could not allocate {} bytes of host memory (size too large)", bytes));
    size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    void *p = std::aligned_alloc(kHostAlignment, rounded);
    if (!p) throw Error(fmt::format("Buffer: could not allocate {} bytes of host memory", bytes));
    addr_ = reinterpret_cast<uint64_t>(p);
  }
}

Buffer::~Buffer() {
  if (!addr_) return;
  if (on_gpu_) {
    try {
      runtime::driver().cuMemFree(addr_);  // errors ignored: destructors must not throw
    } catch (...) {
    }
  } else {
    std::free(reinterpret_cast<void *>(addr_));
  }
}

Buffer::Buffer(Buffer &&o) noexcept
    : addr_(std::exchange(o.addr_, 0)), bytes_(std::exchange(o.bytes_, 0)), on_gpu_(o.on_gpu_) {}

Buffer &Buffer::operator=(Buffer &&o) noexcept {
  if (this != &o) {
    Buffer old(std::move(*this));  // frees our memory when it goes out of scope
    addr_ = std::exchange(o.addr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
    on_gpu_ = o.on_gpu_;
  }
  return *this;
}

void Buffer::upload(const void *src, size_t bytes, size_t offset) {
  check_range("upload", offset, bytes, bytes_);
  if (bytes == 0) return;
  if (on_gpu_) {
    refuse_during_capture("upload", "cuMemcpyHtoD");
    auto &d = runtime::driver();
    runtime::check(d.cuMemcpyHtoD(addr_ + offset, src, bytes), "cuMemcpyHtoD", {},
                   fmt::format("copying {} bytes to device address {:#x}", bytes, addr_ + offset));
    wait_for_legacy_stream(d, "upload");
  } else {
    std::memcpy(reinterpret_cast<char *>(addr_) + offset, src, bytes);
  }
}

void Buffer::download(void *dst, size_t bytes, size_t offset) const {
  check_range("download", offset, bytes, bytes_);
  if (bytes == 0) return;
  if (on_gpu_) {
    refuse_during_capture("download", "cuMemcpyDtoH");
    auto &d = runtime::driver();
    runtime::check(d.cuMemcpyDtoH(dst, addr_ + offset, bytes), "cuMemcpyDtoH", {},
                   fmt::format("copying {} bytes from device address {:#x}", bytes, addr_ + offset));
  } else {
    std::memcpy(dst, reinterpret_cast<const char *>(addr_) + offset, bytes);
  }
}

void Buffer::fill_bytes(uint8_t value) {
  if (bytes_ == 0) return;
  if (on_gpu_) {
    refuse_during_capture("fill_bytes", "cuMemsetD8");
    auto &d = runtime::driver();
    runtime::check(d.cuMemsetD8(addr_, value, bytes_), "cuMemsetD8");
    wait_for_legacy_stream(d, "fill_bytes");
  } else {
    std::memset(reinterpret_cast<void *>(addr_), value, bytes_);
  }
}

}  // namespace tilejit
