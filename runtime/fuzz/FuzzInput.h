// What the fuzz targets share: the readers take a path, so each input is
// written to one file per process first.
#ifndef MEGRT_FUZZ_FUZZINPUT_H
#define MEGRT_FUZZ_FUZZINPUT_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace megrt::fuzz {

/// Writes `data` to this process's input file and returns its path.
inline const std::string &writeInput(const uint8_t *data, size_t size,
                                     const char *suffix) {
  static const std::string path = [&] {
    const char *dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/megrt-fuzz-" +
           std::to_string(getpid()) + suffix;
  }();
  FILE *file = std::fopen(path.c_str(), "wb");
  if (!file || (size && std::fwrite(data, 1, size, file) != size)) {
    std::perror(path.c_str());
    std::abort();
  }
  std::fclose(file);
  return path;
}

} // namespace megrt::fuzz

#endif // MEGRT_FUZZ_FUZZINPUT_H
