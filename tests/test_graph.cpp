// CudaGraph without a GPU: the default stream is rejected before anything else, and with no usable driver the
// constructor throws DriverError without running `record`. The GPU side is tests/gpu/test_gpu_graph.cpp.
#include <catch2/catch.hpp>

#include "tilejit/buffer.h"
#include "tilejit/error.h"
#include "tilejit/graph.h"

using namespace tilejit;

TEST_CASE("CudaGraph rejects the default stream with an Error, before running record", "[graph]") {
  bool ran = false;
  auto record = [&] { ran = true; };
  for (void *handle : {static_cast<void *>(nullptr), reinterpret_cast<void *>(0x1)}) {  // null; CU_STREAM_LEGACY
    Stream legacy(Stream::Borrow{}, handle);
    INFO("stream handle " << handle);
    try {
      CudaGraph g(legacy, record);
      FAIL("capture on the default stream was accepted");
    } catch (const DriverError &e) {
      FAIL("a DriverError instead of an argument Error: " << e.what());
    } catch (const Error &e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains("cannot capture on the default (legacy) stream") &&
                                            Catch::Contains("LaunchConfig::stream"));
    }
  }
  CHECK_FALSE(ran);
  Stream other(Stream::Borrow{}, reinterpret_cast<void *>(0x1000));  // never reaches the driver: rejected first
  CHECK_THROWS_WITH(CudaGraph(other, std::function<void()>()), "CudaGraph: the record function is empty");
}

TEST_CASE("without a GPU, constructing a CudaGraph throws DriverError and runs nothing", "[graph]") {
  if (gpu_available()) {
    WARN("a GPU is present: the no-driver check of CudaGraph is skipped (tests/gpu/test_gpu_graph.cpp covers it)");
    return;
  }
  // A borrowed handle that is not the default stream: the driver is never reached, so it is never used.
  Stream stream(Stream::Borrow{}, reinterpret_cast<void *>(0x1000));
  bool ran = false;
  CHECK_THROWS_AS(CudaGraph(stream, [&] { ran = true; }), DriverError);
  CHECK_THROWS_WITH(CudaGraph(stream, [&] { ran = true; }),
                    Catch::Contains("CudaGraph::CudaGraph: CUDA graphs need a GPU and none is usable"));
  CHECK_FALSE(ran);
  try {
    CudaGraph g(stream, [] {});
    FAIL("a CudaGraph was made without a GPU");
  } catch (const DriverError &e) {  // the driver's load failure is kept as the cause
    CHECK_FALSE(e.cause.empty());
    CHECK_THAT(std::string(e.what()), Catch::Contains(e.cause));
  }
}
