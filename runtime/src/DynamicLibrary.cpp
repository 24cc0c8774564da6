// Loading a shared library with dlopen from a list of candidate paths.
#include "DynamicLibrary.h"

#include "Fail.h"

#include <cstdlib>
#include <dlfcn.h>

namespace megrt {

void CloseLibrary::operator()(void *handle) const { dlclose(handle); }

OpenedLibrary openFirstLibrary(const std::vector<std::string> &candidates,
                               int flags) {
  OpenedLibrary opened;
  for (const std::string &candidate : candidates) {
    opened.handle.reset(dlopen(candidate.c_str(), flags));
    if (opened.handle) {
      opened.path = candidate;
      break;
    }
    const char *reason = dlerror();
    opened.reasons +=
        concat(opened.reasons.empty() ? "" : "; ",
               reason ? reason : candidate + ": cannot be loaded");
  }
  return opened;
}

std::vector<std::string> toolkitLibraryCandidates(const std::string &fileName) {
  std::vector<std::string> paths = {fileName};
  if (const char *home = std::getenv("CUDA_HOME"); home && *home) {
    paths.push_back(concat(home, "/lib64/", fileName));
    paths.push_back(concat(home, "/lib/", fileName));
  }
  paths.push_back("/usr/local/cuda/lib64/" + fileName);
  paths.push_back("/usr/local/cuda/lib/" + fileName);
  return paths;
}

} // namespace megrt
