// Captured values: extra kernel parameters appended by the trace on first use (see tilejit/capture.h).
#include "tilejit/capture.h"

#include <fmt/format.h>

#include "dsl/trace_context.h"
#include "tilejit/error.h"

namespace tilejit {

using detail::CaptureState;

namespace dsl {

ir::Value *TraceContext::capture_param(const std::shared_ptr<CaptureState> &state) {
  for (const CapturedParam &c : captures)
    if (c.state == state) return c.value;
  ir::ParamInfo info;
  // Named by order of first use, not by identity, so equal bodies trace to equal IR (one compiled kernel).
  info.name = fmt::format("cap{}", captures.size());
  info.type.elem = {state->dtype, state->kind == CaptureState::Kind::Ptr};
  // No alignment / divisibility specialization: the value may change without a retrace.
  info.align16 = false;
  info.div16 = false;
  ir::Value *v = fn.body->add_arg(info.type);
  v->name = info.name;
  fn.params.push_back(std::move(info));
  captures.push_back({state, v});
  return v;
}

}  // namespace dsl

Tile Captured::tile(std::source_location loc) const {
  auto &ctx = dsl::TraceContext::require("capture", loc);
  if (!state_)
    throw TraceError(fmt::format("capture: an empty Captured (default-constructed) was used at {}:{}",
                                 loc.file_name(), loc.line()));
  return dsl::TileAccess::from_value(ctx.capture_param(state_));
}

namespace {
std::shared_ptr<CaptureState> make(CaptureState::Kind kind, DType dt) {
  auto s = std::make_shared<CaptureState>();
  s->kind = kind;
  s->dtype = dt;
  return s;
}
void require_kind(const CaptureState &s, bool ok, const char *what) {
  if (!ok) throw Error(fmt::format("Captured::set: {} given to a capture of another kind", what));
}
/// The state behind c, which a default-constructed Captured does not have.
CaptureState &state_of(const std::shared_ptr<CaptureState> &c, const char *what) {
  if (!c)
    throw Error(fmt::format("Captured::set: {} given to an empty Captured (default-constructed or moved from); "
                            "make one with capture(value) first",
                            what));
  return *c;
}
}  // namespace

void Captured::set(const Buffer &b) {
  set(DevicePtr{b.address(), b.bytes()});
  state_->on_gpu = b.on_gpu() ? 1 : 0;
}
void Captured::set(DevicePtr p) {
  state_of(state_, "a pointer");
  require_kind(*state_, state_->kind == CaptureState::Kind::Ptr, "a pointer");
  if (state_->grad && state_->grad->bytes != 0 && p.bytes > state_->grad->bytes)
    throw Error(fmt::format("Captured::set: the buffer holds {} bytes, more than the {} of its gradient buffer; "
                            "set_grad a larger one first",
                            p.bytes, state_->grad->bytes));
  state_->address = p.address;
  state_->bytes = p.bytes;
  state_->on_gpu = -1;
}
void Captured::set(double value) {
  state_of(state_, "a floating-point value");
  require_kind(*state_, state_->kind == CaptureState::Kind::F32, "a floating-point value");
  state_->f = value;
}
void Captured::set_int(int64_t value) {
  state_of(state_, "an integer");
  require_kind(*state_, state_->kind == CaptureState::Kind::I32 || state_->kind == CaptureState::Kind::I64,
               "an integer");
  state_->i = value;
}

Captured capture(const Buffer &b, DType elem) {
  Captured c(make(CaptureState::Kind::Ptr, elem));
  c.set(b);
  return c;
}
Captured capture(DevicePtr p, DType elem) {
  Captured c(make(CaptureState::Kind::Ptr, elem));
  c.set(p);
  return c;
}
Captured capture(const Buffer &b, DType elem, const Buffer &grad) {
  Captured c = capture(DevicePtr{b.address(), b.bytes()}, elem, DevicePtr{grad.address(), grad.bytes()});
  c.set(b);
  c.set_grad(grad);
  return c;
}
Captured capture(DevicePtr p, DType elem, DevicePtr grad) {
  if (elem != DType::f32)
    throw Error(fmt::format("capture: a capture with a gradient buffer holds f32 elements, got {}", dtype_name(elem)));
  Captured c = capture(p, elem);
  c.shared_state()->grad = make(CaptureState::Kind::Ptr, DType::f32);
  c.shared_state()->grad_fixed_point = make(CaptureState::Kind::Ptr, DType::i64);
  c.set_grad(grad);
  return c;
}
void Captured::set_grad(const Buffer &g) {
  set_grad(DevicePtr{g.address(), g.bytes()});
  state_->grad->on_gpu = g.on_gpu() ? 1 : 0;
}
void Captured::set_grad(DevicePtr g) {
  state_of(state_, "a gradient buffer");
  if (!state_->grad)
    throw Error("Captured::set_grad: this capture was made without a gradient buffer; make it with "
                "capture(buffer, DType::f32, grad)");
  if (g.bytes != 0 && state_->bytes != 0 && g.bytes < state_->bytes)
    throw Error(fmt::format("Captured::set_grad: the gradient buffer holds {} bytes, fewer than the {} of the "
                            "captured buffer it receives gradients for", g.bytes, state_->bytes));
  state_->grad->address = g.address;
  state_->grad->bytes = g.bytes;
  state_->grad->on_gpu = -1;
}

Captured capture(float value) { return capture(double(value)); }
Captured capture(double value) {
  Captured c(make(CaptureState::Kind::F32, DType::f32));
  c.set(value);
  return c;
}
Captured capture(int32_t value) {
  Captured c(make(CaptureState::Kind::I32, DType::i32));
  c.set_int(value);
  return c;
}
Captured capture(int64_t value) {
  Captured c(make(CaptureState::Kind::I64, DType::i64));
  c.set_int(value);
  return c;
}

}  // namespace tilejit
