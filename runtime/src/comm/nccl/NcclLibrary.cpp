// NCCL, loaded with dlopen like the CUDA driver.
#include "comm/nccl/NcclLibrary.h"

#include "DynamicLibrary.h"
#include "Fail.h"
#include "comm/Collective.h"
#include "comm/PeerWatch.h"

#include <dlfcn.h>
#include <thread>
#include <type_traits>
#include <vector>

namespace megrt::comm {
namespace {

/// ncclCommSplit and nonblocking communicators (ncclConfig_t.blocking).
constexpr int kMinVersion = 21800;

std::string versionText(int version) {
  return concat(version / 10000, ".", version % 10000 / 100, ".",
                version % 100);
}

NcclLibrary loadNccl() {
  OpenedLibrary library = openFirstLibrary(
      toolkitLibraryCandidates(concat("libnccl.so.", NCCL_MAJOR)),
      RTLD_NOW | RTLD_LOCAL);
  if (!library.handle)
    fail("CUDA groups need NCCL ", NCCL_MAJOR, ", which could not be loaded (",
         library.reasons,
         "); install NCCL, or set CUDA_HOME or LD_LIBRARY_PATH to where "
         "libnccl.so.",
         NCCL_MAJOR, " is");

  NcclLibrary nccl;
  auto resolve = [&](const char *name, auto &function) {
    void *address = dlsym(library.handle.get(), name);
    if (!address)
      fail("'", library.path, "' has no '", name, "'; is it NCCL ", NCCL_MAJOR,
           "?");
    function =
        reinterpret_cast<std::remove_reference_t<decltype(function)>>(address);
  };
#define MEGRT_NCCL_FUNCTION(name) resolve(#name, nccl.name);
#include "comm/nccl/Nccl.def"
#undef MEGRT_NCCL_FUNCTION

  // nccl.h's types and enums are only guaranteed within a major version.
  if (nccl.ncclGetVersion(&nccl.version) != ncclSuccess)
    fail("'", library.path, "': ncclGetVersion failed");
  if (nccl.version / 10000 != NCCL_MAJOR || nccl.version < kMinVersion)
    fail("'", library.path, "' is NCCL ", versionText(nccl.version),
         ", but megrt needs NCCL ", NCCL_MAJOR, ".x from ",
         versionText(kMinVersion), " on (ncclCommSplit)");
  // NCCL stays loaded for the life of the process.
  library.handle.release();
  return nccl;
}

} // namespace

const NcclLibrary &nccl() {
  // A failed load throws out of the initialisation, so the next call tries
  // again.
  static const NcclLibrary library = loadNccl();
  return library;
}

std::string ncclErrorText(ncclResult_t result, ncclComm_t comm) {
  const NcclLibrary &library = nccl();
  const char *text = library.ncclGetErrorString(result);
  const char *last = library.ncclGetLastError(comm);
  return concat(text ? text : "unknown NCCL error", " (ncclResult_t ",
                static_cast<int>(result), ")",
                last && *last ? concat("; ", last) : std::string());
}

void checkNccl(ncclResult_t result, const char *call, ncclComm_t comm,
               const std::string &object) {
  if (result != ncclSuccess && result != ncclInProgress)
    fail(object, ": ", call, " failed: ", ncclErrorText(result, comm));
}

void waitForNccl(ncclComm_t comm,
                 std::chrono::steady_clock::time_point deadline,
                 double timeoutSeconds, const std::string &what,
                 const std::function<bool()> &done) {
  const NcclLibrary &library = nccl();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t result = library.ncclCommGetAsyncError(comm, &state);
    if (result != ncclSuccess)
      state = result;
    if (state != ncclSuccess && state != ncclInProgress) {
      std::string text = ncclErrorText(state, comm);
      library.ncclCommAbort(comm);
      fail(what, ": NCCL failed: ", text);
    }
    if (state == ncclSuccess && done())
      return;
    if (std::optional<std::string> dead = deadPeer()) {
      library.ncclCommAbort(comm);
      fail(deadPeerMessage(what, *dead));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      library.ncclCommAbort(comm);
      fail(timeoutMessage(what, timeoutSeconds));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void completeNccl(ncclResult_t result, const char *call, ncclComm_t comm,
                  std::chrono::steady_clock::time_point deadline,
                  double timeoutSeconds, const std::string &what) {
  if (result != ncclSuccess && result != ncclInProgress) {
    std::string text = ncclErrorText(result, comm);
    nccl().ncclCommAbort(comm);
    fail(what, ": ", call, " failed: ", text);
  }
  waitForNccl(comm, deadline, timeoutSeconds, what);
}

} // namespace megrt::comm
