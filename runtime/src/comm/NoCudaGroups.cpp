// CUDA groups in a build of megrt without CUDA or without NCCL's header:
// there are none.
#include "Fail.h"
#include "comm/CudaGroups.h"

namespace megrt::comm {
namespace {

class NoCudaGroups : public CudaGroups {
public:
  std::unique_ptr<Group> split(int, int) override {
    fail("split of a CUDA group: this megrt was built without CUDA "
         "(MEGRT_CUDA=OFF, or no CUDA toolkit found) or without NCCL's "
         "header (set MEGRT_NCCL_INCLUDE_DIR to the directory of nccl.h), so "
         "it has no NCCL groups");
  }
};

} // namespace

std::unique_ptr<CudaGroups> makeCudaGroups(World &, double) {
  return std::make_unique<NoCudaGroups>();
}

} // namespace megrt::comm
