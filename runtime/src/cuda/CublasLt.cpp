// cuBLASLt, loaded with dlopen like the driver, and the handle and
// workspace a Session's matrix products share.
#include "cuda/CublasLt.h"

#include "DynamicLibrary.h"
#include "Fail.h"

#include <dlfcn.h>
#include <type_traits>

namespace megrt {
namespace {

CublasLtLibrary loadCublasLt() {
  OpenedLibrary library = openFirstLibrary(
      toolkitLibraryCandidates(concat("libcublasLt.so.", CUBLAS_VER_MAJOR)),
      RTLD_NOW | RTLD_LOCAL);
  if (!library.handle)
    fail("Gemm commands on CUDA need cuBLASLt ", CUBLAS_VER_MAJOR,
         ", which could not be loaded (", library.reasons,
         "); set CUDA_HOME or LD_LIBRARY_PATH to the CUDA toolkit");

  CublasLtLibrary cublas;
  auto resolve = [&](const char *name, auto &function) {
    void *address = dlsym(library.handle.get(), name);
    if (!address)
      fail("'", library.path, "' has no '", name, "'; is it cuBLASLt ",
           CUBLAS_VER_MAJOR, "?");
    function =
        reinterpret_cast<std::remove_reference_t<decltype(function)>>(address);
  };
#define MEGRT_CUBLASLT_FUNCTION(name) resolve(#name, cublas.name);
#include "cuda/CublasLt.def"
#undef MEGRT_CUBLASLT_FUNCTION

  // cublasLt.h's types and enums are only guaranteed within a major version.
  size_t version = cublas.cublasLtGetVersion();
  if (version / 10000 != CUBLAS_VER_MAJOR)
    fail("'", library.path, "' is cuBLASLt ", version / 10000, ".",
         version % 10000 / 100, ", but megrt was built for cuBLASLt ",
         CUBLAS_VER_MAJOR, ".x");
  // cuBLASLt stays loaded for the life of the process.
  library.handle.release();
  return cublas;
}

} // namespace

const CublasLtLibrary &cublasLt() {
  // A failed load throws out of the initialisation, so the next call tries
  // again.
  static const CublasLtLibrary library = loadCublasLt();
  return library;
}

void checkCublas(cublasStatus_t status, const char *call,
                 const std::string &object) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return;
  const CublasLtLibrary &cublas = cublasLt();
  const char *name = cublas.cublasLtGetStatusName(status);
  const char *text = cublas.cublasLtGetStatusString(status);
  fail(object, ": ", call, " failed: ", name ? name : "cublasStatus_t ",
       name ? "" : std::to_string(status), " (", text ? text : "unknown", ")");
}

CublasLtContext::CublasLtContext(const std::string &device)
    : workspace_(kWorkspaceBytes,
                 concat("the cuBLASLt workspace on ", device)) {
  checkCublas(cublasLt().cublasLtCreate(&handle_), "cublasLtCreate", device);
}

CublasLtContext::~CublasLtContext() {
  if (handle_)
    cublasLt().cublasLtDestroy(handle_);
}

} // namespace megrt
