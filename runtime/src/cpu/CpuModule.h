// The CPU kernels of a program: its shared object loaded from memory.
#ifndef MEGRT_SRC_CPU_CPUMODULE_H
#define MEGRT_SRC_CPU_CPUMODULE_H

#include "DynamicLibrary.h"
#include "megrt/megc_generated.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace megrt {

/// The kernel ABI: args[i] is the data pointer of the i-th argument buffer.
using CpuKernelFn = void (*)(void **args);

class CpuModule {
public:
  /// Loads program.cpu's shared object and resolves every kernel's
  /// cpu_symbol. A program without kernels needs no CPU module.
  explicit CpuModule(const fb::Program &program);

  CpuKernelFn kernel(uint32_t index) const { return kernels_[index]; }

private:
  void load(const fb::CpuModule &module);

  struct CloseFd {
    void operator()(int *fd) const;
  };
  // Declared first so that it is closed after the library is unloaded.
  std::unique_ptr<int, CloseFd> fd_;
  LibraryHandle handle_;
  std::vector<CpuKernelFn> kernels_;
};

} // namespace megrt

#endif // MEGRT_SRC_CPU_CPUMODULE_H
