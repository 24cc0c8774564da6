// Fused attention through cuDNN's scaled-dot-product-attention graphs (the
// header-only cuDNN frontend over libcudnn, which is loaded with dlopen like
// the runtime's other vendor libraries), for bf16 and f16 on compute
// capability 9.0 and newer. The runtime's own kernels (CudaAttention) run
// whatever cuDNN is not used for; the CUDA entry chooses per command.
#ifndef MEGRT_SRC_CUDA_CUDNNATTENTION_H
#define MEGRT_SRC_CUDA_CUDNNATTENTION_H

#include "AttentionShape.h"
#include "cuda/CudaContext.h"

#include <cuda.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace megrt {

/// Whether libcudnn is loaded, and what was loaded or why not.
struct CudnnLibraryStatus {
  bool loaded = false;
  /// "cuDNN 9.19.0 from 'libcudnn.so.9'", or the one line saying why it
  /// could not be loaded.
  std::string description;
};

/// Where libcudnn.so.<major of this build's cudnn.h> is looked for, in
/// order: $MEGRT_CUDNN_LIBRARY (a path to the library), then the toolkit's
/// places (toolkitLibraryCandidates).
std::vector<std::string> cudnnLibraryCandidates();

/// Loads the first of `candidates` that opens and is cuDNN of this build's
/// major version, and the CUDA runtime library that the frontend calls for
/// device properties, and hands libcudnn to the frontend. Never throws: a
/// failure is described in the result. Tests give their own candidates.
CudnnLibraryStatus loadCudnnLibrary(const std::vector<std::string> &candidates);

/// loadCudnnLibrary(cudnnLibraryCandidates()), once per process; "disabled
/// by MEGRT_CUDNN=0" when that variable is 0.
const CudnnLibraryStatus &cudnnLibrary();

/// Why cuDNN's attention is not used for `shape` on a device of compute
/// capability `computeMajor`.x; empty when it may be (cuDNN itself may still
/// refuse the graph, which CudnnAttention::prepare reports).
std::string cudnnAttentionRefusal(const AttentionShape &shape,
                                  int computeMajor);

/// A cuDNN handle in one context and the execution plans of the attention
/// shapes prepared on it, built once per shape and direction and cached.
class CudnnAttention {
public:
  /// Creates the handle in `context` (made current; it must outlive this
  /// object). Throws megrt::Error when libcudnn is not loaded or the handle
  /// cannot be created.
  explicit CudnnAttention(const CudaContext &context);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention &) = delete;
  CudnnAttention &operator=(const CudnnAttention &) = delete;

  /// Builds the plans of `shape`'s forward (with `stats`, one that also
  /// writes the softmax statistics), or with `backward` of the backward
  /// (with `stats` given the forward's statistics, otherwise after a
  /// forward that recomputes them). Returns the empty string, or cuDNN's
  /// reason for refusing the shape (then the caller uses its own kernels).
  /// Both outcomes are cached: a shape is built or refused once.
  std::string prepare(const AttentionShape &shape, bool backward, bool stats);

  /// Scratch a prepared command needs: cuDNN's workspace, and for a
  /// backward that recomputes them the softmax statistics and the
  /// recomputed output.
  size_t scratchBytes(const AttentionShape &shape, bool backward,
                      bool stats) const;

  /// out = softmax(q k^T * scale (+ causal mask)) v, and unless `stats` is 0
  /// the softmax statistics, as CudaAttention's.
  void forward(const AttentionShape &shape, CUdeviceptr q, CUdeviceptr k,
               CUdeviceptr v, CUdeviceptr out, CUdeviceptr stats,
               CUdeviceptr scratch, size_t scratchBytes, CUstream stream) const;

  /// dq, dk, dv as CudaAttention's, from the forward's `stats` unless 0.
  /// `scratch` (scratchBytes(shape, true, stats != 0) bytes, 256-byte
  /// aligned) must not be used by other work until the launches finish.
  void backward(const AttentionShape &shape, CUdeviceptr dout, CUdeviceptr q,
                CUdeviceptr k, CUdeviceptr v, CUdeviceptr out,
                CUdeviceptr stats, CUdeviceptr dq, CUdeviceptr dk,
                CUdeviceptr dv, CUdeviceptr scratch, size_t scratchBytes,
                CUstream stream) const;

  /// The execution plans of one shape and direction.
  struct Plans;

private:
  /// prepare() for a shape not seen before, `key` naming it.
  std::string build(const AttentionShape &shape, bool backward, bool stats,
                    const std::string &key);
  const Plans &plans(const AttentionShape &shape, bool backward,
                     bool stats) const;

  const CudaContext &context_;
  /// cudnnHandle_t, kept opaque so that only the source sees cuDNN's
  /// headers.
  void *handle_ = nullptr;
  std::map<std::string, std::unique_ptr<Plans>> plans_;
  /// cuDNN's reason, per shape and direction it refused.
  std::map<std::string, std::string> refused_;
};

/// Which kernels run an attention command: cuDNN's where `cudnn` is given
/// and takes the shape (prepared on it here), else the runtime's own.
struct AttentionChoice {
  /// Null for the runtime's own kernels.
  const CudnnAttention *cudnn = nullptr;
  /// Scratch the command needs.
  size_t scratch = 0;
  /// "cuDNN", or "megrt (REASON cuDNN is not used)", for the trace and the
  /// session's report.
  std::string note;
};

/// `cudnn` is null where cuDNN is not available, for the reason in
/// `cudnnUnavailable`; `computeMajor` is the device's compute capability;
/// with `stats` the command writes (forward) or reads (backward) the softmax
/// statistics; with `positions` its queries stand at positions of their
/// own (which only the runtime's kernels take).
AttentionChoice chooseAttentionKernels(const AttentionShape &shape,
                                       bool backward, bool stats,
                                       bool positions, CudnnAttention *cudnn,
                                       const std::string &cudnnUnavailable,
                                       int computeMajor);

} // namespace megrt

#endif // MEGRT_SRC_CUDA_CUDNNATTENTION_H
