// Reading and writing tensors in the safetensors format.
#ifndef MEGRT_SAFETENSORS_H
#define MEGRT_SAFETENSORS_H

#include "megrt/Tensor.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace megrt {

/// Reads every tensor of the file. Supports dtypes F32, BF16, F16, I32 and
/// I64; anything else, a truncated file, a malformed header or data offsets
/// that do not tile the data section exactly is an error naming the file.
/// `metadata`, when given, receives the header's "__metadata__" strings.
std::map<std::string, Tensor>
readSafetensors(const std::string &path,
                std::map<std::string, std::string> *metadata = nullptr);

/// Checks what readSafetensors checks without reading the tensors' data: a
/// whole header whose tensors tile a data section that the file holds
/// entirely (a file cut short by a crash fails). Errors name the file.
void checkSafetensors(const std::string &path);

/// Writes the tensors in name order with an 8-byte aligned header, as
/// writeFile writes (atomically: the file is whole or not there).
/// `metadata` becomes the header's "__metadata__" object when not empty.
void writeSafetensors(const std::string &path,
                      const std::map<std::string, Tensor> &tensors,
                      const std::map<std::string, std::string> &metadata = {});

/// The same for tensors held elsewhere, by name (each name once): written
/// from where they are, without a copy, so that saving a large model does
/// not need its size again in memory.
void writeSafetensors(
    const std::string &path,
    const std::vector<std::pair<std::string, const Tensor *>> &tensors,
    const std::map<std::string, std::string> &metadata = {});

/// A tensor to write by its dtype, shape and data (held elsewhere).
struct SafetensorsEntry {
  std::string name;
  DType dtype;
  Shape shape;
  const void *data;
};

/// The same for tensors given by their data: returns each entry's bytes
/// [begin, end) in the file, from its start (in the order given), so that
/// a record of the file can point into it.
std::vector<std::pair<uint64_t, uint64_t>>
writeSafetensors(const std::string &path,
                 const std::vector<SafetensorsEntry> &entries,
                 const std::map<std::string, std::string> &metadata = {});

} // namespace megrt

#endif // MEGRT_SAFETENSORS_H
