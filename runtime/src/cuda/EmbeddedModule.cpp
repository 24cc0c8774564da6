// A module of the runtime's own CUDA kernels loaded into a context.
#include "cuda/EmbeddedModule.h"

#include "Fail.h"
#include "cuda/CubinCheck.h"
#include "cuda/CudaDriver.h"

#include <cstring>
#include <iterator>

namespace megrt {
namespace {

/// Dynamic shared memory a launch may use without opting in.
constexpr unsigned kDefaultSharedBytes = 48 * 1024;

/// Room for the JIT's messages; longer logs are cut.
constexpr size_t kJitLogBytes = 16 * 1024;

} // namespace

EmbeddedModule::EmbeddedModule(const CudaContext &context, const uint8_t *image,
                               size_t size, std::string what)
    : context_(context), what_(std::move(what)) {
  context.makeCurrent();
  checkCubinImage(image, size, what_);
  std::string errorLog(kJitLogBytes, '\0');
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  // Sizes travel as integers cast to pointers, as the driver API specifies.
  void *values[] = {errorLog.data(), reinterpret_cast<void *>(
                                         static_cast<uintptr_t>(kJitLogBytes))};
  CUresult result = cudaDriver().cuModuleLoadDataEx(
      &module_, image, std::size(options), options, values);
  if (result != CUDA_SUCCESS) {
    module_ = nullptr;
    errorLog.resize(strnlen(errorLog.data(), errorLog.size()));
    fail(what_, ": cuModuleLoadDataEx failed: ", cudaErrorText(result),
         errorLog.empty() ? std::string() : concat("\n", errorLog));
  }
}

EmbeddedModule::~EmbeddedModule() {
  if (!module_)
    return;
  // Nothing can be reported from a destructor; a broken context was
  // reported by the call that broke it.
  context_.makeCurrentQuietly();
  cudaDriver().cuModuleUnload(module_);
}

CUfunction EmbeddedModule::function(const std::string &name,
                                    unsigned sharedBytes) const {
  const CudaDriver &driver = cudaDriver();
  CUfunction function = nullptr;
  checkCuda(driver.cuModuleGetFunction(&function, module_, name.c_str()),
            "cuModuleGetFunction", concat(what_, ", kernel '", name, "'"));
  // Above the default limit a function must opt in to its dynamic shared
  // memory before it is launched with it.
  if (sharedBytes > kDefaultSharedBytes)
    checkCuda(driver.cuFuncSetAttribute(
                  function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                  static_cast<int>(sharedBytes)),
              "cuFuncSetAttribute",
              concat(what_, ", kernel '", name, "' with ", sharedBytes,
                     " bytes of dynamic shared memory"));
  return function;
}

} // namespace megrt
