// The state behind megrt::Program, shared by its copies.
#ifndef MEGRT_SRC_PROGRAMIMPL_H
#define MEGRT_SRC_PROGRAMIMPL_H

#include "megrt/Program.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megrt {

struct Program::Impl {
  /// Verified FlatBuffers bytes; operator new's alignment (16) satisfies the
  /// verifier's alignment checks for 8-byte scalars.
  std::vector<uint8_t> bytes;
  uint32_t formatVersion = 0;
  std::string producer;
  std::vector<ParameterSpec> parameters;
  std::vector<EntrySpec> entries;
  std::vector<KernelSpec> kernels;
  bool hasCpuModule = false;
  bool hasCudaModule = false;
  std::optional<MeshSpec> mesh;
  std::vector<SubmeshSpec> submeshes;
  std::string hfConfig;
  std::optional<LrScheduleSpec> lrSchedule;
  uint64_t checksum = 0;
};

} // namespace megrt

#endif // MEGRT_SRC_PROGRAMIMPL_H
