// The stand-in CUDA driver: the calls megrt makes (runtime/src/cuda/
// CudaDriver.def), with cuda.h's prototypes, resolved through
// cuGetProcAddress as a real driver resolves them. Device memory is host
// memory; kernels run on the GPU emulator: megc's generated kernels from
// the library MEGEMU_KERNELS names, the runtime's own from their host
// builds (RuntimeKernels.h). Every call is checked: launch configurations
// against an H100's limits, dynamic shared memory against the opt-in and
// what the kernel needs, every pointer a kernel or copy gets against the
// allocations, captures against what a capture may hold.
//
// Over 600 lines: one function per driver call megrt makes, each with its
// checks; they share the allocation table and the launch checker.

#include "RuntimeKernels.h"
#include "Standin.h"

#include <chrono>
#include <cstring>
#include <dlfcn.h>
#include <sstream>

namespace megemu::standin {
namespace {

/// The CUDA version the stand-in reports (what the toolkit here is).
constexpr int kDriverVersion = 13000;
/// Devices the stand-in has: enough for one rank per device on a node.
constexpr int kDevices = 8;
constexpr int kDefaultSharedBytes = 48 * 1024;

struct Function;

/// A loaded module: megc's generated kernels (PTX or cubin) or the
/// runtime's own (a fatbin nvcc made).
struct Module {
  bool generated;
  std::string image;
  std::map<std::string, std::unique_ptr<Function>> functions;
};

struct Function {
  std::string name;
  const KernelInfo *generated = nullptr;
  const RuntimeKernel *runtime = nullptr;
  int maxDynamicShared = kDefaultSharedBytes;
};

int capturingStreams = 0;

std::string hex(uint64_t value) {
  std::ostringstream os;
  os << "0x" << std::hex << value;
  return os.str();
}

CUresult invalid(const std::string &message) {
  return State::get().fail(CUDA_ERROR_INVALID_VALUE, message);
}

/// A call that would break a capture on the capturing thread.
CUresult refuseWhileCapturing(const char *call) {
  if (capturingStreams == 0)
    return CUDA_SUCCESS;
  return State::get().fail(
      CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
      std::string(call) + " while a stream is being captured: a capture "
                          "may hold only asynchronous work on its stream");
}

double nowMilliseconds() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The bytes of a module image: PTX text, a cubin (ELF) or a fatbin.
bool imageOf(const void *data, bool &generated, std::string &image) {
  const auto *bytes = static_cast<const unsigned char *>(data);
  uint32_t magic;
  std::memcpy(&magic, bytes, 4);
  if (magic == 0xBA55ED50u) {
    // Fatbin: a 16-byte header with the size of what follows.
    uint16_t headerSize;
    uint64_t fatSize;
    std::memcpy(&headerSize, bytes + 6, 2);
    std::memcpy(&fatSize, bytes + 8, 8);
    image.assign(reinterpret_cast<const char *>(bytes), headerSize + fatSize);
    generated = false;
    return true;
  }
  if (std::memcmp(bytes, "\x7f" "ELF", 4) == 0 && bytes[4] == 2) {
    // A 64-bit ELF: its section headers end it.
    uint64_t sectionOffset;
    uint16_t entrySize, entries;
    std::memcpy(&sectionOffset, bytes + 0x28, 8);
    std::memcpy(&entrySize, bytes + 0x3a, 2);
    std::memcpy(&entries, bytes + 0x3c, 2);
    image.assign(reinterpret_cast<const char *>(bytes),
                 sectionOffset + uint64_t(entrySize) * entries);
    generated = true;
    return true;
  }
  image = static_cast<const char *>(data);
  generated = true;
  return image.find(".version") != std::string::npos &&
         image.find(".target") != std::string::npos;
}

} // namespace
} // namespace megemu::standin

using namespace megemu::standin;
using megemu::KernelInfo;
using megemu::KernelLibrary;
using megemu::standin::State;

extern "C" {

CUresult CUDAAPI cuDriverGetVersion(int *version) {
  if (!version)
    return CUDA_ERROR_INVALID_VALUE;
  *version = kDriverVersion;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuInit(unsigned int flags) {
  return flags == 0 ? CUDA_SUCCESS : invalid("cuInit: flags must be 0");
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **name) {
  switch (error) {
  case CUDA_SUCCESS:
    *name = "CUDA_SUCCESS";
    break;
  case CUDA_ERROR_INVALID_VALUE:
    *name = "CUDA_ERROR_INVALID_VALUE";
    break;
  case CUDA_ERROR_OUT_OF_MEMORY:
    *name = "CUDA_ERROR_OUT_OF_MEMORY";
    break;
  case CUDA_ERROR_INVALID_IMAGE:
    *name = "CUDA_ERROR_INVALID_IMAGE";
    break;
  case CUDA_ERROR_INVALID_HANDLE:
    *name = "CUDA_ERROR_INVALID_HANDLE";
    break;
  case CUDA_ERROR_NOT_FOUND:
    *name = "CUDA_ERROR_NOT_FOUND";
    break;
  case CUDA_ERROR_NOT_READY:
    *name = "CUDA_ERROR_NOT_READY";
    break;
  case CUDA_ERROR_ILLEGAL_ADDRESS:
    *name = "CUDA_ERROR_ILLEGAL_ADDRESS";
    break;
  case CUDA_ERROR_LAUNCH_FAILED:
    *name = "CUDA_ERROR_LAUNCH_FAILED";
    break;
  case CUDA_ERROR_ILLEGAL_STATE:
    *name = "CUDA_ERROR_ILLEGAL_STATE";
    break;
  case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    *name = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    break;
  case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    *name = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
    break;
  default:
    *name = "CUDA_ERROR_UNKNOWN";
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **text) {
  // The stand-in's own explanation of the error it returned last.
  State &state = State::get();
  if (error != CUDA_SUCCESS && !state.message().empty()) {
    *text = state.message().c_str();
    return CUDA_SUCCESS;
  }
  return cuGetErrorName(error, text);
}

CUresult CUDAAPI cuDeviceGetCount(int *count) {
  *count = kDevices;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal) {
  if (ordinal < 0 || ordinal >= kDevices)
    return invalid("cuDeviceGet: device " + std::to_string(ordinal) +
                   " of " + std::to_string(kDevices));
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *value, CUdevice_attribute attribute,
                                      CUdevice device) {
  if (device < 0 || device >= kDevices)
    return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *value = 9;
    break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *value = 0;
    break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *value = 132;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    *value = 1024;
    break;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
    *value = 32;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
    *value = kDefaultSharedBytes;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    *value = 227 * 1024;
    break;
  default:
    return invalid("cuDeviceGetAttribute: attribute " +
                   std::to_string(attribute) +
                   " is not one the stand-in knows (add it with an H100's "
                   "value)");
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int length, CUdevice device) {
  if (device < 0 || device >= kDevices || length < 1)
    return CUDA_ERROR_INVALID_VALUE;
  std::strncpy(name, kDeviceName, static_cast<size_t>(length) - 1);
  name[length - 1] = '\0';
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *context,
                                          CUdevice device) {
  if (device < 0 || device >= kDevices)
    return CUDA_ERROR_INVALID_DEVICE;
  // One context per device; its handle only has to be distinct.
  *context = reinterpret_cast<CUcontext>(static_cast<uintptr_t>(device + 1));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice device) {
  return device >= 0 && device < kDevices ? CUDA_SUCCESS
                                          : CUDA_ERROR_INVALID_DEVICE;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image,
                                    unsigned int, CUjit_option *, void **) {
  std::lock_guard<std::recursive_mutex> lock(State::get().mutex);
  if (!image)
    return invalid("cuModuleLoadDataEx: null image");
  auto loaded = std::make_unique<Module>();
  if (!imageOf(image, loaded->generated, loaded->image))
    return State::get().fail(CUDA_ERROR_INVALID_IMAGE,
                             "cuModuleLoadDataEx: the image is neither PTX, "
                             "a cubin nor a fatbin");
  State::get().log(std::string("module ") +
                   (loaded->generated ? "generated" : "runtime") + " " +
                   std::to_string(loaded->image.size()) + " bytes");
  *module = reinterpret_cast<CUmodule>(loaded.release());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleUnload(CUmodule module) {
  delete reinterpret_cast<Module *>(module);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *function, CUmodule handle,
                                     const char *name) {
  State &state = State::get();
  std::lock_guard<std::recursive_mutex> lock(state.mutex);
  auto *module = reinterpret_cast<Module *>(handle);
  if (!module || !name)
    return CUDA_ERROR_INVALID_HANDLE;
  std::unique_ptr<Function> &slot = module->functions[name];
  if (!slot) {
    auto made = std::make_unique<Function>();
    made->name = name;
    if (module->generated) {
      // The module itself must have the entry, as on a GPU.
      if (module->image.find(name) == std::string::npos)
        return CUDA_ERROR_NOT_FOUND;
      std::string error;
      const KernelLibrary *library = state.kernels(error);
      if (!library)
        return state.fail(CUDA_ERROR_NOT_FOUND, error);
      made->generated = library->find(name);
      if (!made->generated)
        return state.fail(CUDA_ERROR_NOT_FOUND,
                          std::string("kernel '") + name +
                              "' is in the module but not in the emulator's "
                              "kernel library " + library->path() +
                              " (made from another model or compile?)");
    } else {
      made->runtime = findRuntimeKernel(name);
      if (!made->runtime)
        return state.fail(CUDA_ERROR_NOT_FOUND,
                          std::string("the runtime's kernel '") + name +
                              "' has no host build in the stand-in");
    }
    slot = std::move(made);
  }
  *function = reinterpret_cast<CUfunction>(slot.get());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction handle,
                                    CUfunction_attribute attribute,
                                    int value) {
  auto *function = reinterpret_cast<Function *>(handle);
  if (!function)
    return CUDA_ERROR_INVALID_HANDLE;
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    return invalid("cuFuncSetAttribute: attribute " +
                   std::to_string(attribute) + " is not one the stand-in knows");
  if (value < 0 || value > 227 * 1024)
    return invalid("cuFuncSetAttribute: " + std::to_string(value) +
                   " bytes of dynamic shared memory for '" + function->name +
                   "' exceed the device's 227 KiB per block");
  function->maxDynamicShared = value;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *address, size_t bytes) {
  State &state = State::get();
  std::lock_guard<std::recursive_mutex> lock(state.mutex);
  if (CUresult refused = refuseWhileCapturing("cuMemAlloc"))
    return refused;
  *address = state.allocate(bytes);
  return *address ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult CUDAAPI cuMemFree(CUdeviceptr address) {
  State &state = State::get();
  std::lock_guard<std::recursive_mutex> lock(state.mutex);
  if (CUresult refused = refuseWhileCapturing("cuMemFree"))
    return refused;
  if (address == 0)
    return CUDA_SUCCESS;
  return state.release(address)
             ? CUDA_SUCCESS
             : invalid("cuMemFree of " + hex(address) +
                       ", which no allocation starts at");
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src,
                                   size_t bytes, CUstream stream) {
  State &state = State::get();
  std::lock_guard<std::recursive_mutex> lock(state.mutex);
  if (!state.holds(dst, bytes))
    return invalid("cuMemcpyHtoDAsync of " + std::to_string(bytes) +
                   " bytes to " + hex(dst) + ", outside every allocation");
  return state.enqueue(stream, "copy to the device", [=] {
    std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes,
                                   CUstream stream) {
  State &state = State::get();
  std::lock_guard<std::recursive_mutex> lock(state.mutex);
  if (!state.holds(src, bytes))
    return invalid("cuMemcpyDtoHAsync of " + std::to_string(bytes) +
                   " bytes from " + hex(src) + ", outside every allocation");
  return state.enqueue(stream, "copy to the host", [=] {
    std::memcpy(dst, reinterpret_cast<const void *>(src), bytes);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src,
                                   size_t bytes, CUstream stream) {
  State &state = State::get();
  std::lock_guard<std::recursive_mutex> lock(state.mutex);
  if (!state.holds(src, bytes) || !state.holds(dst, bytes))
    return invalid("cuMemcpyDtoDAsync of " + std::to_string(bytes) +
                   " bytes from " + hex(src) + " to " + hex(dst) +
                   ", outside every allocation");
  if (src != dst && src < dst + bytes && dst < src + bytes)
    return invalid("cuMemcpyDtoDAsync of " + std::to_string(bytes) +
                   " bytes from " + hex(src) + " to " + hex(dst) +
                   ": the ranges overlap, which a copy does not allow");
  return state.enqueue(stream, "copy on the device", [=] {
    std::memmove(reinterpret_cast<void *>(dst),
                 reinterpret_cast<const void *>(src), bytes);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char value,
                                 size_t bytes, CUstream stream) {
  State &state = State::get();
  std::lock_guard<std::recursive_mutex> lock(state.mutex);
  if (!state.holds(dst, bytes))
    return invalid("cuMemsetD8Async of " + std::to_string(bytes) +
                   " bytes at " + hex(dst) + ", outside every allocation");
  return state.enqueue(stream, "memset", [=] {
    std::memset(reinterpret_cast<void *>(dst), value, bytes);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuStreamCreate(CUstream *stream, unsigned int) {
  *stream = reinterpret_cast<CUstream>(new Stream());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy(CUstream handle) {
  Stream *stream = State::get().stream(handle);
  if (stream && stream->capture)
    return State::get().fail(CUDA_ERROR_ILLEGAL_STATE,
                             "cuStreamDestroy of a stream being captured");
  delete stream;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream handle) {
  State &state = State::get();
  Stream *stream = state.stream(handle);
  if (stream && stream->capture)
    return state.fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                      "cuStreamSynchronize of a stream being captured");
  return state.sticky();
}

CUresult CUDAAPI cuLaunchKernel(CUfunction handle, unsigned int gridX,
                                unsigned int gridY, unsigned int gridZ,
                                unsigned int blockX, unsigned int blockY,
                                unsigned int blockZ, unsigned int sharedBytes,
                                CUstream stream, void **params, void **extra) {
  State &state = State::get();
  std::lock_guard<std::recursive_mutex> lock(state.mutex);
  if (state.sticky() != CUDA_SUCCESS)
    return state.sticky();
  auto *function = reinterpret_cast<Function *>(handle);
  if (!function)
    return CUDA_ERROR_INVALID_HANDLE;
  const std::string where = "launch of '" + function->name + "'";
  if (extra)
    return invalid(where + ": the stand-in takes kernel parameters only");
  megemu::LaunchConfig config;
  config.grid = {gridX, gridY, gridZ};
  config.block = {blockX, blockY, blockZ};
  config.dynamicSharedBytes = sharedBytes;
  std::ostringstream logLine;
  logLine << "launch " << function->name << " grid " << gridX << "," << gridY
          << "," << gridZ << " block " << blockX << "," << blockY << ","
          << blockZ << " shared " << sharedBytes;
  state.log(logLine.str());
  if (config.block.count() > 1024 || blockX > 1024 || blockY > 1024 ||
      blockZ > 64 || config.block.count() == 0 || config.grid.count() == 0 ||
      gridY > 65535 || gridZ > 65535 || gridX > 2147483647u)
    return invalid(where + ": grid (" + std::to_string(gridX) + ", " +
                   std::to_string(gridY) + ", " + std::to_string(gridZ) +
                   ") and block (" + std::to_string(blockX) + ", " +
                   std::to_string(blockY) + ", " + std::to_string(blockZ) +
                   ") exceed an H100's limits");
  if (static_cast<int>(sharedBytes) > function->maxDynamicShared)
    return invalid(where + ": " + std::to_string(sharedBytes) +
                   " bytes of dynamic shared memory, above the " +
                   std::to_string(function->maxDynamicShared) +
                   " it opted in to (cuFuncSetAttribute)");

  if (function->generated) {
    const KernelInfo &kernel = *function->generated;
    if (sharedBytes != 0)
      return invalid(where + ": launched with " +
                     std::to_string(sharedBytes) +
                     " bytes of dynamic shared memory; the kernel needs "
                     "none (its buffers are static)");
    std::vector<megemu::Argument> args;
    for (unsigned i = 0; i < kernel.args; ++i) {
      uint64_t address;
      std::memcpy(&address, params[i], sizeof(address));
      uint64_t bytes = state.bytesFrom(address);
      int64_t extent = kernel.extents[i];
      if (bytes == 0 || (extent >= 0 && uint64_t(extent) > bytes))
        return invalid(where + ": argument " + std::to_string(i) + " (" +
                       hex(address) + ") spans " + std::to_string(extent) +
                       " bytes in the kernel, but " +
                       (bytes ? std::to_string(bytes) +
                                    " bytes of its allocation follow it"
                              : std::string("no allocation holds it")));
      args.push_back({reinterpret_cast<void *>(address), bytes});
    }
    std::string error;
    const KernelLibrary *library = state.kernels(error);
    return state.enqueue(stream, where, [=, &kernel] {
      try {
        megemu::launch(*library, kernel, config, args);
      } catch (const megemu::EmulationError &e) {
        return State::get().fail(CUDA_ERROR_LAUNCH_FAILED, e.what());
      }
      return CUDA_SUCCESS;
    });
  }

  const RuntimeKernel &kernel = *function->runtime;
  std::string problem = kernel.check(params, config, state);
  if (!problem.empty())
    return invalid(where + ": " + problem);
  std::vector<uint8_t> copied = kernel.copyParams(params);
  return state.enqueue(stream, where, [=, &kernel] {
    try {
      kernel.run(copied.data(), config);
    } catch (const megemu::EmulationError &e) {
      return State::get().fail(CUDA_ERROR_LAUNCH_FAILED, e.what());
    }
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuEventCreate(CUevent *event, unsigned int) {
  *event = reinterpret_cast<CUevent>(new Event());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent event) {
  delete reinterpret_cast<Event *>(event);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent handle, CUstream stream) {
  auto *event = reinterpret_cast<Event *>(handle);
  if (!event)
    return CUDA_ERROR_INVALID_HANDLE;
  return State::get().enqueue(stream, "event record", [event] {
    event->recorded = true;
    event->milliseconds = nowMilliseconds();
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuEventElapsedTime(float *milliseconds, CUevent startHandle,
                                    CUevent endHandle) {
  auto *start = reinterpret_cast<Event *>(startHandle);
  auto *end = reinterpret_cast<Event *>(endHandle);
  if (!start || !end)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!start->recorded || !end->recorded)
    return CUDA_ERROR_INVALID_HANDLE;
  *milliseconds = static_cast<float>(end->milliseconds - start->milliseconds);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamBeginCapture(CUstream handle,
                                      CUstreamCaptureMode mode) {
  State &state = State::get();
  Stream *stream = state.stream(handle);
  if (!stream)
    return state.fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                      "cuStreamBeginCapture of the legacy default stream");
  if (stream->capture)
    return state.fail(CUDA_ERROR_ILLEGAL_STATE,
                      "cuStreamBeginCapture of a stream already captured");
  if (mode > CU_STREAM_CAPTURE_MODE_RELAXED)
    return invalid("cuStreamBeginCapture: unknown mode");
  stream->capture = new Graph();
  ++capturingStreams;
  state.log("capture begin");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamEndCapture(CUstream handle, CUgraph *graph) {
  State &state = State::get();
  Stream *stream = state.stream(handle);
  if (!stream || !stream->capture)
    return state.fail(CUDA_ERROR_ILLEGAL_STATE,
                      "cuStreamEndCapture of a stream not being captured");
  state.log("capture end " + std::to_string(stream->capture->work.size()) +
            " nodes");
  *graph = reinterpret_cast<CUgraph>(stream->capture);
  stream->capture = nullptr;
  --capturingStreams;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
                                             unsigned long long flags) {
  if (!graph)
    return CUDA_ERROR_INVALID_HANDLE;
  if (flags != 0)
    return invalid("cuGraphInstantiateWithFlags: flags the stand-in does "
                   "not know");
  auto *instance = new GraphExec();
  instance->work = reinterpret_cast<Graph *>(graph)->work;
  *exec = reinterpret_cast<CUgraphExec>(instance);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec handle, CUstream stream) {
  State &state = State::get();
  std::lock_guard<std::recursive_mutex> lock(state.mutex);
  auto *exec = reinterpret_cast<GraphExec *>(handle);
  if (!exec)
    return CUDA_ERROR_INVALID_HANDLE;
  state.log("graph launch " + std::to_string(exec->work.size()) + " nodes");
  return state.enqueue(stream, "graph launch", [exec] {
    for (auto &[what, work] : exec->work)
      if (CUresult result = work(); result != CUDA_SUCCESS)
        return result;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec exec) {
  delete reinterpret_cast<GraphExec *>(exec);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph graph) {
  delete reinterpret_cast<Graph *>(graph);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **function,
                                  int cudaVersion, cuuint64_t,
                                  CUdriverProcAddressQueryResult *status) {
  struct Entry {
    const char *name;
    void *address;
  };
  // megrt's own list of the calls it makes.
  static const Entry kEntries[] = {
#define MEGRT_CUDA_FUNCTION(name) {#name, reinterpret_cast<void *>(&name)},
#include "cuda/CudaDriver.def"
#undef MEGRT_CUDA_FUNCTION
  };
  if (status)
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (cudaVersion > kDriverVersion) {
    if (status)
      *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  }
  for (const Entry &entry : kEntries)
    if (std::strcmp(entry.name, symbol) == 0) {
      *function = entry.address;
      if (status)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  *function = nullptr;
  return CUDA_ERROR_NOT_FOUND;
}

} // extern "C"
