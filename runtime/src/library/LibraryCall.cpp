// The LibraryCall command: its checks against the kernel's signature, and
// the table that finds each kernel's hooks (megrt/LibraryKernels.def).
#include "library/LibraryCall.h"

#include "Fail.h"
#include "FbTypes.h"

#include <algorithm>

namespace megrt {
namespace {

struct Hooks {
  library::VerifyFn *verify;
  library::ScratchFn *scratch;
  library::CpuPrepareFn *cpu;
};

/// In the order of libraryKernels().
const Hooks kHooks[] = {
#define MEGRT_LIBRARY_KERNEL(symbol, reads, writes, params)                    \
  {&library::verify_##symbol, &library::scratch_##symbol,                      \
   &library::cpu_##symbol},
#include "megrt/LibraryKernels.def"
#undef MEGRT_LIBRARY_KERNEL
};

const Hooks &hooksOf(const LibraryCallInfo &call) {
  return kHooks[call.kernel - libraryKernels().data()];
}

} // namespace

const fb::Buffer *LibraryCallInfo::buffer(std::string_view name) const {
  return buffers.at(kernel->operand(name));
}

int64_t LibraryCallInfo::param(std::string_view name) const {
  return params.at(kernel->param(name));
}

DType LibraryCallInfo::dtype(std::string_view name) const {
  return toDType(buffer(name)->dtype());
}

LibraryCallInfo libraryCallOf(const fb::LibraryCall &call,
                              const fb::Entry &entry,
                              const std::string &where) {
  std::string name = toString(call.name());
  LibraryCallInfo info;
  info.kernel = findLibraryKernel(name);
  if (!info.kernel) {
    std::string known;
    for (const LibraryKernelSignature &kernel : libraryKernels())
      known += (known.empty() ? "" : ", ") + kernel.name;
    fail(where, ": no library kernel is called '", name, "' (this runtime has ",
         known, "; written by a newer compiler?)");
  }
  const LibraryKernelSignature &kernel = *info.kernel;
  if (sizeOf(call.operands()) != kernel.operands.size())
    fail(where, ": ", name, " takes ", kernel.operands.size(),
         " operands, the call passes ", sizeOf(call.operands()));
  if (sizeOf(call.params()) != kernel.params.size())
    fail(where, ": ", name, " takes ", kernel.params.size(),
         " parameters, the call passes ", sizeOf(call.params()));
  uint32_t numBuffers = sizeOf(entry.buffers());
  for (uint32_t i = 0; i < kernel.operands.size(); ++i) {
    int32_t operand = call.operands()->Get(i);
    const LibraryOperand &spec = kernel.operands[i];
    if (operand == -1 && !spec.optional)
      fail(where, ": ", name, " needs its operand ", spec.name);
    if (operand < -1 ||
        (operand >= 0 && static_cast<uint32_t>(operand) >= numBuffers))
      fail(where, ": ", spec.name, " buffer index ", operand,
           " is out of range (buffer count ", numBuffers, ")");
    info.operands.push_back(operand);
    info.buffers.push_back(
        operand >= 0 ? entry.buffers()->Get(static_cast<uint32_t>(operand))
                     : nullptr);
  }
  for (uint32_t i = 0; i < kernel.params.size(); ++i)
    info.params.push_back(call.params()->Get(i));
  return info;
}

EntryLibraryCalls libraryCallsOf(const fb::Entry &entry,
                                 const std::string &where) {
  EntryLibraryCalls result;
  result.calls.resize(sizeOf(entry.commands()));
  for (uint32_t i = 0; i < sizeOf(entry.commands()); ++i)
    if (const fb::LibraryCall *call =
            entry.commands()->Get(i)->op_as_LibraryCall()) {
      result.calls[i] =
          libraryCallOf(*call, entry, concat(where, ", command ", i));
      result.scratchBytes =
          std::max(result.scratchBytes, libraryScratchBytes(*result.calls[i]));
    }
  return result;
}

void verifyLibraryCall(const LibraryCallInfo &call, const std::string &where) {
  hooksOf(call).verify(call, where);
}

uint64_t libraryScratchBytes(const LibraryCallInfo &call) {
  return hooksOf(call).scratch(call);
}

CpuLibraryRun prepareCpuLibraryCall(const LibraryCallInfo &call,
                                    const std::vector<void *> &operands,
                                    uint8_t *scratch) {
  return hooksOf(call).cpu(call, operands, scratch);
}

} // namespace megrt
