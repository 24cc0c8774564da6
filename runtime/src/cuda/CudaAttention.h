// Fused scaled-dot-product attention on a CUDA device: the flash-attention
// kernels of cuda/attention/FlashAttention.cu, embedded in the runtime as a
// fatbin, loaded into a context and launched through the driver API.
#ifndef MEGRT_SRC_CUDA_CUDAATTENTION_H
#define MEGRT_SRC_CUDA_CUDAATTENTION_H

#include "AttentionShape.h"
#include "cuda/CudaContext.h"
#include "cuda/EmbeddedModule.h"

#include <cuda.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>

namespace megrt {

/// The attention kernels loaded into one context. Semantics, layouts and
/// dtypes are those of AttentionShape; head dimensions (headDim and
/// valueDim) go up to 256. Every launch is asynchronous on the given stream;
/// faults surface at the stream's next synchronisation.
class CudaAttention {
public:
  /// Loads the embedded module into `context` (which is made current and
  /// must outlive this object). Fails in a runtime built without nvcc.
  explicit CudaAttention(const CudaContext &context);
  ~CudaAttention();
  CudaAttention(const CudaAttention &) = delete;
  CudaAttention &operator=(const CudaAttention &) = delete;

  /// out = softmax(q k^T * scale (+ causal mask)) v; unless `stats` is 0,
  /// it receives each query row's log-sum-exp (natural log), +inf for a row
  /// that sees no key ([batch][heads][seqQ] f32). Unless `positions` is 0,
  /// query i sees the keys up to positions[i] ([seqQ] i32, non-decreasing,
  /// causal only) instead of i + seqKv - seqQ.
  void forward(const AttentionShape &shape, CUdeviceptr q, CUdeviceptr k,
               CUdeviceptr v, CUdeviceptr out, CUdeviceptr stats,
               CUdeviceptr positions, CUstream stream) const;

  /// dq, dk, dv from dout and the forward's inputs and output; dk and dv
  /// sum over the query heads sharing a KV head. Given the forward's
  /// `stats` (not 0) the backward skips recomputing them; `positions` are
  /// the forward's. `scratch` must
  /// hold backwardScratchBytes(shape) bytes, 4-byte aligned, and must not be
  /// used by other work until the launches finish.
  void backward(const AttentionShape &shape, CUdeviceptr dout, CUdeviceptr q,
                CUdeviceptr k, CUdeviceptr v, CUdeviceptr out,
                CUdeviceptr stats, CUdeviceptr dq, CUdeviceptr dk,
                CUdeviceptr dv, CUdeviceptr positions, CUdeviceptr scratch,
                size_t scratchBytes, CUstream stream) const;

  /// The backward's scratch: each query row's log-sum-exp and delta =
  /// rowsum(dout * out) (2 * batch * heads * seqQ floats) and an f32
  /// accumulator of dq (batch * seqQ * heads * headDim floats), each part
  /// starting a multiple of 256 bytes after the scratch's start.
  static size_t backwardScratchBytes(const AttentionShape &shape);

private:
  CUfunction function(const std::string &name) const;

  const CudaContext &context_;
  std::unique_ptr<EmbeddedModule> module_;
  std::map<std::string, CUfunction> functions_;
};

} // namespace megrt

#endif // MEGRT_SRC_CUDA_CUDAATTENTION_H
