// Captured kernel arguments: host values (device buffers, runtime scalars) that a kernel body — or a
// function the body calls, such as an attention score_mod — uses without declaring them as parameters.
//
//   auto slopes = capture(slopes_buffer, DType::f32);   // a pointer to f32 elements
//   auto cap = capture(50.f);                           // an f32 scalar
//   auto body = [=](Ptr<f32> X, ...) { ... load(slopes() + h) ... x / cap() ... };
//
// Using a Captured inside a trace (`c()`, `c.tile()` or the implicit conversion to Tile) appends one extra
// parameter to the kernel being traced — named "cap0", "cap1", ... in order of first use, so two bodies
// that use different captures the same way trace to the same IR — and records the capture with the traced
// function. Every launch of that function passes the capture's *current* value (read at launch time) as
// the extra argument. The value is therefore not part of the specialization key: `c.set(...)` or a new
// buffer never retraces or recompiles. Captured pointers are not assumed 16-byte aligned (no alignment
// specialization) and captured integers are not assumed divisible by 16.
//
// Copies of a Captured share one value (set() on any copy is seen by all). Captures are not thread-safe:
// don't set() one while another thread launches a kernel that uses it. Errors: a capture used outside a
// kernel trace throws TraceError; a capture whose buffer lives on the other backend than the launch (GPU
// buffer, interpreter launch or vice versa) throws TraceError at launch.
#pragma once
#include <cstdint>
#include <memory>
#include <source_location>

#include "tilejit/buffer.h"
#include "tilejit/tile.h"
#include "tilejit/types.h"

namespace tilejit {

namespace detail {
/// The shared, mutable value behind a Captured.
struct CaptureState {
  enum class Kind : uint8_t { Ptr, I32, I64, F32 } kind = Kind::F32;
  DType dtype = DType::f32;  // pointee dtype for Ptr; i32/i64/f32 for scalars
  uint64_t address = 0;
  size_t bytes = 0;          // allocation size behind the pointer (0: unknown; bounds the interpreter)
  int8_t on_gpu = -1;        // 1: GPU buffer, 0: host buffer, -1: unknown (DevicePtr)
  int64_t i = 0;
  double f = 0;
  /// Ptr captures made with a gradient buffer (capture(b, elem, grad)): an f32 Ptr capture that the
  /// backward of a mod reading this buffer adds its gradient into. Fixed when the capture is made, so that
  /// every trace of a mod sees the same kind of capture.
  std::shared_ptr<CaptureState> grad;
  /// With grad: a Ptr capture to i64 elements, four per gradient element, that a backward summing in fixed
  /// point (CaptureGrads::ScatterFixedPoint, tilejit/autodiff.h) adds into instead of grad; the code that
  /// launches such a kernel points it at zeroed scratch memory per call and adds the sums into grad after
  /// (so, as set(), not while another thread launches a kernel that uses this capture).
  std::shared_ptr<CaptureState> grad_fixed_point;
};
}  // namespace detail

class Captured {
 public:
  Captured() = default;
  explicit Captured(std::shared_ptr<detail::CaptureState> s) : state_(std::move(s)) {}

  /// The kernel parameter this capture stands for in the trace in progress: a pointer tile (ptr<dtype>)
  /// or a scalar (i32, i64, f32). Throws TraceError outside a kernel trace or for an empty Captured.
  Tile tile(std::source_location loc = std::source_location::current()) const;
  Tile operator()(std::source_location loc = std::source_location::current()) const { return tile(loc); }
  operator Tile() const { return tile(); }

  /// Replace the value seen by later launches (the kind must stay the same: pointer or scalar type). Throws
  /// Error for another kind, for an empty Captured (default-constructed: make one with capture()), and for a
  /// buffer larger than the capture's gradient buffer (where both sizes are known: set_grad a larger one
  /// first).
  void set(const Buffer &b);
  void set(DevicePtr p);
  void set(double value);     // F32 captures (rounded to f32 at launch)
  void set_int(int64_t value);  // I32 / I64 captures (I32 range-checked at launch)
  /// Rebinds the gradient buffer of a capture made with one (capture(b, elem, grad)); throws Error for a
  /// capture made without one.
  void set_grad(const Buffer &grad);
  void set_grad(DevicePtr grad);
  /// Whether gradients flow into a buffer (see capture(b, elem, grad)).
  bool has_grad() const { return state_ && state_->grad != nullptr; }

  const detail::CaptureState &state() const { return *state_; }
  const std::shared_ptr<detail::CaptureState> &shared_state() const { return state_; }

 private:
  std::shared_ptr<detail::CaptureState> state_;
};

/// A pointer parameter to `elem` elements, bound to `b`'s address at each launch.
Captured capture(const Buffer &b, DType elem);
/// A pointer parameter to `elem` elements at `p` (memory the caller owns; p.bytes bounds the interpreter).
Captured capture(DevicePtr p, DType elem);
/// A pointer parameter to f32 elements of `b` that is learnable: where a score_mod loads from it,
/// attention::flex_backward adds d(loss)/d(element) into `grad` (f32, as many elements as b; accumulated as
/// PyTorch's .grad is: zero it before the first backward). By default the sums are bitwise reproducible
/// from run to run (64-bit fixed point, see FlexOptions::atomics); with FlexOptions::atomics they use f32
/// atomics. Throws Error unless elem is f32.
Captured capture(const Buffer &b, DType elem, const Buffer &grad);
Captured capture(DevicePtr p, DType elem, DevicePtr grad);
/// An f32 scalar parameter.
Captured capture(float value);
Captured capture(double value);
/// An i32 / i64 scalar parameter.
Captured capture(int32_t value);
Captured capture(int64_t value);

}  // namespace tilejit
