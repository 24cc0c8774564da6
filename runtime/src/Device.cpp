// Chooses a Session's device by name and creates it.
#include "Device.h"

#include "Fail.h"
#include "comm/Communicator.h"
#include "cpu/CpuDevice.h"
#include "megrt/Session.h"

#if MEGRT_WITH_CUDA
#include "cuda/CudaDevice.h"
#endif

#include <optional>

namespace megrt {
namespace {

[[noreturn]] void failUnknownDevice(const std::string &name) {
  std::string supported;
  for (const std::string &device : supportedDevices())
    supported += (supported.empty() ? "" : ", ") + device;
#if MEGRT_WITH_CUDA
  supported += " (cuda:N selects CUDA device N)";
#endif
  fail("unknown device '", name, "'; this runtime supports: ", supported);
}

#if MEGRT_WITH_CUDA
/// The N of "cuda:N", or for "cuda" the local rank of a multi-rank world
/// (one GPU per rank) and 0 otherwise; nullopt if `name` is neither.
std::optional<int> cudaOrdinal(const std::string &name,
                               const comm::World *world) {
  if (name == "cuda")
    return world && world->size() > 1 ? world->localRank() : 0;
  const std::string prefix = "cuda:";
  if (name.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  std::string digits = name.substr(prefix.size());
  // Nine digits always fit an int.
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoi(digits);
}
#endif

} // namespace

// Declared in megrt/Session.h; defined here with the devices it lists.
void prepareOutputs(const std::vector<TensorSpec> &specs,
                    std::vector<Tensor> &outputs) {
  outputs.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i)
    if (outputs[i].dtype() != specs[i].dtype ||
        outputs[i].shape() != specs[i].shape)
      outputs[i] = Tensor(specs[i].dtype, specs[i].shape);
}

std::vector<std::string> supportedDevices() {
#if MEGRT_WITH_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

std::unique_ptr<Device> createDevice(const std::string &name,
                                     const Program &program,
                                     std::vector<Tensor> &parameters,
                                     const DeviceOptions &options) {
  if (name == "cpu")
    return std::make_unique<CpuDevice>(program, parameters, options);
#if MEGRT_WITH_CUDA
  if (std::optional<int> ordinal = cudaOrdinal(name, options.world))
    return std::make_unique<CudaDevice>(program, *ordinal, parameters, options);
#endif
  failUnknownDevice(name);
}

} // namespace megrt
