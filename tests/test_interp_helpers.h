// Helpers for the interpreter tests: build small kernels directly with ir::Builder, hold host buffers,
// draw random inputs, and reference conversions that do not use interp/numerics.h.
#pragma once
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "interp/interpreter.h"
#include "kernel_args.h"
#include "ir/builder.h"
#include "ir/ir.h"
#include "tilejit/buffer.h"
#include "tilejit/error.h"

namespace tilejit::interp_testing {

inline ir::Type T(std::vector<int64_t> shape, DType d) { return ir::Type{std::move(shape), ElemType{d, false}}; }
inline ir::Type P(DType d, std::vector<int64_t> shape = {}) { return ir::Type{std::move(shape), ElemType{d, true}}; }
/// The i32 scalar type.
inline ir::Type s32() { return T({}, DType::i32); }

/// A kernel under construction. Ops get the source location "kernels/x.cpp:<line>" (line = op counter + 1)
/// unless `line` is set, so error messages can be checked.
struct KernelBuilder {
  ir::Function fn;
  ir::Builder b{fn.body.get()};
  uint32_t line = 12;

  KernelBuilder() { fn.name = "test_kernel"; }
  ir::SourceLoc loc() const { return ir::SourceLoc{"kernels/x.cpp", line, 1}; }
  ir::Value *param(const std::string &name, const ir::Type &t) {
    fn.params.push_back(ir::ParamInfo{name, t});
    auto *v = fn.body->add_arg(t);
    v->name = name;
    return v;
  }
  ir::Value *op(ir::OpKind k, std::vector<ir::Value *> operands, ir::Type t, ir::Attrs a = {}) {
    return b.create1(k, std::move(operands), std::move(t), std::move(a), loc());
  }
  void op0(ir::OpKind k, std::vector<ir::Value *> operands) { b.create(k, std::move(operands), {}, {}, loc()); }

  ir::Value *const_i(int64_t v, ir::Type t) {
    ir::Attrs a;
    a.ivalue = v;
    return op(ir::OpKind::Constant, {}, std::move(t), a);
  }
  ir::Value *const_f(double v, ir::Type t) {
    ir::Attrs a;
    a.fvalue = v;
    return op(ir::OpKind::Constant, {}, std::move(t), a);
  }
  ir::Value *arange(int64_t start, int64_t end) {
    ir::Attrs a;
    a.ints = {start, end};
    return op(ir::OpKind::Arange, {}, T({end - start}, DType::i32), a);
  }
  ir::Value *program_id(int axis) {
    ir::Attrs a;
    a.axis = axis;
    return op(ir::OpKind::ProgramId, {}, T({}, DType::i32), a);
  }
  /// Pointers p + offsets (offsets: i32 tile; p: scalar pointer), shaped like offsets.
  ir::Value *ptrs(ir::Value *p, ir::Value *offsets) {
    const auto &shape = offsets->type.shape;
    auto *s = op(ir::OpKind::Splat, {p}, P(p->type.dtype(), shape));
    return op(ir::OpKind::PtrAdd, {s, offsets}, P(p->type.dtype(), shape));
  }
  /// Row-major pointers to a whole [shape] tile starting at p.
  ir::Value *tile_ptrs(ir::Value *p, const std::vector<int64_t> &shape, int64_t first = 0) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    auto *flat = ptrs(p, arange(first, first + n));
    if (shape.size() == 1) return flat;
    return op(ir::OpKind::Reshape, {flat}, P(p->type.dtype(), shape));
  }
  ir::Value *load(ir::Value *ptr_tile, ir::Value *mask = nullptr, ir::Value *other = nullptr) {
    std::vector<ir::Value *> ops{ptr_tile};
    if (mask) ops.push_back(mask);
    if (other) ops.push_back(other);
    return op(ir::OpKind::Load, ops, T(ptr_tile->type.shape, ptr_tile->type.dtype()));
  }
  void store(ir::Value *ptr_tile, ir::Value *value, ir::Value *mask = nullptr) {
    std::vector<ir::Value *> ops{ptr_tile, value};
    if (mask) ops.push_back(mask);
    op0(ir::OpKind::Store, ops);
  }
  ir::Value *cmp(ir::CmpPred p, ir::Value *a, ir::Value *b) {
    ir::Attrs at;
    at.pred = p;
    return op(ir::OpKind::Cmp, {a, b}, T(a->type.shape, DType::i1), at);
  }
  ir::Value *splat(ir::Value *s, std::vector<int64_t> shape) {
    return op(ir::OpKind::Splat, {s}, ir::Type{std::move(shape), s->type.elem});
  }
};

/// A host buffer of raw bytes, passed to the interpreter as a bounds-checked pointer argument.
struct HostBuf {
  std::vector<uint8_t> bytes;
  explicit HostBuf(size_t n) : bytes(n, 0) {}
  template <class E> static HostBuf of(const std::vector<E> &v) {
    HostBuf b(v.size() * sizeof(E));
    std::memcpy(b.bytes.data(), v.data(), b.bytes.size());
    return b;
  }
  template <class E> std::vector<E> as() const {
    std::vector<E> v(bytes.size() / sizeof(E));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(E));
    return v;
  }
  uint64_t addr() const { return uint64_t(reinterpret_cast<uintptr_t>(bytes.data())); }
  KernelArg arg(bool checked = true) const {
    KernelArg a;
    a.kind = KernelArg::Kind::Ptr;
    a.ptr = addr();
    a.bytes = checked ? bytes.size() : 0;
    return a;
  }
};
using test_args::float_arg;
using test_args::int_arg;

/// Random generator seeded from the device (inputs are fresh each run); tests INFO the seed.
struct Rng {
  uint64_t seed = std::random_device{}();
  std::mt19937_64 gen{seed};
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen); }
  int64_t integer(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); }
  std::vector<float> floats(size_t n, float lo = -4, float hi = 4) {
    std::vector<float> v(n);
    for (auto &x : v) x = uniform(lo, hi);
    return v;
  }
};

/// An interpreter (host) buffer holding `v`.
inline Buffer host_buffer(const std::vector<float> &v) {
  Buffer b(v.size() * 4, Backend::Interpreter);
  b.upload(v);
  return b;
}

// Reference 16-bit conversions independent of interp/numerics.h.
/// float → bf16 bits, round to nearest even (the classic integer trick; NaN handled separately).
inline uint16_t ref_bf16_bits(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}
inline float ref_bf16_value(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }
inline float ref_round_bf16(float x) { return ref_bf16_value(ref_bf16_bits(x)); }
/// f16 via the compiler's _Float16 (libgcc's correctly rounded conversions).
inline uint16_t ref_f16_bits(double x) { return std::bit_cast<uint16_t>(static_cast<_Float16>(x)); }
inline float ref_f16_value(uint16_t b) { return float(std::bit_cast<_Float16>(b)); }
inline float ref_round_f16(double x) { return ref_f16_value(ref_f16_bits(x)); }

/// Elements of dtype d as raw memory.
inline HostBuf buf_of(const std::vector<float> &v, DType d) {
  HostBuf b(v.size() * size_t(dtype_bytes(d)));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (d) {
      case DType::f32: std::memcpy(&b.bytes[i * 4], &v[i], 4); break;
      case DType::bf16: { uint16_t h = ref_bf16_bits(v[i]); std::memcpy(&b.bytes[i * 2], &h, 2); break; }
      case DType::f16: { uint16_t h = ref_f16_bits(v[i]); std::memcpy(&b.bytes[i * 2], &h, 2); break; }
      case DType::f64: { double x = v[i]; std::memcpy(&b.bytes[i * 8], &x, 8); break; }
      default: break;
    }
  }
  return b;
}
/// Reads the float elements of dtype d back.
inline std::vector<double> values_of(const HostBuf &b, DType d) {
  const size_t n = b.bytes.size() / size_t(dtype_bytes(d));
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    float f;
    switch (d) {
      case DType::f32: std::memcpy(&f, &b.bytes[i * 4], 4); v[i] = f; break;
      case DType::bf16: std::memcpy(&h, &b.bytes[i * 2], 2); v[i] = ref_bf16_value(h); break;
      case DType::f16: std::memcpy(&h, &b.bytes[i * 2], 2); v[i] = ref_f16_value(h); break;
      case DType::f64: std::memcpy(&v[i], &b.bytes[i * 8], 8); break;
      default: break;
    }
  }
  return v;
}
/// Rounds a float to dtype d with the reference conversions.
inline double ref_round(double x, DType d) {
  switch (d) {
    case DType::f32: return float(x);
    case DType::bf16: return ref_round_bf16(float(x));  // callers pass values exact in float
    case DType::f16: return ref_round_f16(x);
    default: return x;
  }
}

/// Runs fn and returns the InterpError's message; FAILs the test when nothing is thrown.
inline std::string interp_error(const ir::Function &fn, Grid g, const std::vector<KernelArg> &args) {
  try {
    interp::run(fn, g, args);
  } catch (const InterpError &e) {
    return e.what();
  }
  FAIL("expected an InterpError");
  return {};
}

}  // namespace tilejit::interp_testing
