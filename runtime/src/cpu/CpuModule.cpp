// The CPU kernels of a program: its shared object loaded from memory.
#include "cpu/CpuModule.h"

#include "Fail.h"
#include "FbTypes.h"
#include "cpu/ElfCheck.h"
#include "megrt/CpuFeatures.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace megrt {
namespace {

const char *hostArchitecture() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return nullptr;
#endif
}

/// The architecture component of a target triple, with common aliases
/// folded ("amd64-..." is x86_64, "arm64-..." is aarch64).
std::string tripleArchitecture(const std::string &triple) {
  std::string arch = triple.substr(0, triple.find('-'));
  if (arch == "amd64")
    return "x86_64";
  if (arch == "arm64")
    return "aarch64";
  return arch;
}

void checkTriple(const std::string &triple) {
  const char *host = hostArchitecture();
  if (triple.empty() || !host)
    return;
  if (tripleArchitecture(triple) != host)
    fail("CPU module was compiled for '", triple, "', but this machine is ",
         host);
}

void writeAll(int fd, const uint8_t *data, size_t size) {
  while (size > 0) {
    ssize_t written = ::write(fd, data, size);
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0)
      fail("cannot write the CPU module to memory: ", std::strerror(errno));
    data += written;
    size -= static_cast<size_t>(written);
  }
}

} // namespace

CpuModule::CpuModule(const fb::Program &program) {
  uint32_t numKernels = sizeOf(program.kernels());
  if (numKernels == 0)
    return;
  if (!program.cpu())
    fail("program has ", numKernels,
         " kernels but no CPU module; compile it for the cpu target");
  load(*program.cpu());
  for (uint32_t i = 0; i < numKernels; ++i) {
    const fb::Kernel *kernel = program.kernels()->Get(i);
    const fb::KernelCode *code = kernel->cpu();
    if (!code || sizeOf(code->dispatches()) == 0)
      fail("kernel '", kernel->name()->str(), "' has no CPU code");
    scratchBytes_ = std::max(scratchBytes_, code->scratch_bytes());
    std::vector<CpuDispatchFn> &entries = kernels_.emplace_back();
    for (uint32_t j = 0; j < sizeOf(code->dispatches()); ++j) {
      std::string symbol = toString(code->dispatches()->Get(j)->entry());
      dlerror();
      void *address = dlsym(handle_.get(), symbol.c_str());
      if (!address)
        fail("kernel '", kernel->name()->str(), "': symbol '", symbol,
             "' is not in the CPU module");
      entries.push_back(reinterpret_cast<CpuDispatchFn>(address));
    }
  }
}

void CpuModule::load(const fb::CpuModule &module) {
  checkTriple(toString(module.target_triple()));
  std::vector<std::string> required;
  for (uint32_t i = 0; i < sizeOf(module.features()); ++i)
    required.push_back(toString(module.features()->Get(i)));
  std::vector<std::string> missing = missingCpuFeatures(required);
  if (!missing.empty()) {
    std::string names;
    for (const std::string &feature : missing)
      names += (names.empty() ? "" : ", ") + feature;
    fail("the CPU code was compiled for instruction-set extensions this "
         "CPU lacks (",
         names,
         "); recompile the model with --cpu=x86-64, or with --cpu=native on "
         "this machine");
  }
  const flatbuffers::Vector<uint8_t> *object = module.shared_object();
  if (!object)
    fail("CPU module has no shared object");
  checkSharedObjectImage(object->data(), object->size());
  int fd = memfd_create("megrt-cpu-module", MFD_CLOEXEC);
  if (fd < 0)
    fail("memfd_create failed: ", std::strerror(errno));
  fd_.reset(new int(fd));
  writeAll(fd, object->data(), object->size());
  // glibc recognises an already loaded object by its path string. The fd
  // stays open while the module is loaded so that no other module can get
  // the same /proc/self/fd path and be mistaken for this one.
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  handle_.reset(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!handle_) {
    const char *reason = dlerror();
    fail("cannot load the CPU module: ", reason ? reason : "unknown error");
  }
}

void CpuModule::CloseFd::operator()(int *fd) const {
  ::close(*fd);
  delete fd;
}

} // namespace megrt
