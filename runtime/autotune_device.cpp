// Device-memory helpers for tunable launches, runtime/autotune_device.h.
#include "runtime/autotune_device.h"

#include <algorithm>

#include <fmt/format.h>

#include "runtime/driver.h"

namespace tilejit::autotune {

void copy_device(uint64_t dst, uint64_t src, size_t bytes, Stream *stream) {
  if (bytes == 0) return;
  auto &d = runtime::driver();
  auto s = stream ? static_cast<runtime::cu::CUstream>(stream->handle()) : nullptr;
  runtime::check(d.cuMemcpyDtoDAsync(dst, src, bytes, s), "cuMemcpyDtoDAsync", {},
                 fmt::format("copying {} bytes from {:#x} to {:#x}", bytes, src, dst));
}

void DeviceSnapshot::take(const std::vector<Range> &ranges, Stream *stream) {
  ranges_ = ranges;
  copies_.clear();
  for (const Range &r : ranges_) {
    copies_.emplace_back(r.bytes, Backend::GPU);
    copy_device(copies_.back().address(), r.address, r.bytes, stream);
  }
}

void DeviceSnapshot::restore(Stream *stream) {
  for (size_t i = 0; i < ranges_.size(); ++i) copy_device(ranges_[i].address, copies_[i].address(), ranges_[i].bytes, stream);
  // The scratch must outlive the copies: wait before it can be freed.
  if (stream) stream->synchronize();
  else runtime::check(runtime::driver().cuCtxSynchronize(), "cuCtxSynchronize");
}

int rotation_count(size_t input_bytes, size_t free_budget_bytes) {
  constexpr size_t kTarget = size_t(256) << 20;  // ≥ 4× a 50-60 MB L2
  if (input_bytes == 0 || input_bytes >= kTarget / 4) return 1;
  size_t want = (kTarget + input_bytes - 1) / input_bytes;
  size_t afford = 1 + free_budget_bytes / input_bytes;
  return int(std::clamp<size_t>(std::min(want, afford), 1, 8));
}

}  // namespace tilejit::autotune
