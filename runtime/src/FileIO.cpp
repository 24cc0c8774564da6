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

namespace {

/// Writes all of `size` bytes at `data` to `fd`.
bool writeAll(int fd, const void *data, size_t size) {
  const auto *bytes = static_cast<const uint8_t *>(data);
  while (size > 0) {
    ssize_t wrote = ::write(fd, bytes, size);
    if (wrote < 0 && errno == EINTR)
      continue;
    if (wrote <= 0)
      return false;
    bytes += wrote;
    size -= static_cast<size_t>(wrote);
  }
  return true;
}

/// The directory of `path` ("." for a bare name).
std::string directoryOf(const std::string &path) {
  std::string::size_type slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// Flushes a directory's entries (a rename into it) to the disk.
void syncDirectory(const std::string &dir, const std::string &path) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    fail("cannot flush the directory of '", path, "': ", std::strerror(errno));
  int result = ::fsync(fd);
  int error = errno;
  ::close(fd);
  // Some file systems cannot flush a directory; the rename is done anyway.
  if (result != 0 && error != EINVAL && error != EROFS)
    fail("cannot flush the directory of '", path, "': ", std::strerror(error));
}

/// A path that is not a regular file to replace (a terminal, a pipe,
/// /dev/null): written in place.
bool isSpecialFile(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode);
}

} // namespace

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  // A path that is not a regular file (a pipe, /dev/null) is written in
  // place; anything else under a temporary name in the same directory,
  // flushed, then renamed over `path` and the directory flushed: a crash
  // or a full disk leaves either the previous file or the whole new one,
  // never a part.
  bool inPlace = isSpecialFile(path_);
  if (!inPlace) {
    std::string::size_type slash = path_.rfind('/');
    std::string name =
        slash == std::string::npos ? path_ : path_.substr(slash + 1);
    temporary_ =
        concat(slash == std::string::npos ? "" : directoryOf(path_) + "/", ".",
               name, ".tmp-", ::getpid());
  }
  const std::string &target = inPlace ? path_ : temporary_;
  fd_ = ::open(target.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0)
    fail("cannot open '", path_, "' for writing: ", std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (fd_ >= 0)
    ::close(fd_);
  if (!committed_ && !temporary_.empty())
    ::unlink(temporary_.c_str());
}

void OutputFile::abandon(const char *what, int error) {
  ::close(fd_);
  fd_ = -1;
  if (!temporary_.empty())
    ::unlink(temporary_.c_str());
  fail("cannot ", what, " '", path_, "': ", std::strerror(error ? error : EIO),
       temporary_.empty() ? "" : " (the file is unchanged)");
}

void OutputFile::write(const void *data, size_t size) {
  if (fd_ < 0)
    fail("cannot write '", path_, "': it was abandoned or committed");
  if (size && !writeAll(fd_, data, size))
    abandon("write", errno);
}

void OutputFile::commit() {
  if (fd_ < 0)
    fail("cannot write '", path_, "': it was abandoned or committed");
  if (temporary_.empty()) {
    int result = ::close(fd_);
    fd_ = -1;
    if (result != 0)
      fail("cannot write '", path_, "': ", std::strerror(errno));
    committed_ = true;
    return;
  }
  // A full disk may only show up when the data is flushed.
  if (::fsync(fd_) != 0)
    abandon("write", errno);
  int result = ::close(fd_);
  fd_ = -1;
  if (result != 0) {
    int error = errno;
    ::unlink(temporary_.c_str());
    fail("cannot write '", path_, "': ", std::strerror(error),
         " (the file is unchanged)");
  }
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) {
    int error = errno;
    ::unlink(temporary_.c_str());
    fail("cannot replace '", path_, "': ", std::strerror(error),
         " (the file is unchanged)");
  }
  committed_ = true;
  syncDirectory(directoryOf(path_), path_);
}

void writeFile(const std::string &path,
               const std::vector<std::pair<const void *, size_t>> &chunks) {
  OutputFile file(path);
  for (const auto &[data, size] : chunks)
    file.write(data, size);
  file.commit();
}

void removeFile(const std::string &path) {
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT)
      return;
    fail("cannot remove '", path, "': ", std::strerror(errno));
  }
  syncDirectory(directoryOf(path), path);
}

} // namespace megrt
