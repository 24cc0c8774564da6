// Whole-file reads and writes with errors that name the file.
#ifndef MEGRT_SRC_FILEIO_H
#define MEGRT_SRC_FILEIO_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace megrt {

std::vector<uint8_t> readFile(const std::string &path);

/// Writes the chunks in order, replacing the file.
void writeFile(const std::string &path,
               const std::vector<std::pair<const void *, size_t>> &chunks);

} // namespace megrt

#endif // MEGRT_SRC_FILEIO_H
