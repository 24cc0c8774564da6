// A CUDA device: entries run on a GPU, with the parameters mirrored in
// device memory.
#ifndef MEGRT_SRC_CUDA_CUDADEVICE_H
#define MEGRT_SRC_CUDA_CUDADEVICE_H

#include "Device.h"
#include "MeshLayout.h"
#include "cuda/CublasLt.h"
#include "cuda/CudaAttention.h"
#include "cuda/CudaContext.h"
#include "cuda/CudaEntry.h"
#include "cuda/CudaEvent.h"
#include "cuda/CudaLibrary.h"
#include "cuda/CudaModule.h"
#include "cuda/CudnnAttention.h"
#include "cuda/DeviceMemory.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

namespace megrt {

class CudaDevice final : public Device {
public:
  /// Opens CUDA device `ordinal`, loads the program's CUDA module, and
  /// allocates the parameters, the kernels' scratch and, for programs with
  /// Gemm commands, cuBLASLt's workspace; in a world, creates the Cuda
  /// groups of the program's collectives.
  CudaDevice(const Program &program, int ordinal,
             std::vector<Tensor> &parameters, const DeviceOptions &options);
  ~CudaDevice() override;

  void run(size_t index, const std::vector<const Tensor *> &inputs,
           std::vector<Tensor> &outputs) override;
  void parameterWritten(size_t index) override;
  void parameterRead(size_t index) override;

private:
  /// Which copy of a parameter holds its current value.
  enum class Newer : uint8_t { Neither, Host, Device };

  CudaEntry &prepare(size_t index);
  void uploadParameters();
  /// Prints `line` on stderr, once per device.
  void report(const std::string &line);
  void openCudnn();
  std::string parameterName(size_t index) const;

  Program program_;
  std::vector<Tensor> &parameters_;
  // Declared first so that everything below is released while the context
  // is still alive.
  CudaContext context_;
  CudaModule module_;
  std::vector<DeviceMemory> parameterMemory_;
  std::vector<CUdeviceptr> parameterAddresses_;
  std::vector<Newer> newer_;
  DeviceMemory scratch_;
  std::unique_ptr<CublasLtContext> cublas_;
  std::unique_ptr<CudaAttention> attention_;
  /// The library kernels the program calls.
  std::unique_ptr<CudaLibrary> library_;
  /// Null without a bf16 or f16 attention that cuDNN could run, or when
  /// cuDNN is not available, for the reason in cudnnUnavailable_.
  std::unique_ptr<CudnnAttention> cudnn_;
  std::string cudnnUnavailable_;
  /// The attention choices reported so far (each line is printed once).
  std::set<std::string> reported_;
  DeviceOptions options_;
  /// With tracing: recorded once, before the first traced run, as the zero
  /// of the trace's times.
  std::unique_ptr<CudaEvent> traceOrigin_;
  bool traceOriginRecorded_ = false;
  /// One per entry, prepared on its first run.
  std::vector<std::unique_ptr<CudaEntry>> entries_;
  /// Declared after the entries, so that the groups go first: a collective
  /// abandoned by a failed run must not outlive the buffers it writes.
  SubmeshGroups groups_;
};

} // namespace megrt

#endif // MEGRT_SRC_CUDA_CUDADEVICE_H
