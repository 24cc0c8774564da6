// libFuzzer target: the artifact loader (FlatBuffers verification, then the
// program's own checks) on any bytes. Inputs that pass FlatBuffers
// verification are resealed first, as a tool that rewrote an artifact
// would, so that the checksum does not hide the semantic checks behind it.
// Loading a program never runs its code; a Session would (artifacts are
// code), so none is made.
#include "megrt/ArtifactSeal.h"
#include "megrt/Error.h"
#include "megrt/Program.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  flatbuffers::Verifier verifier(bytes.data(), bytes.size());
  if (size >= 8 && megrt::fb::VerifyProgramBuffer(verifier))
    megrt::sealArtifact(bytes.data(), bytes.size());
  try {
    megrt::Program program = megrt::Program::fromBytes(std::move(bytes));
    (void)program.entries().size();
  } catch (const megrt::Error &) {
  }
  return 0;
}
