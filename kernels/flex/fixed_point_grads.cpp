// Learnable captures' gradients summed in fixed point (CaptureGrads::ScatterFixedPoint, tilejit/autodiff.h):
// each capture gets a zeroed accumulator (four i64 per gradient element) in the call's scratch, the dK/dV
// kernel adds into it, and one elementwise kernel per capture then adds the sums into the f32 gradient buffer.
#include "kernels/flex/fixed_point_grads.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "tilejit/autodiff.h"
#include "tilejit/capture.h"
#include "tilejit/error.h"
#include "tilejit/kernel.h"
#include "tilejit/ops.h"

namespace tilejit::attention::flex {
namespace {

constexpr int kBlock = 1024;

// grad[i] += the fixed-point sum at acc + 4i: high and low words in f64 (exact up to 2^53 units each), added to
// the old value in f64 and rounded to f32 once; then +inf where +inf terms were counted and −inf where −inf
// terms were, so that both (a NaN counts as both), or an old NaN, give NaN as a float sum would.
auto &add_fixed_point_kernel() {
  static auto kernel = Kernel(
      "capture_grad_add_fixed_point",
      [](Ptr<i64> acc, Ptr<f32> grad, I64 n, Constexpr<int> BLOCK) {
        const float inf = std::numeric_limits<float>::infinity();
        Tile offs = program_id(0).to(DType::i64) * BLOCK + arange(0, BLOCK);
        Tile in = offs < n;
        Tile at = acc + offs * kFixedPointSlots;
        Tile sum = load(at, in, 0).to(DType::f64) * std::ldexp(1.0, -kFixedPointHighBits) +
                   load(at + 1, in, 0).to(DType::f64) * std::ldexp(1.0, -kFixedPointLowBits);
        Tile value = (load(grad + offs, in, 0.f).to(DType::f64) + sum).to(DType::f32);
        value = value + where(load(at + 2, in, 0) > 0, inf, 0.f) + where(load(at + 3, in, 0) > 0, -inf, 0.f);
        store(grad + offs, value, in);
      },
      {"acc", "grad", "n", "BLOCK"});
  return kernel;
}

}  // namespace

FixedPointGrads::FixedPointGrads(const std::vector<std::shared_ptr<detail::CaptureState>> &learnable, Backend backend,
                                 Stream *stream, const char *op) {
  size_t bytes = 0;
  for (const auto &c : learnable) {
    // The gradient buffer's elements, or where its size is unknown the captured table's (its gradient lands
    // at the offsets the mod reads).
    const size_t known = c->grad->bytes ? c->grad->bytes : c->bytes;
    if (known == 0)
      throw TraceError(fmt::format(
          "{}: a learnable capture and its gradient buffer (at {:#x}) were both given as DevicePtrs without their "
          "sizes; its gradient is summed in fixed point in scratch of the buffer's size: give a size "
          "(DevicePtr::bytes), or set FlexOptions::atomics to add it with f32 atomics",
          op, c->grad->address));
    const int64_t n = int64_t(known / 4);
    accs_.push_back({c, n, bytes});
    bytes += (size_t(n) * kFixedPointSlots * 8 + 255) / 256 * 256;
  }
  if (accs_.empty()) return;
  scratch_ = std::make_unique<runtime::StreamScratch>(bytes, backend, stream);
  scratch_->zero();
  for (Accumulator &a : accs_) {
    detail::CaptureState &acc = *a.capture->grad_fixed_point;
    acc.address = scratch_->address() + a.offset;
    acc.bytes = size_t(a.n) * kFixedPointSlots * 8;
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
                                    DevicePtr{scratch_->address() + a.offset, size_t(a.n) * kFixedPointSlots * 8},
                                    DevicePtr{grad.address, size_t(a.n) * 4}, a.n, kBlock);
  }
}

}  // namespace tilejit::attention::flex
