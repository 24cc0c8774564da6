// The CPU device: entries run on the host, directly on the parameters'
// host tensors.
#include "cpu/CpuDevice.h"

#include "Fail.h"
#include "FbTypes.h"
#include "MeshLayout.h"
#include "cpu/CpuBlas.h"

#include <cstring>

namespace megrt {
namespace {
ThreadPool &poolOf(const DeviceOptions &options) {
  if (!options.pool)
    fail("a cpu device needs the session's thread pool (DeviceOptions::pool)");
  return *options.pool;
}
} // namespace

CpuDevice::CpuDevice(const Program &program, std::vector<Tensor> &parameters,
                     const DeviceOptions &options)
    : program_(program), parameters_(parameters),
      module_(flatbufferOf(program)), options_(options), pool_(poolOf(options)),
      scratch_(module_.scratchBytes()), entries_(program.entries().size()) {
  useSingleThreadedBlas();
  if (options.world)
    groups_ = connectGroups(program, *options.world, comm::MemorySpace::Host);
}

void CpuDevice::run(size_t index, const std::vector<const Tensor *> &inputs,
                    std::vector<Tensor> &outputs) {
  std::unique_ptr<CpuEntry> &entry = entries_[index];
  if (!entry) {
    const fb::Program &program = flatbufferOf(program_);
    entry = std::make_unique<CpuEntry>(
        program, *program.entries()->Get(static_cast<uint32_t>(index)),
        parameters_, module_, groups_, options_, pool_, scratch_.data());
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    std::memcpy(entry->inputs()[i].data(), inputs[i]->data(),
                inputs[i]->sizeBytes());
  // The outputs are not zeroed: a program defines every element of what it
  // returns (its values are tensors, each written whole by the commands
  // that produce it), so no result depends on a previous call. Zeroing
  // them cost a pass over each (a llama forward's 16 MB of logits: 2.5 ms
  // of 67).
  entry->execute();
  prepareOutputs(program_.entries()[index].outputs, outputs);
  for (size_t i = 0; i < outputs.size(); ++i)
    std::memcpy(outputs[i].data(), entry->outputs()[i].data(),
                outputs[i].sizeBytes());
}

} // namespace megrt
