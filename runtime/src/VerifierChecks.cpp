// Checks shared by program and entry verification (VerifierChecks.h).
#include "VerifierChecks.h"

#include "Fail.h"
#include "FbTypes.h"

#include <cstdio>

namespace megrt {

void checkPrintableName(const std::string &name, const std::string &what) {
  for (size_t i = 0; i < name.size(); ++i) {
    auto byte = static_cast<unsigned char>(name[i]);
    if (byte <= 0x20 || byte >= 0x7F) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02x", byte);
      fail(what, " has a name with byte ", hex, " at ", i,
           ", which is not printable ASCII");
    }
  }
}

void checkUniqueName(std::set<std::string> &seen, const std::string &name,
                     const std::string &what) {
  if (name.empty())
    fail(what, " has an empty name");
  checkPrintableName(name, what);
  if (!seen.insert(name).second)
    fail(what, ": name '", name, "' is used twice");
}

uint64_t checkedTensorBytes(fb::DType dtype,
                            const flatbuffers::Vector<int64_t> *shape,
                            const std::string &what) {
  if (!isValid(dtype))
    fail(what, ": invalid dtype value ", static_cast<int>(dtype));
  return byteSize(toDType(dtype), toShape(shape), what);
}

void verifyTensorSpecs(
    const flatbuffers::Vector<flatbuffers::Offset<fb::TensorSpec>> *specs,
    bool isInput, const MeshVerifier &mesh, const std::string &what) {
  std::set<std::string> names;
  for (uint32_t i = 0; i < sizeOf(specs); ++i) {
    const fb::TensorSpec *spec = specs->Get(i);
    std::string where = concat(what, " ", i);
    checkUniqueName(names, toString(spec->name()), where);
    where = concat(what, " '", spec->name()->str(), "'");
    checkedTensorBytes(spec->dtype(), spec->shape(), where);
    mesh.verifySplit(*spec, isInput, where);
  }
}

} // namespace megrt
