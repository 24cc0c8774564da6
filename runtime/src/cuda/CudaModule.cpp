// The CUDA kernels of a program: its PTX or cubin loaded into a context.
#include "cuda/CudaModule.h"

#include "Fail.h"
#include "FbTypes.h"
#include "cuda/CubinCheck.h"
#include "cuda/CudaDriver.h"

#include <cctype>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <utility>

namespace megrt {
namespace {

/// Dynamic shared memory a launch may use without opting in.
constexpr uint32_t kDefaultSharedBytes = 48 * 1024;

/// Room for the JIT's messages; longer logs are cut.
constexpr size_t kJitLogBytes = 16 * 1024;

/// The compute capability of "sm_XY" (X may have two digits, and an "a" or
/// "f" suffix may follow), or nullopt for any other text.
std::optional<std::pair<int, int>> parseArch(const std::string &arch) {
  const std::string prefix = "sm_";
  if (arch.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  size_t end = prefix.size();
  int number = 0;
  while (end < arch.size() && end < prefix.size() + 4 &&
         std::isdigit(static_cast<unsigned char>(arch[end])))
    number = number * 10 + (arch[end++] - '0');
  bool suffixOk =
      end == arch.size() ||
      (end + 1 == arch.size() && (arch[end] == 'a' || arch[end] == 'f'));
  if (end - prefix.size() < 2 || !suffixOk)
    return std::nullopt;
  return std::pair{number / 10, number % 10};
}

} // namespace

CudaModule::CudaModule(const fb::Program &program, const CudaContext &context) {
  if (!program.cuda())
    fail("the artifact has no CUDA code (compile with --target=cpu,cuda)");
  load(*program.cuda(), context);
  try {
    resolve(program);
  } catch (...) {
    cudaDriver().cuModuleUnload(module_);
    throw;
  }
}

CudaModule::~CudaModule() { cudaDriver().cuModuleUnload(module_); }

void CudaModule::load(const fb::CudaModule &module,
                      const CudaContext &context) {
  std::string arch = toString(module.arch());
  std::optional<std::pair<int, int>> target = parseArch(arch);
  bool useCubin =
      sizeOf(module.cubin()) > 0 && target &&
      *target == std::pair{context.computeMajor(), context.computeMinor()};
  std::string ptx = toString(module.ptx());
  if (!useCubin && ptx.empty())
    fail("the artifact's CUDA module has no PTX, and ",
         sizeOf(module.cubin()) ? concat("its cubin is for '", arch, "'")
                                : std::string("no cubin"),
         "; it cannot run on ", context.description());

  // The driver reads the image in place: copy the cubin out of the
  // artifact, where FlatBuffers aligns it to 4 bytes only, into memory
  // aligned for any ELF field.
  std::vector<uint64_t> cubin;
  const void *image = ptx.c_str();
  if (useCubin) {
    checkCubinImage(
        module.cubin()->data(), module.cubin()->size(),
        concat("the artifact's CUDA module (cubin for ", arch, ")"));
    cubin.resize((module.cubin()->size() + 7) / 8);
    std::memcpy(cubin.data(), module.cubin()->data(), module.cubin()->size());
    image = cubin.data();
  }
  std::string errorLog(kJitLogBytes, '\0'), infoLog(kJitLogBytes, '\0');
  CUjit_option options[] = {
      CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
      CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  // Sizes travel as integers cast to pointers, as the driver API specifies.
  void *values[] = {
      errorLog.data(),
      reinterpret_cast<void *>(static_cast<uintptr_t>(kJitLogBytes)),
      infoLog.data(),
      reinterpret_cast<void *>(static_cast<uintptr_t>(kJitLogBytes))};
  CUresult result = cudaDriver().cuModuleLoadDataEx(
      &module_, image, sizeof(options) / sizeof(options[0]), options, values);
  if (result != CUDA_SUCCESS) {
    errorLog.resize(strnlen(errorLog.data(), errorLog.size()));
    fail("loading the artifact's CUDA module (",
         useCubin ? concat("cubin for ", arch)
                  : concat("PTX for '", arch, "', compiled by the driver"),
         ") on ", context.description(),
         ": cuModuleLoadDataEx failed: ", cudaErrorText(result),
         errorLog.empty() ? std::string() : concat("\n", errorLog));
  }
}

void CudaModule::resolve(const fb::Program &program) {
  const CudaDriver &driver = cudaDriver();
  // The largest dynamic shared memory each function is launched with.
  std::map<CUfunction, std::pair<uint32_t, std::string>> sharedBytes;
  for (uint32_t i = 0; i < sizeOf(program.kernels()); ++i) {
    const fb::Kernel &kernel = *program.kernels()->Get(i);
    std::vector<CUfunction> &functions = functions_.emplace_back();
    const auto *dispatches =
        kernel.cuda() ? kernel.cuda()->dispatches() : nullptr;
    for (uint32_t j = 0; j < sizeOf(dispatches); ++j) {
      const fb::Dispatch &launch = *dispatches->Get(j);
      std::string entry = launch.entry()->str();
      std::string where = concat("kernel '", kernel.name()->str(),
                                 "', CUDA dispatch ", j, " ('", entry, "')");
      CUfunction function = nullptr;
      CUresult result =
          driver.cuModuleGetFunction(&function, module_, entry.c_str());
      if (result == CUDA_ERROR_NOT_FOUND)
        fail(where, ": the CUDA module has no entry '", entry, "'");
      checkCuda(result, "cuModuleGetFunction", where);
      functions.push_back(function);
      auto &[bytes, user] = sharedBytes[function];
      if (launch.shared_bytes() > bytes) {
        bytes = launch.shared_bytes();
        user = where;
      }
    }
  }
  // Above the default limit a function must opt in to its dynamic shared
  // memory before it is launched with it.
  for (const auto &[function, use] : sharedBytes)
    if (use.first > kDefaultSharedBytes)
      checkCuda(driver.cuFuncSetAttribute(
                    function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    static_cast<int>(use.first)),
                "cuFuncSetAttribute",
                concat(use.second, " with ", use.first,
                       " bytes of dynamic shared memory"));
}

} // namespace megrt
