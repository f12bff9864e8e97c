// Memory that kernels read and write: device memory (GPU) or host memory (CPU interpreter).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tilejit/launch.h"

namespace tilejit {

/// A stream of the current device (RAII over CUstream).
class Stream {
 public:
  Stream();                     // creates a non-blocking stream; throws DriverError without a GPU
  /// Wraps a stream the caller owns (a CUstream from another library, e.g. PyTorch; null: the default
  /// stream) without taking ownership: the destructor leaves it alone.
  struct Borrow {};
  Stream(Borrow, void *handle) : handle_(handle), owned_(false) {}
  ~Stream();
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  void synchronize();
  void *handle() const { return handle_; }  // CUstream
 private:
  void *handle_ = nullptr;
  bool owned_ = true;
};

/// An owning, untyped allocation of `bytes` bytes, on the GPU (cuMemAlloc) or in host memory for the
/// interpreter (256-byte aligned). Move-only. GPU errors throw DriverError naming the driver call.
class Buffer {
 public:
  Buffer() = default;
  /// Allocates on `where` (Backend::Auto resolves as in resolve_backend()).
  Buffer(size_t bytes, Backend where);
  ~Buffer();
  Buffer(Buffer &&o) noexcept;
  Buffer &operator=(Buffer &&o) noexcept;
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;

  uint64_t address() const { return addr_; }   // device address, or host address in the interpreter
  size_t bytes() const { return bytes_; }
  bool on_gpu() const { return on_gpu_; }
  /// Copies host data in/out (synchronous). upload returns once the device memory holds the data, so work
  /// launched afterwards on any stream (a created Stream, a CudaGraph replay) reads it. download waits for work
  /// on the default stream but not for work queued on a created Stream: synchronize that Stream first.
  /// Throws Error when the range exceeds the buffer, DriverError naming the driver call when a copy fails or
  /// when the calling thread is capturing a CudaGraph (a synchronous copy cannot be captured; fill_bytes and
  /// allocating a GPU Buffer likewise).
  void upload(const void *src, size_t bytes, size_t offset = 0);
  void download(void *dst, size_t bytes, size_t offset = 0) const;
  /// Fills every byte with `value` (used to poison outputs in tests); returns once the memory is filled, like
  /// upload.
  void fill_bytes(uint8_t value);

  template <class T> void upload(std::span<const T> v) { upload(v.data(), v.size_bytes()); }
  template <class T> void upload(const std::vector<T> &v) { upload(v.data(), v.size() * sizeof(T)); }
  template <class T> std::vector<T> download_as(size_t count) const {
    std::vector<T> out(count);
    download(out.data(), count * sizeof(T));
    return out;
  }

 private:
  uint64_t addr_ = 0;
  size_t bytes_ = 0;
  bool on_gpu_ = false;
};

/// A raw pointer argument: device memory the caller owns (e.g. from PyTorch), or host memory for the
/// interpreter. `bytes` bounds the interpreter's out-of-bounds check (0 = unchecked).
struct DevicePtr {
  uint64_t address = 0;
  size_t bytes = 0;
};

}  // namespace tilejit
