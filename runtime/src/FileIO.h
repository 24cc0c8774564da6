// Whole-file reads and writes with errors that name the file.
#ifndef MEGRT_SRC_FILEIO_H
#define MEGRT_SRC_FILEIO_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace megrt {

std::vector<uint8_t> readFile(const std::string &path);

/// A file open for reading at offsets, so that a large file is read
/// straight into its destinations (a checkpoint's tensors) instead of
/// into one buffer first. A file that is not a regular one (a pipe) is
/// read whole when opened. Errors name the file.
class InputFile {
public:
  explicit InputFile(const std::string &path);
  ~InputFile();
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;

  uint64_t size() const { return size_; }
  /// Bytes [offset, offset + count) into `out`; fails if the file ends
  /// before them.
  void read(uint64_t offset, void *out, size_t count) const;

private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  /// The contents of a file that is not a regular one.
  std::vector<uint8_t> contents_;
};

/// A file written piece by piece and replaced atomically and durably, as
/// writeFile does: its data goes to a temporary name (".NAME.tmp-PID"
/// beside it) until commit() flushes it, renames it over the path and
/// flushes the directory. Destroyed uncommitted (an error, a caller that
/// gave up) it removes the temporary, and the path keeps its previous
/// file. Errors name the path.
class OutputFile {
public:
  explicit OutputFile(std::string path);
  ~OutputFile();
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;

  void write(const void *data, size_t size);
  void commit();

private:
  [[noreturn]] void abandon(const char *what, int error);

  std::string path_, temporary_;
  int fd_ = -1;
  bool committed_ = false;
};

/// Writes the chunks in order, replacing the file atomically and durably:
/// under a temporary name (".NAME.tmp-PID" beside it), flushed, renamed
/// over `path`, the directory flushed. A crash or an error (a full disk, a
/// read-only directory) leaves the previous file as it was, and the error
/// names `path`. A path that exists and is not a regular file (a pipe,
/// /dev/null) is written in place.
void writeFile(const std::string &path,
               const std::vector<std::pair<const void *, size_t>> &chunks);

/// Removes `path` if it exists and flushes its directory, so that the
/// removal is durable before what follows it; errors name `path`.
void removeFile(const std::string &path);

} // namespace megrt

#endif // MEGRT_SRC_FILEIO_H
