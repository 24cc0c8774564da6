// The artifact's LibraryCall command and the runtime's library kernels: what
// every backend needs to verify, size and run a call, found through the one
// list megrt/LibraryKernels.def.
#ifndef MEGRT_SRC_LIBRARY_LIBRARYCALL_H
#define MEGRT_SRC_LIBRARY_LIBRARYCALL_H

#include "megrt/DType.h"
#include "megrt/LibraryKernels.h"
#include "megrt/megc_generated.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace megrt {

class ThreadPool;

/// A LibraryCall of an entry with its kernel's signature and its operands'
/// buffers. Made by libraryCallOf, which checks what the signature says (a
/// known kernel, operand and parameter counts, buffer indices in range, only
/// optional operands left out); the kernel's verify hook checks the rest.
struct LibraryCallInfo {
  const LibraryKernelSignature *kernel = nullptr;
  /// Per operand: its buffer index, or -1 when left out.
  std::vector<int32_t> operands;
  /// Per operand: its buffer, or null when left out.
  std::vector<const fb::Buffer *> buffers;
  std::vector<int64_t> params;

  /// Operand or parameter `name` of the kernel's signature.
  const fb::Buffer *buffer(std::string_view name) const;
  int64_t param(std::string_view name) const;
  /// The dtype of operand `name` (which must be present).
  DType dtype(std::string_view name) const;
};

/// `call` of `entry`, checked against its kernel's signature; fails naming
/// `where`.
LibraryCallInfo libraryCallOf(const fb::LibraryCall &call,
                              const fb::Entry &entry, const std::string &where);

/// Per command of `entry` (named `where`), its LibraryCall or nothing, and
/// the largest scratch any call needs (one area, which the calls share).
struct EntryLibraryCalls {
  std::vector<std::optional<LibraryCallInfo>> calls;
  uint64_t scratchBytes = 0;
};
EntryLibraryCalls libraryCallsOf(const fb::Entry &entry,
                                 const std::string &where);

/// The kernel's own checks of a call (dtypes and extents of its operands
/// against its parameters); fails naming `where`.
void verifyLibraryCall(const LibraryCallInfo &call, const std::string &where);

/// Bytes of scratch the call needs while it runs (the runtime's, aligned to
/// 64 bytes, shared by the entry's calls, which run one at a time).
uint64_t libraryScratchBytes(const LibraryCallInfo &call);

/// A call prepared for the CPU: its operands' addresses (null when left
/// out) and the scratch resolved once; runs on the pool's threads.
using CpuLibraryRun = std::function<void(ThreadPool &)>;
CpuLibraryRun prepareCpuLibraryCall(const LibraryCallInfo &call,
                                    const std::vector<void *> &operands,
                                    uint8_t *scratch);

namespace library {
// Each kernel's hooks (LibraryKernels.def names them).
using VerifyFn = void(const LibraryCallInfo &, const std::string &);
using ScratchFn = uint64_t(const LibraryCallInfo &);
using CpuPrepareFn = CpuLibraryRun(const LibraryCallInfo &,
                                   const std::vector<void *> &, uint8_t *);
#define MEGRT_LIBRARY_KERNEL(symbol, reads, writes, params)                    \
  VerifyFn verify_##symbol;                                                    \
  ScratchFn scratch_##symbol;                                                  \
  CpuPrepareFn cpu_##symbol;
#include "megrt/LibraryKernels.def"
#undef MEGRT_LIBRARY_KERNEL
} // namespace library

} // namespace megrt

#endif // MEGRT_SRC_LIBRARY_LIBRARYCALL_H
