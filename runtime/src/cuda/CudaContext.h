// One CUDA device as a Session uses it: its primary context and a stream.
#ifndef MEGRT_SRC_CUDA_CUDACONTEXT_H
#define MEGRT_SRC_CUDA_CUDACONTEXT_H

#include <cuda.h>

#include <string>

namespace megrt {

class CudaContext {
public:
  /// Loads the driver, checks that device `ordinal` exists, retains its
  /// primary context, makes it current and creates a stream.
  explicit CudaContext(int ordinal);
  ~CudaContext();
  CudaContext(const CudaContext &) = delete;
  CudaContext &operator=(const CudaContext &) = delete;

  /// Every call into CUDA for this device must follow this on the calling
  /// thread: a Session may move between threads, and several Sessions may
  /// share a thread.
  void makeCurrent() const;
  /// makeCurrent ignoring errors, for clean-up paths: errors there cannot be
  /// reported, and a broken context was reported by the call that broke it.
  void makeCurrentQuietly() const noexcept;
  /// Waits for the stream; `what` names the work in the error, where faults
  /// of earlier asynchronous work surface.
  void synchronize(const std::string &what) const;
  /// Waits for the stream ignoring errors, for clean-up paths.
  void synchronizeQuietly() const noexcept;

  CUstream stream() const { return stream_; }
  int computeMajor() const { return computeMajor_; }
  int computeMinor() const { return computeMinor_; }
  /// "cuda:N (NAME, sm_XY)", for messages.
  const std::string &description() const { return description_; }

private:
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  int computeMajor_ = 0;
  int computeMinor_ = 0;
  std::string description_;
};

} // namespace megrt

#endif // MEGRT_SRC_CUDA_CUDACONTEXT_H
