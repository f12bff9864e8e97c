// Learnable captures' gradients summed in fixed point (CaptureGrads::ScatterFixedPoint, tilejit/autodiff.h):
// each capture gets a zeroed i64 accumulator in the call's scratch, the dK/dV kernel adds into it, and one
// elementwise kernel per capture then adds the sums into the f32 gradient buffer.
#include "kernels/flex/fixed_point_grads.h"

#include <cmath>

#include <fmt/format.h>

#include "tilejit/autodiff.h"
#include "tilejit/capture.h"
#include "tilejit/error.h"
#include "tilejit/kernel.h"
#include "tilejit/ops.h"

namespace tilejit::attention::flex {
namespace {

constexpr int kBlock = 1024;

auto &add_fixed_point_kernel() {
  static auto kernel = Kernel(
      "capture_grad_add_fixed_point",
      [](Ptr<i64> acc, Ptr<f32> grad, I64 n, Constexpr<int> BLOCK) {
        auto offs = program_id(0).to(DType::i64) * BLOCK + arange(0, BLOCK);
        auto in = offs < n;
        // i64 → f32 rounds once (to nearest); the power-of-two scale is exact.
        auto sum = load(acc + offs, in, 0).to(DType::f32) * std::ldexp(1.f, -kCaptureGradFractionBits);
        store(grad + offs, load(grad + offs, in, 0.f) + sum, in);
      },
      {"acc", "grad", "n", "BLOCK"});
  return kernel;
}

}  // namespace

FixedPointGrads::FixedPointGrads(const std::vector<std::shared_ptr<detail::CaptureState>> &used, Backend backend,
                                 Stream *stream, const char *op) {
  size_t bytes = 0;
  for (const auto &c : used) {
    if (!c || !c->grad || !c->grad_fixed_point) continue;
    bool seen = false;
    for (const Accumulator &a : accs_) seen = seen || a.capture == c;
    if (seen) continue;
    if (c->grad->bytes == 0)
      throw TraceError(fmt::format(
          "{}: a learnable capture's gradient buffer at {:#x} was given as a DevicePtr without its size; its "
          "gradient is summed in fixed point in scratch of the buffer's size: give the size (DevicePtr::bytes), or "
          "set FlexOptions::atomics to add it with f32 atomics",
          op, c->grad->address));
    const int64_t n = int64_t(c->grad->bytes / 4);
    accs_.push_back({c, n, bytes});
    bytes += (size_t(n) * 8 + 255) / 256 * 256;
  }
  if (accs_.empty()) return;
  scratch_ = std::make_unique<runtime::StreamScratch>(bytes, backend, stream);
  scratch_->zero(scratch_->address(), bytes);
  for (Accumulator &a : accs_) {
    detail::CaptureState &acc = *a.capture->grad_fixed_point;
    acc.address = scratch_->address() + a.offset;
    acc.bytes = size_t(a.n) * 8;
    acc.on_gpu = resolve_backend(backend) == Backend::GPU ? 1 : 0;
  }
}

FixedPointGrads::~FixedPointGrads() {
  // The scratch goes with this object: leave no capture pointing at it.
  for (const Accumulator &a : accs_) {
    detail::CaptureState &acc = *a.capture->grad_fixed_point;
    acc.address = 0;
    acc.bytes = 0;
    acc.on_gpu = -1;
  }
}

void FixedPointGrads::add_into_grads(const LaunchConfig &cfg) const {
  for (const Accumulator &a : accs_) {
    const detail::CaptureState &grad = *a.capture->grad;
    LaunchConfig c = cfg;
    c.num_warps = 4;
    c.num_stages = 1;
    add_fixed_point_kernel().launch(Grid{uint32_t((a.n + kBlock - 1) / kBlock)}, c,
                                    DevicePtr{scratch_->address() + a.offset, size_t(a.n) * 8},
                                    DevicePtr{grad.address, grad.bytes}, a.n, kBlock);
  }
}

}  // namespace tilejit::attention::flex
