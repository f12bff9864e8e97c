// The GPU runtime against the real driver, with hand-written PTX so that only the runtime is under test:
// device query, Buffer/Stream/GpuTimer, PTX → cubin linking, loading, launching, shared-memory opt-in,
// and the driver's error messages.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "kernel_args.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/module.h"
#include "runtime/runtime.h"
#include "tilejit/buffer.h"
#include "tilejit/device.h"
#include "tilejit/error.h"
#include "tilejit/timer.h"

using namespace tilejit;

namespace {

// out[i] = alpha * x[i] + y[i] for i < n.
const char *kAxpyPtx = R"(
.version 7.0
.target sm_80
.address_size 64
.visible .entry axpy(.param .u64 x, .param .u64 y, .param .u64 out, .param .u32 n, .param .f32 alpha)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .f32 %f<5>;
  .reg .b64 %rd<11>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [y];
  ld.param.u64 %rd3, [out];
  ld.param.u32 %r1, [n];
  ld.param.f32 %f4, [alpha];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.s32 %p1, %r5, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd4, %rd1;
  cvta.to.global.u64 %rd5, %rd2;
  cvta.to.global.u64 %rd6, %rd3;
  mul.wide.s32 %rd7, %r5, 4;
  add.s64 %rd8, %rd4, %rd7;
  add.s64 %rd9, %rd5, %rd7;
  add.s64 %rd10, %rd6, %rd7;
  ld.global.f32 %f1, [%rd8];
  ld.global.f32 %f2, [%rd9];
  fma.rn.f32 %f3, %f4, %f1, %f2;
  st.global.f32 [%rd10], %f3;
DONE:
  ret;
}
)";

// Each thread stores tid*3 into dynamic shared memory at byte offset `base` + 4*tid, waits at a barrier,
// reads its neighbour's value back and writes it to out[tid]: needs base + 4*ntid bytes of shared memory.
const char *kSharedPtx = R"(
.version 7.0
.target sm_80
.address_size 64
.extern .shared .align 16 .b8 smem[];
.visible .entry shared_roundtrip(.param .u64 out, .param .u32 base)
{
  .reg .b32 %r<12>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [base];
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, smem;
  add.u32 %r4, %r4, %r1;
  shl.b32 %r5, %r2, 2;
  add.u32 %r6, %r4, %r5;
  mul.lo.u32 %r7, %r2, 3;
  st.shared.u32 [%r6], %r7;
  bar.sync 0;
  add.u32 %r8, %r2, 1;
  rem.u32 %r8, %r8, %r3;
  shl.b32 %r9, %r8, 2;
  add.u32 %r10, %r4, %r9;
  ld.shared.u32 %r11, [%r10];
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r2, 4;
  add.s64 %rd2, %rd2, %rd3;
  st.global.u32 [%rd2], %r11;
  ret;
}
)";

ir::ParamInfo param(const char *name, DType t, bool ptr = false) {
  ir::ParamInfo p;
  p.name = name;
  p.type = ir::Type{{}, ElemType{t, ptr}};
  return p;
}
KernelArg ptr_arg(const Buffer &b) {
  KernelArg a;
  a.kind = KernelArg::Kind::Ptr;
  a.ptr = b.address();
  a.bytes = b.bytes();
  return a;
}
using test_args::float_arg;
using test_args::int_arg;

runtime::LoadedKernel load(const char *ptx, const char *entry, int threads, int shared_bytes = 0) {
  std::string cubin = runtime::link_ptx_to_cubin(ptx, entry).cubin;
  return runtime::load_kernel(runtime::KernelArtifact{entry, shared_bytes, threads, cubin});
}

}  // namespace

TEST_CASE("the device query reports a supported GPU", "[gpu][runtime]") {
  REQUIRE(gpu_available());
  DeviceInfo d = device_info();
  INFO(d.name << " " << d.arch << " sm_count=" << d.sm_count << " smem=" << d.max_shared_per_block_optin);
  CHECK_FALSE(d.name.empty());
  CHECK(d.cc_major >= 8);
  CHECK(d.arch == runtime::arch_for_compute_capability(d.cc_major, d.cc_minor));
  CHECK(runtime::device_arch() == d.arch);
  CHECK(d.sm_count > 0);
  CHECK(d.max_shared_per_block_optin >= 48 * 1024);
}

TEST_CASE("GPU buffers round-trip data and fill bytes", "[gpu][runtime]") {
  std::mt19937 rng(5);
  std::vector<uint32_t> data(100000);
  for (auto &v : data) v = rng();
  Buffer b(data.size() * 4, Backend::GPU);
  CHECK(b.on_gpu());
  b.upload(data);
  CHECK(b.download_as<uint32_t>(data.size()) == data);
  std::vector<uint32_t> part(7);
  b.download(part.data(), 28, 400);
  CHECK(std::equal(part.begin(), part.end(), data.begin() + 100));
  b.fill_bytes(0x5A);
  auto filled = b.download_as<uint32_t>(data.size());
  CHECK(std::all_of(filled.begin(), filled.end(), [](uint32_t v) { return v == 0x5A5A5A5Au; }));
  CHECK_THROWS_AS(b.upload(data.data(), 4, b.bytes()), Error);
}

TEST_CASE("hand-written PTX links, loads and runs through runtime::launch", "[gpu][runtime]") {
  const int n = 10007;  // not a multiple of the block size: the kernel masks the tail
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-4.f, 4.f);
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = dist(rng), y[i] = dist(rng);
  Buffer dx(n * 4, Backend::GPU), dy(n * 4, Backend::GPU), dout(n * 4, Backend::GPU);
  dx.upload(x);
  dy.upload(y);
  dout.fill_bytes(0xFF);  // NaN poison

  runtime::LoadedKernel k = load(kAxpyPtx, "axpy", 128);
  CHECK(k.num_regs > 0);
  std::vector<ir::ParamInfo> params = {param("x", DType::f32, true), param("y", DType::f32, true),
                                       param("out", DType::f32, true), param("n", DType::i32),
                                       param("alpha", DType::f32)};
  Stream stream;
  GpuTimer timer;
  timer.start(&stream);
  runtime::launch(k, Grid{uint32_t((n + 127) / 128)}, params,
                  {ptr_arg(dx), ptr_arg(dy), ptr_arg(dout), int_arg(n), float_arg(1.5)}, &stream);
  timer.stop(&stream);
  stream.synchronize();
  CHECK(timer.milliseconds() >= 0.f);
  auto out = dout.download_as<float>(n);
  for (int i = 0; i < n; ++i) {
    INFO("i=" << i);
    REQUIRE(out[i] == std::fma(1.5f, x[i], y[i]));  // the same single fma: exact
  }
}

TEST_CASE("kernels above 48 KiB of dynamic shared memory opt in, up to the device limit", "[gpu][runtime]") {
  const int threads = 128;
  const int limit = device_info().max_shared_per_block_optin;
  const int base = limit - threads * 4;  // use the very end of the largest allowed allocation
  runtime::LoadedKernel k = load(kSharedPtx, "shared_roundtrip", threads, limit);
  Buffer out(threads * 4, Backend::GPU);
  out.fill_bytes(0xFF);
  runtime::launch(k, Grid{1}, {param("out", DType::i32, true), param("base", DType::i32)},
                  {ptr_arg(out), int_arg(base)}, nullptr);
  auto got = out.download_as<uint32_t>(threads);
  for (int t = 0; t < threads; ++t) CHECK(got[t] == uint32_t((t + 1) % threads * 3));

  std::string cubin = runtime::link_ptx_to_cubin(kSharedPtx, "shared_roundtrip").cubin;
  CHECK_THROWS_WITH(runtime::load_kernel(runtime::KernelArtifact{"shared_roundtrip", limit + 1024, threads, cubin}),
                    Catch::Contains("kernel 'shared_roundtrip' needs " + std::to_string(limit + 1024)) &&
                        Catch::Contains("at most " + std::to_string(limit)));
}

TEST_CASE("driver errors name the call, the kernel, the error and the JIT log", "[gpu][runtime]") {
  std::string bad = std::string(kAxpyPtx);
  bad.replace(bad.find("fma.rn.f32"), 10, "fma.rn.q32");  // an unknown instruction type
  try {
    runtime::link_ptx_to_cubin(bad, "axpy");
    FAIL("linking invalid PTX should throw");
  } catch (const DriverError &e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK_THAT(msg, Catch::StartsWith("cuLinkAddData failed for kernel 'axpy': CUDA_ERROR_INVALID_PTX ("));
    CHECK_THAT(msg, Catch::Contains("PTX JIT error log: "));
    CHECK_THAT(msg, Catch::Contains("q32"));
    CHECK(e.code == 218);  // CUDA_ERROR_INVALID_PTX
  }
  // The verbose info log is always on: ptxas's report of the kernel, with its (absent) spills.
  runtime::LinkedCubin linked = runtime::link_ptx_to_cubin(kAxpyPtx, "axpy");
  INFO("JIT info log: " << linked.info_log);
  CHECK_THAT(linked.info_log, Catch::Contains("axpy"));
  CHECK(linked.spills.known());
  CHECK_FALSE(linked.spills.spills());
  CHECK_THROWS_WITH(runtime::load_kernel(runtime::KernelArtifact{"missing", 0, 128, linked.cubin}),
                    Catch::StartsWith("cuModuleGetFunction failed for kernel 'missing': CUDA_ERROR_NOT_FOUND"));
  runtime::LoadedKernel k = load(kAxpyPtx, "axpy", 2048);  // more threads per block than CUDA allows
  Buffer b(16, Backend::GPU);
  CHECK_THROWS_WITH(runtime::launch(k, Grid{1}, {param("x", DType::f32, true), param("y", DType::f32, true),
                                                 param("out", DType::f32, true), param("n", DType::i32),
                                                 param("alpha", DType::f32)},
                                    {ptr_arg(b), ptr_arg(b), ptr_arg(b), int_arg(1), float_arg(1)}, nullptr),
                    Catch::StartsWith("cuLaunchKernel failed for kernel 'axpy': CUDA_ERROR_INVALID_VALUE") &&
                        Catch::Contains("block=(2048,1,1)"));
}
