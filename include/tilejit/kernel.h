// Kernel definition and launch.
//
//   auto add = Kernel("add", [](Ptr<f32> x, Ptr<f32> y, Ptr<f32> out, I32 n, Constexpr<int> BLOCK) {...},
//                     {"x", "y", "out", "n", "BLOCK"});          // parameter names: optional
//   add.launch(Grid{cdiv(n, 1024)}, LaunchConfig{.num_warps = 4}, dx, dy, dout, n, 1024);
//
// Parameter types: Ptr<T> (binds a Buffer, a DevicePtr, or a raw T* host pointer for the interpreter),
// I32 / I64 (integral values; I32 range-checked), F32 (arithmetic values), Constexpr<T> (a T; compile-time).
// Each launch is specialized as in Triton: per constexpr, its value; per pointer the body uses, whether its
// address is 16-byte aligned; per integer the body uses, whether it is divisible by 16 (a parameter the traced
// body never uses, after optimization, enters no key). KernelOptions::do_not_specialize opts a parameter out
// (Triton's do_not_specialize). The traced IR is cached per specialization.
// Binding errors (wrong count or kind, out-of-range I32) throw TraceError naming the kernel, the parameter
// index and its name.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tilejit/buffer.h"
#include "tilejit/launch.h"
#include "tilejit/tile.h"
#include "tilejit/types.h"

namespace tilejit {

namespace ir { struct Function; }

/// The PTX of one kernel specialization for one LaunchConfig (Kernel::ptx).
struct KernelPtx {
  std::string ptx;        // PTX text (.version 8.5) for LaunchConfig::arch
  std::string entry;      // the .entry name (the kernel's name, sanitized)
  int shared_bytes = 0;   // dynamic shared memory a launch must provide, in bytes (may exceed 48 KB)
  int num_threads = 0;    // threads per program: 32 · num_warps
};

namespace detail {

struct CaptureState;  // tilejit/capture.h

/// What kind of kernel parameter a lambda parameter is.
enum class ParamKind : uint8_t { Ptr, I32, I64, F32, ConstInt, ConstInt64, ConstFloat, ConstDouble, ConstBool };
struct ParamDecl {
  ParamKind kind;
  DType dtype;            // pointee dtype for Ptr; i32/i64/f32 for runtime scalars; unused for constexprs
  bool specialize = true; // false: the value's alignment/divisibility never enters the specialization key
};

/// One launch argument before binding, whatever C++ type it came from.
struct ArgValue {
  enum class Kind : uint8_t { Pointer, Integer, Float, Bool } kind = Kind::Integer;
  uint64_t address = 0;
  size_t bytes = 0;        // allocation size behind a pointer (0: unknown)
  int8_t on_gpu = -1;      // Buffer: 1 on the GPU, 0 in host memory; -1 unknown (DevicePtr, raw pointer)
  int pointee = -1;        // raw pointers: the DType matching the C++ pointee (-1: unknown, e.g. void*)
  bool too_large = false;  // unsigned value above INT64_MAX
  int64_t i = 0;
  double f = 0;
};

template <class T> constexpr int host_dtype() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) return int(DType::f32);
  else if constexpr (std::is_same_v<U, double>) return int(DType::f64);
  else if constexpr (std::is_same_v<U, bool>) return int(DType::i1);
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U> && sizeof(U) == 1) return int(DType::i8);
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U> && sizeof(U) == 2) return int(DType::i16);
  else if constexpr (std::is_integral_v<U> && sizeof(U) == 4) return int(DType::i32);
  else if constexpr (std::is_integral_v<U> && sizeof(U) == 8) return int(DType::i64);
  else return -1;  // void, uint16_t (f16/bf16 storage), user types: not checked
}

template <class A> ArgValue to_arg_value(const A &a) {
  using D = std::remove_cvref_t<A>;
  ArgValue v;
  if constexpr (std::is_same_v<D, Buffer>) {
    v.kind = ArgValue::Kind::Pointer;
    v.address = a.address();
    v.bytes = a.bytes();
    v.on_gpu = a.on_gpu() ? 1 : 0;
  } else if constexpr (std::is_same_v<D, DevicePtr>) {
    v.kind = ArgValue::Kind::Pointer;
    v.address = a.address;
    v.bytes = a.bytes;
  } else if constexpr (std::is_pointer_v<D>) {
    v.kind = ArgValue::Kind::Pointer;
    v.address = uint64_t(reinterpret_cast<uintptr_t>(a));
    v.pointee = host_dtype<std::remove_pointer_t<D>>();
  } else if constexpr (std::is_same_v<D, std::nullptr_t>) {
    v.kind = ArgValue::Kind::Pointer;
  } else if constexpr (std::is_same_v<D, bool>) {
    v.kind = ArgValue::Kind::Bool;
    v.i = a ? 1 : 0;
  } else if constexpr (std::is_integral_v<D>) {
    v.kind = ArgValue::Kind::Integer;
    if constexpr (std::is_unsigned_v<D>) v.too_large = uint64_t(a) > uint64_t(INT64_MAX);
    v.i = int64_t(a);
  } else if constexpr (std::is_floating_point_v<D>) {
    v.kind = ArgValue::Kind::Float;
    v.f = double(a);
  } else {
    static_assert(sizeof(D) == 0,
                  "kernel argument: pass a Buffer, DevicePtr, raw pointer, integer, floating-point or bool");
  }
  return v;
}

/// A handle bound to the index-th kernel parameter of the trace in progress (implemented in dsl/); for a
/// constexpr parameter, its value as a weak literal (Tile(v): it takes the type of what it meets).
Tile param_tile(int index);

template <class P> struct ParamTraits {
  static_assert(sizeof(P) == 0,
                "kernel parameters must be Ptr<T>, I32, I64, F32 or Constexpr<int|int64_t|float|double|bool>");
};
template <class T> struct ParamTraits<Ptr<T>> {
  static ParamDecl decl() { return {ParamKind::Ptr, T::dtype}; }
  static Ptr<T> make(int i, const ArgValue &) { return Ptr<T>(param_tile(i)); }
};
template <> struct ParamTraits<I32> {
  static ParamDecl decl() { return {ParamKind::I32, DType::i32}; }
  static I32 make(int i, const ArgValue &) { return I32(param_tile(i)); }
};
template <> struct ParamTraits<I64> {
  static ParamDecl decl() { return {ParamKind::I64, DType::i64}; }
  static I64 make(int i, const ArgValue &) { return I64(param_tile(i)); }
};
template <> struct ParamTraits<F32> {
  static ParamDecl decl() { return {ParamKind::F32, DType::f32}; }
  static F32 make(int i, const ArgValue &) { return F32(param_tile(i)); }
};
template <class T> struct ParamTraits<Constexpr<T>> {
  static ParamDecl decl() {
    if constexpr (std::is_same_v<T, bool>) return {ParamKind::ConstBool, DType::i1};
    else if constexpr (std::is_same_v<T, int>) return {ParamKind::ConstInt, DType::i32};
    else if constexpr (std::is_same_v<T, int64_t>) return {ParamKind::ConstInt64, DType::i64};
    else if constexpr (std::is_same_v<T, float>) return {ParamKind::ConstFloat, DType::f32};
    else return {ParamKind::ConstDouble, DType::f64};
  }
  // The core has already converted the argument to the parameter's kind (ints in i, floats in f).
  static Constexpr<T> make(int, const ArgValue &a) {
    if constexpr (std::is_floating_point_v<T>) return Constexpr<T>{T(a.f)};
    else return Constexpr<T>{T(a.i)};
  }
};

/// The parameter list of a lambda (through &Fn::operator()).
template <class M> struct MemberSignature;
template <class C, class R, class... A> struct MemberSignature<R (C::*)(A...) const> {
  using params = std::tuple<std::remove_cvref_t<A>...>;
};
template <class C, class R, class... A> struct MemberSignature<R (C::*)(A...)> {
  using params = std::tuple<std::remove_cvref_t<A>...>;
};
template <class Fn> struct LambdaParams {
  static_assert(requires { &Fn::operator(); },
                "Kernel: the body must be a lambda with explicit parameter types (no auto parameters)");
  using type = typename MemberSignature<decltype(&Fn::operator())>::params;
};

}  // namespace detail

/// Options of a Kernel beyond its body.
struct KernelOptions {
  /// Parameters (by name; I32, I64 or Ptr) whose values never enter the specialization key, as Triton's
  /// do_not_specialize: an integer's divisibility by 16 and a pointer's 16-byte alignment are then never
  /// assumed, so e.g. a length that changes every call compiles one kernel instead of two. The Kernel
  /// constructor throws Error naming the kernel when a name is not a parameter or is a constexpr.
  std::vector<std::string> do_not_specialize;
  /// Keep every float result's bits as the body computes them: no rewrite that changes rounding (a division
  /// by a constant or broadcast value as a multiplication by its reciprocal, products of scalar factors
  /// reassociated; see ir/passes.h). Off by default, as CUDA's and Triton's default fast division is.
  bool exact_floats = false;
};

/// The type-erased core of a Kernel (implemented in runtime/kernel.cpp): parameter declarations, the trace
/// function, the per-specialization cache of traced IR, and backend dispatch.
class KernelBase {
 public:
  /// Calls the user's lambda with handles for the bound arguments (one ArgValue per parameter).
  using TraceFn = std::function<void(std::span<const detail::ArgValue>)>;
  KernelBase(std::string name, std::vector<detail::ParamDecl> params, std::vector<std::string> names,
             TraceFn trace, const KernelOptions &options = {});
  ~KernelBase();
  KernelBase(const KernelBase &) = delete;
  KernelBase &operator=(const KernelBase &) = delete;

  void launch(Grid grid, const LaunchConfig &cfg, std::span<const detail::ArgValue> args);
  /// Everything launch() does before launching: binds, traces (or finds the cached trace) and, on the GPU,
  /// compiles and loads the module, so that a later launch with arguments of the same specialization only
  /// launches (no compilation, no module load: safe inside CUDA graph capture). Throws as launch() does.
  void prepare(const LaunchConfig &cfg, std::span<const detail::ArgValue> args);
  /// Whether a launch with these arguments and cfg would only launch: its specialization is traced and, on
  /// the GPU, loaded (so prepare() would do nothing). Never traces or compiles; throws as binding does, and
  /// DriverError when cfg names no arch and the device cannot be asked for one.
  bool prepared(const LaunchConfig &cfg, std::span<const detail::ArgValue> args);
  const ir::Function &function(std::span<const detail::ArgValue> args);
  /// The captured values (tilejit/capture.h) that the traced function for args uses, in the order of their
  /// parameters; traces it first when needed. Throws as function() does.
  std::vector<std::shared_ptr<detail::CaptureState>> captures(std::span<const detail::ArgValue> args);
  std::string ir(std::span<const detail::ArgValue> args);
  KernelPtx ptx(const LaunchConfig &cfg, std::span<const detail::ArgValue> args);

  const std::string &name() const;
  const std::string &param_name(int i) const;
  int num_params() const;
  /// Number of specializations traced so far (cached functions).
  size_t num_specializations() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

template <class Fn>
class Kernel {
  using Params = typename detail::LambdaParams<Fn>::type;
  static constexpr size_t N = std::tuple_size_v<Params>;

 public:
  /// `param_names` (optional) name the parameters in IR and error messages; default "arg0", "arg1", ...
  /// `options.do_not_specialize` names parameters to leave out of the specialization key (see KernelOptions).
  Kernel(std::string name, Fn fn, std::vector<std::string> param_names = {}, const KernelOptions &options = {})
      : core_(std::make_shared<KernelBase>(std::move(name), decls(std::make_index_sequence<N>{}),
                                           std::move(param_names), make_trace(std::move(fn)), options)) {}

  /// Traces (or reuses the cached trace for) the arguments' specialization and runs it on cfg.backend.
  /// A grid of size 0 does nothing.
  template <class... A>
  void launch(Grid grid, const LaunchConfig &cfg, const A &...args) const {
    detail::ArgValue v[] = {detail::ArgValue{}, detail::to_arg_value(args)...};
    core_->launch(grid, cfg, std::span<const detail::ArgValue>(v + 1, sizeof...(A)));
  }
  /// The optimized IR for these arguments' specialization, without launching (DevicePtr{} is a fine
  /// placeholder pointer). The reference stays valid as long as the Kernel.
  template <class... A>
  const ir::Function &function(const A &...args) const {
    detail::ArgValue v[] = {detail::ArgValue{}, detail::to_arg_value(args)...};
    return core_->function(std::span<const detail::ArgValue>(v + 1, sizeof...(A)));
  }
  /// ir::print of function(args...).
  template <class... A>
  std::string ir(const A &...args) const {
    detail::ArgValue v[] = {detail::ArgValue{}, detail::to_arg_value(args)...};
    return core_->ir(std::span<const detail::ArgValue>(v + 1, sizeof...(A)));
  }
  /// PTX for cfg.arch (must be set; no GPU needed). Throws Error when cfg.arch is empty, CompileError when
  /// the kernel cannot be lowered (naming the op and its source line).
  template <class... A>
  KernelPtx ptx(const LaunchConfig &cfg, const A &...args) const {
    detail::ArgValue v[] = {detail::ArgValue{}, detail::to_arg_value(args)...};
    return core_->ptx(cfg, std::span<const detail::ArgValue>(v + 1, sizeof...(A)));
  }

  KernelBase &core() const { return *core_; }
  const std::string &name() const { return core_->name(); }
  size_t num_specializations() const { return core_->num_specializations(); }

 private:
  template <size_t... I>
  static std::vector<detail::ParamDecl> decls(std::index_sequence<I...>) {
    return {detail::ParamTraits<std::tuple_element_t<I, Params>>::decl()...};
  }
  template <size_t... I>
  static void call(const Fn &fn, std::span<const detail::ArgValue> a, std::index_sequence<I...>) {
    fn(detail::ParamTraits<std::tuple_element_t<I, Params>>::make(int(I), a[I])...);
  }
  static KernelBase::TraceFn make_trace(Fn fn) {
    return [fn = std::move(fn)](std::span<const detail::ArgValue> a) {
      call(fn, a, std::make_index_sequence<N>{});
    };
  }
  std::shared_ptr<KernelBase> core_;
};

}  // namespace tilejit
