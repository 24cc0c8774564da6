// Whole-file reads and writes with errors that name the file.
#include "FileIO.h"

#include "Fail.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace megrt {
namespace {
struct CloseFile {
  void operator()(FILE *file) const { std::fclose(file); }
};
using FilePtr = std::unique_ptr<FILE, CloseFile>;
} // namespace

std::vector<uint8_t> readFile(const std::string &path) {
  FilePtr file(std::fopen(path.c_str(), "rb"));
  if (!file)
    fail("cannot open '", path, "' for reading: ", std::strerror(errno));
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof(chunk), file.get())) > 0)
    bytes.insert(bytes.end(), chunk, chunk + got);
  if (std::ferror(file.get()))
    fail("cannot read '", path, "': ", std::strerror(errno));
  return bytes;
}

void writeFile(const std::string &path,
               const std::vector<std::pair<const void *, size_t>> &chunks) {
  FilePtr file(std::fopen(path.c_str(), "wb"));
  if (!file)
    fail("cannot open '", path, "' for writing: ", std::strerror(errno));
  for (const auto &[data, size] : chunks)
    if (size && std::fwrite(data, 1, size, file.get()) != size)
      fail("cannot write '", path, "': ", std::strerror(errno));
  // fclose flushes; a full disk may only show up here.
  if (std::fclose(file.release()) != 0)
    fail("cannot write '", path, "': ", std::strerror(errno));
}

} // namespace megrt
