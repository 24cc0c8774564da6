// NCCL's symbol table loads without a GPU (where the library is installed):
// every function of Nccl.def resolves and the version check passes.
#include "comm/nccl/NcclLibrary.h"

#include "megrt/Error.h"

#include <gtest/gtest.h>

namespace megrt::comm {
namespace {

TEST(NcclLibraryTest, LoadsWithItsVersion) {
  const NcclLibrary *library = nullptr;
  try {
    library = &nccl();
  } catch (const Error &error) {
    GTEST_SKIP() << "no NCCL: " << error.what();
  }
  EXPECT_EQ(library->version / 10000, NCCL_MAJOR);
  EXPECT_GE(library->version, 21800);
  ncclUniqueId id{};
  EXPECT_EQ(library->ncclGetUniqueId(&id), ncclSuccess);
  EXPECT_NE(ncclErrorText(ncclInvalidArgument, nullptr).find("ncclResult_t 4"),
            std::string::npos);
}

} // namespace
} // namespace megrt::comm
