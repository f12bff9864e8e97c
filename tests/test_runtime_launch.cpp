// runtime::launch's argument and grid checks, which run before any driver call (no GPU needed).
#include <catch2/catch.hpp>

#include "kernel_args.h"
#include "runtime/runtime.h"
#include "tilejit/error.h"

using namespace tilejit;

namespace {
ir::ParamInfo param(const char *name, DType t, bool ptr = false) {
  ir::ParamInfo p;
  p.name = name;
  p.type = ir::Type{{}, ElemType{t, ptr}};
  return p;
}
using test_args::int_arg;
KernelArg ptr_arg(uint64_t p) {
  KernelArg a;
  a.kind = KernelArg::Kind::Ptr;
  a.ptr = p;
  return a;
}
runtime::LoadedKernel fake_kernel() {
  runtime::LoadedKernel k;
  k.name = "vec_add";
  k.num_threads = 128;
  return k;
}
}  // namespace

TEST_CASE("launch rejects a wrong number of arguments", "[runtime]") {
  auto k = fake_kernel();
  std::vector<ir::ParamInfo> params = {param("x", DType::f32, true), param("n", DType::i32)};
  CHECK_THROWS_WITH(runtime::launch(k, Grid{4, 1, 1}, params, {int_arg(1)}, nullptr),
                    "launch of kernel 'vec_add': 1 arguments given, the kernel has 2 parameters");
}

TEST_CASE("a grid with a zero dimension launches nothing", "[runtime]") {
  auto k = fake_kernel();  // its null function would fail if it reached the driver
  std::vector<ir::ParamInfo> params = {param("n", DType::i32)};
  CHECK_NOTHROW(runtime::launch(k, Grid{0, 1, 1}, params, {int_arg(5)}, nullptr));
  CHECK_NOTHROW(runtime::launch(k, Grid{3, 0, 1}, params, {int_arg(5)}, nullptr));
  CHECK_NOTHROW(runtime::launch(k, Grid{3, 2, 0}, params, {int_arg(5)}, nullptr));
}

TEST_CASE("grid dimensions beyond CUDA's limits are rejected", "[runtime]") {
  auto k = fake_kernel();
  std::vector<ir::ParamInfo> params = {param("n", DType::i32)};
  CHECK_THROWS_WITH(runtime::launch(k, Grid{1, 65536, 1}, params, {int_arg(5)}, nullptr),
                    Catch::Contains("grid (1, 65536, 1) exceeds the CUDA limits"));
  CHECK_THROWS_WITH(runtime::launch(k, Grid{1, 1, 70000}, params, {int_arg(5)}, nullptr),
                    Catch::Contains("grid (1, 1, 70000)"));
  CHECK_THROWS_AS(runtime::launch(k, Grid{0x80000000u, 1, 1}, params, {int_arg(5)}, nullptr), Error);
}

TEST_CASE("arguments must fit their parameter's kind and range", "[runtime]") {
  auto k = fake_kernel();
  std::vector<ir::ParamInfo> params = {param("x", DType::f32, true), param("n", DType::i32)};
  CHECK_THROWS_WITH(runtime::launch(k, Grid{1, 1, 1}, params, {ptr_arg(256), int_arg(int64_t(1) << 31)}, nullptr),
                    "launch of kernel 'vec_add': argument 2147483648 for i32 parameter 'n' is out of the int32 range");
  CHECK_THROWS_WITH(runtime::launch(k, Grid{1, 1, 1}, params, {int_arg(256), int_arg(1)}, nullptr),
                    "launch of kernel 'vec_add': parameter 'x' of type ptr<f32> needs a pointer argument, got an integer");
  std::vector<ir::ParamInfo> bad = {param("h", DType::f16)};
  CHECK_THROWS_WITH(runtime::launch(k, Grid{1, 1, 1}, bad, {int_arg(1)}, nullptr),
                    Catch::Contains("parameter 'h' has type f16; kernel parameters must be pointers, i32, i64 or f32"));
}
