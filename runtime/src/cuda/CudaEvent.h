// An owned CUDA event, for timing work on a stream.
#ifndef MEGRT_SRC_CUDA_CUDAEVENT_H
#define MEGRT_SRC_CUDA_CUDAEVENT_H

#include <cuda.h>

#include <memory>
#include <string>

namespace megrt {

/// A timing event of the current context, destroyed with this object (the
/// context current then too). `what` names it in errors.
class CudaEvent {
public:
  explicit CudaEvent(const std::string &what);

  /// Marks the point in `stream`'s work reached by everything enqueued so
  /// far; the stream must not be capturing.
  void record(CUstream stream, const std::string &what) const;

  /// Milliseconds from `start` to `end`, both recorded and complete (about
  /// half a microsecond of resolution).
  static double elapsedMs(const CudaEvent &start, const CudaEvent &end,
                          const std::string &what);

private:
  struct Destroy {
    void operator()(CUevent_st *event) const;
  };
  std::unique_ptr<CUevent_st, Destroy> event_;
};

} // namespace megrt

#endif // MEGRT_SRC_CUDA_CUDAEVENT_H
