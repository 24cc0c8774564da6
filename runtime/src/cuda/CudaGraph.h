// A CUDA graph captured from a stream, and its executable instance.
#ifndef MEGRT_SRC_CUDA_CUDAGRAPH_H
#define MEGRT_SRC_CUDA_CUDAGRAPH_H

#include <cuda.h>

#include <functional>
#include <memory>
#include <string>

namespace megrt {

/// The graph and its instance are destroyed together, with the context they
/// were made in current. Kernel arguments, copy addresses and cuBLASLt's
/// workspace are captured as values: a replay repeats the captured work on
/// the same addresses.
class CudaGraph {
public:
  CudaGraph() = default;

  /// Captures the work that `enqueue` puts on `stream` and instantiates it.
  /// On failure the capture is ended first, so that the stream is usable
  /// again, and the error names `where` and the cause.
  static CudaGraph capture(CUstream stream, const std::string &where,
                           const std::function<void()> &enqueue);

  bool empty() const { return !exec_; }

  /// Enqueues one replay of the graph on `stream`.
  void launch(CUstream stream, const std::string &where) const;

private:
  struct DestroyGraph {
    void operator()(CUgraph_st *graph) const;
  };
  struct DestroyExec {
    void operator()(CUgraphExec_st *exec) const;
  };
  std::unique_ptr<CUgraph_st, DestroyGraph> graph_;
  std::unique_ptr<CUgraphExec_st, DestroyExec> exec_;
};

} // namespace megrt

#endif // MEGRT_SRC_CUDA_CUDAGRAPH_H
