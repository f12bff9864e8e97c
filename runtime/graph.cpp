// CudaGraph (include/tilejit/graph.h): stream capture, instantiation and replay through the driver API, and the
// thread's capture marker that runtime::launch consults (runtime/runtime.h).
#include "tilejit/graph.h"

#include <exception>
#include <vector>

#include <fmt/format.h>

#include "runtime/driver.h"
#include "runtime/runtime.h"
#include "tilejit/error.h"

namespace tilejit {
namespace runtime {
namespace {
thread_local void *t_capturing = nullptr;
}  // namespace

void *capturing_stream() { return t_capturing; }
}  // namespace runtime

namespace {

using runtime::cu::CUgraph;
using runtime::cu::CUgraphExec;
using runtime::cu::CUgraphNode;
using runtime::cu::CUstream;

// The driver, or a DriverError that says graphs need one (keeping the load failure's cause).
runtime::Driver &graph_driver(const char *what) {
  try {
    return runtime::driver();
  } catch (const DriverError &e) {
    const std::string &cause = e.cause.empty() ? std::string(e.what()) : e.cause;
    throw DriverError(fmt::format("CudaGraph::{}: CUDA graphs need a GPU and none is usable: {}", what, cause),
                      e.code, e.cause);
  }
}

// Marks `stream` as the one this thread captures for as long as the capture lasts (restoring an enclosing
// capture's marker when a record function captures a graph of its own on another stream).
struct CaptureMarker {
  void *previous;
  explicit CaptureMarker(void *stream) : previous(runtime::t_capturing) { runtime::t_capturing = stream; }
  ~CaptureMarker() { runtime::t_capturing = previous; }
};

// Kernel nodes among the graph's nodes. A captured graph is flat: one node per captured operation.
int count_kernel_nodes(runtime::Driver &d, CUgraph graph) {
  size_t count = 0;
  runtime::check(d.cuGraphGetNodes(graph, nullptr, &count), "cuGraphGetNodes", {}, "counting the captured nodes");
  std::vector<CUgraphNode> nodes(count);
  if (count > 0)
    runtime::check(d.cuGraphGetNodes(graph, nodes.data(), &count), "cuGraphGetNodes", {},
                   "listing the captured nodes");
  int kernels = 0;
  for (size_t i = 0; i < count; ++i) {
    runtime::cu::CUgraphNodeType type{};
    runtime::check(d.cuGraphNodeGetType(nodes[i], &type), "cuGraphNodeGetType");
    kernels += type == runtime::cu::CU_GRAPH_NODE_TYPE_KERNEL;
  }
  return kernels;
}

}  // namespace

CudaGraph::CudaGraph(Stream &stream, const std::function<void()> &record) {
  auto s = static_cast<CUstream>(stream.handle());
  // The legacy default stream cannot be captured (cuStreamBeginCapture rejects it), and work on it would
  // serialize with every blocking stream anyway.
  if (s == nullptr || s == runtime::cu::CU_STREAM_LEGACY)
    throw Error("CudaGraph: cannot capture on the default (legacy) stream: create a Stream and pass it both to "
                "CudaGraph and to the launches inside `record` (LaunchConfig::stream)");
  if (!record) throw Error("CudaGraph: the record function is empty");
  runtime::Driver &d = graph_driver("CudaGraph");

  runtime::check(d.cuStreamBeginCapture(s, runtime::cu::CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture",
                 {}, "starting the capture of a CudaGraph (is the stream already capturing?)");
  CUgraph graph = nullptr;
  try {
    CaptureMarker marker(s);
    record();
  } catch (...) {
    // Leave the stream out of capture mode before the caller sees the error; an invalidated capture returns
    // an error and no graph, which adds nothing to what `record` threw.
    if (d.cuStreamEndCapture(s, &graph) == runtime::cu::CUDA_SUCCESS && graph) d.cuGraphDestroy(graph);
    throw;
  }
  runtime::cu::CUresult ended = d.cuStreamEndCapture(s, &graph);
  if (ended != runtime::cu::CUDA_SUCCESS) {
    if (graph) d.cuGraphDestroy(graph);
    runtime::check(ended, "cuStreamEndCapture", {},
                   ended == runtime::cu::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                       ? "a call inside the CudaGraph's record function broke the capture without reporting it "
                         "(an error ignored by the caller, e.g. a Buffer freed inside `record`, or a call that is "
                         "illegal during capture made from another thread)"
                       : "ending the capture of a CudaGraph");
  }
  try {
    num_kernels_ = count_kernel_nodes(d, graph);
    CUgraphExec exec = nullptr;
    runtime::check(d.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiateWithFlags", {},
                   fmt::format("instantiating a CudaGraph of {} kernel launch(es)", num_kernels_));
    exec_ = exec;
  } catch (...) {
    d.cuGraphDestroy(graph);
    throw;
  }
  graph_ = graph;
}

CudaGraph::~CudaGraph() {
  // Destructors must not throw; a failing destroy (e.g. during process teardown) is ignored.
  try {
    runtime::Driver &d = runtime::driver();
    if (exec_) d.cuGraphExecDestroy(static_cast<CUgraphExec>(exec_));
    if (graph_) d.cuGraphDestroy(static_cast<CUgraph>(graph_));
  } catch (...) {
  }
}

void CudaGraph::replay(Stream &stream) const {
  runtime::Driver &d = graph_driver("replay");
  runtime::check(d.cuGraphLaunch(static_cast<CUgraphExec>(exec_), static_cast<CUstream>(stream.handle())),
                 "cuGraphLaunch", {}, fmt::format("replaying a CudaGraph of {} kernel launch(es)", num_kernels_));
}

int CudaGraph::num_kernels() const { return num_kernels_; }

}  // namespace tilejit
