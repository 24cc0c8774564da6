// The CUDA driver API, loaded with dlopen so that the runtime builds and
// runs on machines without a GPU.
#include "cuda/CudaDriver.h"

#include "DynamicLibrary.h"
#include "Fail.h"

#include <algorithm>
#include <dlfcn.h>
#include <type_traits>

namespace megrt {
namespace {

/// sm_90 code is PTX ISA 8.0, which drivers before CUDA 12.0 cannot JIT.
constexpr int kMinDriverVersion = 12000;

using GetProcAddressV2 = CUresult (*)(const char *, void **, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult *);
using GetProcAddressV1 = CUresult (*)(const char *, void **, int, cuuint64_t);

std::string versionText(int version) {
  return concat(version / 1000, ".", version % 1000 / 10);
}

std::string errorText(const CudaDriver &driver, CUresult result) {
  const char *name = nullptr, *text = nullptr;
  if (driver.cuGetErrorName(result, &name) != CUDA_SUCCESS || !name)
    return concat("CUresult ", static_cast<int>(result), " (unknown error)");
  if (driver.cuGetErrorString(result, &text) != CUDA_SUCCESS || !text)
    return name;
  return concat(name, " (", text, ")");
}

CudaDriver loadDriver() {
  OpenedLibrary library =
      openFirstLibrary({"libcuda.so.1"}, RTLD_NOW | RTLD_LOCAL);
  if (!library.handle)
    fail("CUDA device requested but no CUDA driver was found (dlopen "
         "libcuda.so.1: ",
         library.reasons, ")");

  // The one function read before the table: its answer is the highest
  // version cuGetProcAddress may be asked for.
  auto getVersion = reinterpret_cast<decltype(&::cuDriverGetVersion)>(
      dlsym(library.handle.get(), "cuDriverGetVersion"));
  CudaDriver driver;
  if (!getVersion || getVersion(&driver.version) != CUDA_SUCCESS)
    fail("the CUDA driver (libcuda.so.1) does not report its version; "
         "megrt needs a driver for CUDA ",
         versionText(kMinDriverVersion), " or newer");
  if (driver.version < kMinDriverVersion)
    fail("the CUDA driver supports CUDA ", versionText(driver.version),
         "; megrt needs CUDA ", versionText(kMinDriverVersion),
         " or newer (PTX 8.0 for sm_90); update the NVIDIA driver");

  auto getProcV2 = reinterpret_cast<GetProcAddressV2>(
      dlsym(library.handle.get(), "cuGetProcAddress_v2"));
  auto getProcV1 = reinterpret_cast<GetProcAddressV1>(
      dlsym(library.handle.get(), "cuGetProcAddress"));
  if (!getProcV2 && !getProcV1)
    fail("the CUDA driver (libcuda.so.1, CUDA ", versionText(driver.version),
         ") has no cuGetProcAddress");
  // The prototypes are those of this build's cuda.h; asking for a version
  // above the driver's is an error, and the functions used here kept their
  // ABI since CUDA 12.0.
  int abiVersion = std::min(CUDA_VERSION, driver.version);
  auto resolve = [&](const char *name, auto &function) {
    void *address = nullptr;
    CUresult result;
    if (getProcV2) {
      CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
      result = getProcV2(name, &address, abiVersion,
                         CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status);
      if (status != CU_GET_PROC_ADDRESS_SUCCESS)
        address = nullptr;
    } else {
      result = getProcV1(name, &address, abiVersion,
                         CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    }
    if (result != CUDA_SUCCESS || !address)
      fail("the CUDA driver (libcuda.so.1, CUDA ", versionText(driver.version),
           ") has no '", name, "' for CUDA ", versionText(abiVersion),
           " (cuGetProcAddress returned ", static_cast<int>(result), ")");
    function =
        reinterpret_cast<std::remove_reference_t<decltype(function)>>(address);
  };
#define MEGRT_CUDA_FUNCTION(name) resolve(#name, driver.name);
#include "cuda/CudaDriver.def"
#undef MEGRT_CUDA_FUNCTION

  if (CUresult result = driver.cuInit(0); result != CUDA_SUCCESS)
    fail("the CUDA driver (CUDA ", versionText(driver.version),
         "): cuInit failed: ", errorText(driver, result));
  // The driver stays loaded for the life of the process, as CUDA expects.
  library.handle.release();
  return driver;
}

} // namespace

const CudaDriver &cudaDriver() {
  // A failed load throws out of the initialisation, so the next call tries
  // again.
  static const CudaDriver driver = loadDriver();
  return driver;
}

std::string cudaErrorText(CUresult result) {
  return errorText(cudaDriver(), result);
}

void failCuda(CUresult result, const char *call, const std::string &object) {
  fail(object, ": ", call, " failed: ", cudaErrorText(result));
}

} // namespace megrt
