// The CPU kernels of a program: its shared object loaded from memory.
#ifndef MEGRT_SRC_CPU_CPUMODULE_H
#define MEGRT_SRC_CPU_CPUMODULE_H

#include "DynamicLibrary.h"
#include "megrt/megc_generated.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace megrt {

/// The dispatch ABI (runtime/schema/megc.fbs, Dispatch): args[i] is the
/// pointer the dispatch's i-th argument describes; `workgroup` is in
/// [0, count).
using CpuDispatchFn = void (*)(void **args, uint32_t workgroup, uint32_t count);

class CpuModule {
public:
  /// Loads program.cpu's shared object and resolves the entry of every
  /// kernel's CPU dispatches. A program without kernels needs no CPU module.
  explicit CpuModule(const fb::Program &program);

  /// The entry of dispatch `dispatch` of kernel `kernel`.
  CpuDispatchFn dispatch(uint32_t kernel, uint32_t dispatch) const {
    return kernels_[kernel][dispatch];
  }
  /// The largest scratch area a kernel's CPU code uses.
  uint64_t scratchBytes() const { return scratchBytes_; }

private:
  void load(const fb::CpuModule &module);

  struct CloseFd {
    void operator()(int *fd) const;
  };
  // Declared first so that it is closed after the library is unloaded.
  std::unique_ptr<int, CloseFd> fd_;
  LibraryHandle handle_;
  std::vector<std::vector<CpuDispatchFn>> kernels_;
  uint64_t scratchBytes_ = 0;
};

} // namespace megrt

#endif // MEGRT_SRC_CPU_CPUMODULE_H
