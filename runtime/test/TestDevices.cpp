// The devices that tests run on, and why one may be unavailable here.
#include "TestDevices.h"

#include "megrt/Error.h"
#include "megrt/Session.h"

#if MEGRT_WITH_CUDA
#include "Fail.h"
#include "cuda/CudaDriver.h"
#endif

namespace megrt::test {

const char *const kEmptyPtx = ".version 8.0\n.target sm_90\n.address_size 64\n";

std::vector<std::string> testDevices() { return supportedDevices(); }

std::string cudaKernelsUnavailable(const std::function<void()> &load) {
  std::string reason = deviceUnavailable("cuda");
  if (!reason.empty())
    return reason;
  try {
    load();
  } catch (const Error &error) {
    if (std::string(error.what()).find("built without nvcc") ==
        std::string::npos)
      throw;
    return error.what();
  }
  return "";
}

std::string deviceUnavailable(const std::string &device) {
  if (device == "cpu")
    return "";
#if MEGRT_WITH_CUDA
  try {
    const CudaDriver &driver = cudaDriver();
    int count = 0;
    checkCuda(driver.cuDeviceGetCount(&count), "cuDeviceGetCount", "probe");
    if (count == 0)
      return "the CUDA driver sees no device";
    CUdevice cuda;
    int major = 0;
    checkCuda(driver.cuDeviceGet(&cuda, 0), "cuDeviceGet", "probe");
    checkCuda(driver.cuDeviceGetAttribute(
                  &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cuda),
              "cuDeviceGetAttribute", "probe");
    if (major < 9)
      return concat("cuda:0 has compute capability ", major,
                    ".x; the test kernels are PTX for sm_90");
    return "";
  } catch (const Error &error) {
    return error.what();
  }
#else
  return "this runtime was built without CUDA support";
#endif
}

} // namespace megrt::test
