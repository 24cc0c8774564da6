// libFuzzer target: readSafetensors on any bytes either returns tensors
// whose data fits in the file or throws megrt::Error; never a crash, an
// out-of-bounds read or an allocation beyond the file.
#include "FuzzInput.h"

#include "megrt/Error.h"
#include "megrt/Safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path =
      megrt::fuzz::writeInput(data, size, ".safetensors");
  try {
    std::map<std::string, std::string> metadata;
    size_t total = 0;
    for (const auto &[name, tensor] : megrt::readSafetensors(path, &metadata))
      total += tensor.sizeBytes();
    if (total > size)
      __builtin_trap();
  } catch (const megrt::Error &) {
  }
  return 0;
}
