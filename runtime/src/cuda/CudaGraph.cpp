// A CUDA graph captured from a stream, and its executable instance.
#include "cuda/CudaGraph.h"

#include "Fail.h"
#include "cuda/CudaDriver.h"

namespace megrt {
namespace {

/// Ends a capture that failed part way, dropping what it captured. Its
/// result is not reported: the failure that got here is.
void abandonCapture(CUstream stream) noexcept {
  const CudaDriver &driver = cudaDriver();
  CUgraph partial = nullptr;
  if (driver.cuStreamEndCapture(stream, &partial) == CUDA_SUCCESS && partial)
    driver.cuGraphDestroy(partial);
}

} // namespace

void CudaGraph::DestroyGraph::operator()(CUgraph_st *graph) const {
  cudaDriver().cuGraphDestroy(graph);
}

void CudaGraph::DestroyExec::operator()(CUgraphExec_st *exec) const {
  cudaDriver().cuGraphExecDestroy(exec);
}

CudaGraph CudaGraph::capture(CUstream stream, const std::string &where,
                             const std::function<void()> &enqueue) {
  const CudaDriver &driver = cudaDriver();
  // Thread-local: calls that would break the capture (synchronous copies,
  // synchronisations) are refused on this thread only, so that Sessions on
  // other threads keep working meanwhile.
  checkCuda(
      driver.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      "cuStreamBeginCapture", where);
  try {
    enqueue();
  } catch (const Error &error) {
    abandonCapture(stream);
    fail(where,
         ": capturing its commands into a CUDA graph failed: ", error.what());
  } catch (...) {
    abandonCapture(stream);
    throw;
  }
  CudaGraph graph;
  CUgraph captured = nullptr;
  CUresult ended = driver.cuStreamEndCapture(stream, &captured);
  graph.graph_.reset(captured);
  if (ended != CUDA_SUCCESS)
    fail(where, ": cuStreamEndCapture failed: ", cudaErrorText(ended),
         "; one of its commands enqueued work that cannot be captured");
  CUgraphExec exec = nullptr;
  checkCuda(driver.cuGraphInstantiateWithFlags(&exec, captured, 0),
            "cuGraphInstantiateWithFlags", where);
  graph.exec_.reset(exec);
  return graph;
}

void CudaGraph::launch(CUstream stream, const std::string &where) const {
  checkCuda(cudaDriver().cuGraphLaunch(exec_.get(), stream), "cuGraphLaunch",
            where);
}

} // namespace megrt
