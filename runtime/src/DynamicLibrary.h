// Loading a shared library with dlopen from a list of candidate paths: the
// vendor libraries and the MPI plugin, which megrt never links.
#ifndef MEGRT_SRC_DYNAMICLIBRARY_H
#define MEGRT_SRC_DYNAMICLIBRARY_H

#include <memory>
#include <string>
#include <vector>

namespace megrt {

struct CloseLibrary {
  void operator()(void *handle) const;
};

/// A dlopen handle, dlclose'd unless released to stay loaded for the life
/// of the process.
using LibraryHandle = std::unique_ptr<void, CloseLibrary>;

struct OpenedLibrary {
  /// Null when no candidate could be loaded.
  LibraryHandle handle;
  /// The candidate that was loaded.
  std::string path;
  /// dlerror's message for each candidate that did not load, joined by
  /// "; ": empty when the first one loaded or there were none.
  std::string reasons;
};

/// dlopen(candidate, flags) for each candidate in order; keeps the first
/// that loads.
OpenedLibrary openFirstLibrary(const std::vector<std::string> &candidates,
                               int flags);

/// The places a CUDA toolkit library named `fileName` (with its major
/// version, "libcublasLt.so.13") is looked for, in order: the loader's
/// search path, then $CUDA_HOME/lib64 and $CUDA_HOME/lib,
/// /usr/local/cuda/lib64 and
/// /usr/local/cuda/lib (the toolkit's lib64 is often not on the loader's
/// path).
std::vector<std::string> toolkitLibraryCandidates(const std::string &fileName);

} // namespace megrt

#endif // MEGRT_SRC_DYNAMICLIBRARY_H
