// An owned CUDA event, for timing work on a stream.
#include "cuda/CudaEvent.h"

#include "cuda/CudaDriver.h"

namespace megrt {

CudaEvent::CudaEvent(const std::string &what) {
  CUevent event = nullptr;
  // The default flags keep timing on (CU_EVENT_DISABLE_TIMING is off).
  checkCuda(cudaDriver().cuEventCreate(&event, CU_EVENT_DEFAULT),
            "cuEventCreate", what);
  event_.reset(event);
}

void CudaEvent::Destroy::operator()(CUevent_st *event) const {
  // Nothing can be reported from a destructor; a broken context was
  // reported by the call that broke it.
  cudaDriver().cuEventDestroy(event);
}

void CudaEvent::record(CUstream stream, const std::string &what) const {
  checkCuda(cudaDriver().cuEventRecord(event_.get(), stream), "cuEventRecord",
            what);
}

double CudaEvent::elapsedMs(const CudaEvent &start, const CudaEvent &end,
                            const std::string &what) {
  float ms = 0.0f;
  checkCuda(cudaDriver().cuEventElapsedTime(&ms, start.event_.get(),
                                            end.event_.get()),
            "cuEventElapsedTime", what);
  return ms;
}

} // namespace megrt
