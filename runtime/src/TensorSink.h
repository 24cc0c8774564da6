//===- TensorSink.h - checkpoint files written one tensor at a time ------===//
//
// A save streams: the files' layout (names, dtypes, shapes, and so the
// headers and offsets) is known before any data, so each tensor is written
// as soon as it exists and dropped after, and no process holds a whole
// model to save it. The order in which a sink takes the tensors is a pure
// function of their list, so that ranks which only help produce the data
// (gathering sharded pieces) follow it without writing.
//
//===----------------------------------------------------------------------===//

#ifndef MEGRT_SRC_TENSORSINK_H
#define MEGRT_SRC_TENSORSINK_H

#include "megrt/Shape.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace megrt {

/// A tensor to be written: what a file's header says of it.
struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t bytes() const;
};

class TensorSink {
public:
  virtual ~TensorSink() = default;
  /// The data of the next tensor in the sink's order (its bytes()).
  virtual void add(const void *data) = 0;
  /// After the last tensor: makes the files whole and durable. A sink
  /// destroyed before leaves every earlier file as it was.
  virtual void finish() = 0;
};

/// The order a safetensors file holds its tensors' data in: by name.
std::vector<size_t> safetensorsOrder(const std::vector<TensorInfo> &tensors);

/// One safetensors file of `tensors` (their data in safetensorsOrder),
/// written as writeFile writes (atomically). `ranges`, when given,
/// receives each tensor's bytes [begin, end) from the file's start, in the
/// order of `tensors`, once finished.
std::unique_ptr<TensorSink>
openSafetensors(const std::string &path, const std::vector<TensorInfo> &tensors,
                const std::map<std::string, std::string> &metadata,
                std::vector<std::pair<uint64_t, uint64_t>> *ranges = nullptr);

} // namespace megrt

#endif // MEGRT_SRC_TENSORSINK_H
