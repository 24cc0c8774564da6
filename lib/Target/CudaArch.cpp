//===- CudaArch.cpp - parsing a CUDA architecture name -----------------===//
//
// The chips from Hopper on that NVPTX and the CUDA 13 toolkit know, and the
// PTX ISA version each needs.
//
//===----------------------------------------------------------------------===//

#include "megc/Target/CudaArch.h"

#include "llvm/ADT/Twine.h"

using namespace llvm;

namespace megc {

namespace {

Error optionError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

/// Chips NVPTX and the CUDA 13 toolkit know from Hopper on, with the PTX
/// ISA version (times ten) that introduced each.
struct KnownChip {
  unsigned number, ptx;
  bool family;
};
constexpr KnownChip kChips[] = {
    {90, 80, false}, {100, 86, true}, {101, 86, true}, {103, 88, true},
    {110, 90, true}, {120, 87, true}, {121, 88, true}};

const KnownChip *findChip(unsigned number) {
  for (const KnownChip &chip : kChips)
    if (chip.number == number)
      return &chip;
  return nullptr;
}

} // namespace

std::string CudaArch::name() const {
  std::string text = "sm_" + std::to_string(number());
  if (suffix)
    text += suffix;
  return text;
}

unsigned CudaArch::ptxVersion() const {
  const KnownChip *chip = findChip(number());
  return chip ? chip->ptx : 80;
}

std::string CudaArch::ptxFeature() const {
  return "+ptx" + std::to_string(ptxVersion());
}

Expected<CudaArch> CudaArch::parse(StringRef text, StringRef what) {
  auto unsupported = [&] {
    return optionError("unsupported " + what + " '" + text +
                       "'; expected sm_90 or newer, with an optional 'a' "
                       "(architecture-specific) or 'f' (family) suffix: "
                       "sm_90, sm_90a, sm_100, sm_100a, sm_101, sm_103, "
                       "sm_110, sm_120, sm_121");
  };
  StringRef rest = text;
  if (!rest.consume_front("sm_"))
    return unsupported();
  CudaArch arch;
  if (rest.ends_with("a") || rest.ends_with("f")) {
    arch.suffix = rest.back();
    rest = rest.drop_back();
  }
  unsigned number = 0;
  if (rest.getAsInteger(10, number))
    return unsupported();
  const KnownChip *chip = findChip(number);
  if (!chip || (arch.suffix == 'f' && !chip->family))
    return unsupported();
  arch.major = number / 10;
  arch.minor = number % 10;
  return arch;
}

} // namespace megc
