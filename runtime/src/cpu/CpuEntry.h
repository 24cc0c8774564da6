// One entry of a program prepared for the CPU: arena, input and output
// storage, and its commands with every buffer resolved to an address.
#ifndef MEGRT_SRC_CPU_CPUENTRY_H
#define MEGRT_SRC_CPU_CPUENTRY_H

#include "cpu/CpuGemm.h"
#include "cpu/CpuModule.h"
#include "megrt/AlignedBuffer.h"
#include "megrt/Tensor.h"
#include "megrt/megc_generated.h"

#include <variant>
#include <vector>

namespace megrt {

class CpuEntry {
public:
  /// `parameters` must outlive this entry and never reallocate: buffers
  /// point into them.
  CpuEntry(const fb::Entry &entry, std::vector<Tensor> &parameters,
           const CpuModule &module);

  /// Storage the caller fills before execute() and reads after.
  std::vector<Tensor> &inputs() { return inputs_; }
  std::vector<Tensor> &outputs() { return outputs_; }

  /// Runs every command in order.
  void execute();

private:
  struct Launch {
    CpuKernelFn kernel;
    std::vector<void *> args;
  };
  struct Copy {
    const uint8_t *src;
    uint8_t *dst;
    size_t bytes;
  };
  using Command = std::variant<Launch, CpuGemm, Copy>;

  uint8_t *resolve(const fb::Buffer &buffer, std::vector<Tensor> &parameters);

  AlignedBuffer arena_;
  std::vector<Tensor> inputs_;
  std::vector<Tensor> outputs_;
  std::vector<Command> commands_;
};

} // namespace megrt

#endif // MEGRT_SRC_CPU_CPUENTRY_H
