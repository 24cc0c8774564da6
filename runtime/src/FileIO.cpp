// Whole-file reads and writes with errors that name the file.
#include "FileIO.h"

#include "Fail.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace megrt {
namespace {
struct CloseFile {
  void operator()(FILE *file) const { std::fclose(file); }
};
using FilePtr = std::unique_ptr<FILE, CloseFile>;
} // namespace

std::vector<uint8_t> readFile(const std::string &path) {
  InputFile file(path);
  std::vector<uint8_t> bytes(file.size());
  file.read(0, bytes.data(), bytes.size());
  return bytes;
}

InputFile::InputFile(const std::string &path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0)
    fail("cannot open '", path, "' for reading: ", std::strerror(errno));
  struct stat info;
  if (::fstat(fd_, &info) != 0) {
    int error = errno;
    ::close(fd_);
    fail("cannot read '", path, "': ", std::strerror(error));
  }
  if (S_ISREG(info.st_mode) && info.st_size > 0) {
    size_ = static_cast<uint64_t>(info.st_size);
    return;
  }
  // A pipe or device (or a file that does not know its size, as /proc's):
  // its bytes can be read once, in order.
  uint8_t chunk[1 << 16];
  for (;;) {
    ssize_t got = ::read(fd_, chunk, sizeof(chunk));
    if (got == 0)
      break;
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      int error = errno;
      ::close(fd_);
      fail("cannot read '", path, "': ", std::strerror(error));
    }
    contents_.insert(contents_.end(), chunk, chunk + got);
  }
  size_ = contents_.size();
}

InputFile::~InputFile() { ::close(fd_); }

void InputFile::read(uint64_t offset, void *out, size_t count) const {
  if (offset > size_ || count > size_ - offset)
    fail("cannot read '", path_, "': bytes [", offset, ", ", offset + count,
         ") lie past its end (", size_, " bytes)");
  if (!contents_.empty() || count == 0) {
    if (count)
      std::memcpy(out, contents_.data() + offset, count);
    return;
  }
  auto *bytes = static_cast<uint8_t *>(out);
  while (count > 0) {
    ssize_t got = ::pread(fd_, bytes, count, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      fail("cannot read '", path_, "': ", std::strerror(errno));
    if (got == 0)
      fail("cannot read '", path_, "': it ended at byte ", offset,
           " (it changed while being read)");
    bytes += got;
    offset += static_cast<uint64_t>(got);
    count -= static_cast<size_t>(got);
  }
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
