// GpuTimer over CUDA events, include/tilejit/timer.h.
#include "tilejit/timer.h"

#include "runtime/driver.h"
#include "tilejit/buffer.h"

namespace tilejit {
namespace {
using runtime::cu::CUevent;
using runtime::cu::CUstream;
CUstream stream_of(Stream *s) { return s ? static_cast<CUstream>(s->handle()) : nullptr; }
}  // namespace

GpuTimer::GpuTimer() {
  auto &d = runtime::driver();
  CUevent a = nullptr, b = nullptr;
  runtime::check(d.cuEventCreate(&a, runtime::cu::CU_EVENT_DEFAULT), "cuEventCreate");
  if (auto r = d.cuEventCreate(&b, runtime::cu::CU_EVENT_DEFAULT); r != runtime::cu::CUDA_SUCCESS) {
    d.cuEventDestroy(a);
    runtime::check(r, "cuEventCreate");
  }
  start_ = a;
  stop_ = b;
}

GpuTimer::~GpuTimer() {
  try {  // destructors must not throw; failures are ignored
    auto &d = runtime::driver();
    d.cuEventDestroy(static_cast<CUevent>(start_));
    d.cuEventDestroy(static_cast<CUevent>(stop_));
  } catch (...) {
  }
}

void GpuTimer::start(Stream *stream) {
  runtime::check(runtime::driver().cuEventRecord(static_cast<CUevent>(start_), stream_of(stream)),
                 "cuEventRecord", {}, "GpuTimer::start");
}

void GpuTimer::stop(Stream *stream) {
  runtime::check(runtime::driver().cuEventRecord(static_cast<CUevent>(stop_), stream_of(stream)),
                 "cuEventRecord", {}, "GpuTimer::stop");
}

float GpuTimer::milliseconds() {
  auto &d = runtime::driver();
  runtime::check(d.cuEventSynchronize(static_cast<CUevent>(stop_)), "cuEventSynchronize", {}, "GpuTimer");
  float ms = 0;
  runtime::check(d.cuEventElapsedTime(&ms, static_cast<CUevent>(start_), static_cast<CUevent>(stop_)),
                 "cuEventElapsedTime", {}, "GpuTimer (was start() called before stop()?)");
  return ms;
}

}  // namespace tilejit
