// libFuzzer target: readNpy on any bytes either returns a tensor whose size
// matches its shape or throws megrt::Error; it never crashes, reads out of
// bounds or allocates what the file does not hold.
#include "FuzzInput.h"

#include "megrt/Error.h"
#include "megrt/Npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = megrt::fuzz::writeInput(data, size, ".npy");
  try {
    megrt::Tensor tensor = megrt::readNpy(path);
    if (tensor.sizeBytes() > size)
      __builtin_trap(); // more data than the file holds
  } catch (const megrt::Error &) {
  }
  return 0;
}
