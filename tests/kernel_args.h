// Scalar kernel arguments (KernelArg of kind Int / Float), shared by the interpreter, runtime, simulator and GPU
// test helpers.
#pragma once

#include <cstdint>

#include "tilejit/launch.h"

namespace tilejit::test_args {

inline KernelArg int_arg(int64_t v) {
  KernelArg a;
  a.kind = KernelArg::Kind::Int;
  a.i = v;
  return a;
}

inline KernelArg float_arg(double v) {
  KernelArg a;
  a.kind = KernelArg::Kind::Float;
  a.f = v;
  return a;
}

}  // namespace tilejit::test_args
