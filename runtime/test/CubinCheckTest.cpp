// The check that keeps the CUDA driver inside a module's cubin: real ptxas
// output passes, damaged images fail with a message.
#include "cuda/CubinCheck.h"
#include "TestDevices.h"
#include "megrt/Error.h"

#include <cstring>
#include <elf.h>
#include <gtest/gtest.h>

namespace megrt::test {
namespace {

std::string checkError(const std::vector<uint8_t> &image) {
  try {
    checkCubinImage(image.data(), image.size(), "module");
  } catch (const Error &error) {
    return error.what();
  }
  return "(accepted)";
}

class CubinCheck : public ::testing::Test {
protected:
  void SetUp() override {
    if (kEmptyModuleCubin.empty())
      GTEST_SKIP() << "the CUDA toolkit had no ptxas to build a cubin";
  }
};

TEST_F(CubinCheck, AcceptsWhatPtxasWrites) {
  EXPECT_EQ(checkError(kEmptyModuleCubin), "(accepted)");
}

TEST_F(CubinCheck, EveryTruncationFails) {
  for (size_t size = 0; size < kEmptyModuleCubin.size(); ++size) {
    std::vector<uint8_t> cut(kEmptyModuleCubin.begin(),
                             kEmptyModuleCubin.begin() + size);
    EXPECT_NE(checkError(cut), "(accepted)") << size << " bytes";
  }
}

TEST_F(CubinCheck, NamesWhatIsWrong) {
  std::vector<uint8_t> image = kEmptyModuleCubin;
  image.resize(40);
  EXPECT_EQ(checkError(image),
            "module: the cubin of 40 bytes is shorter than an ELF header");

  image = kEmptyModuleCubin;
  uint16_t machine = EM_X86_64;
  std::memcpy(image.data() + offsetof(Elf64_Ehdr, e_machine), &machine, 2);
  EXPECT_EQ(checkError(image), "module: the cubin is not a 64-bit CUDA ELF "
                               "image (ELF machine 62, expected 190)");

  image = kEmptyModuleCubin;
  image.pop_back();
  EXPECT_NE(checkError(image).find("module: the cubin of " +
                                   std::to_string(image.size()) +
                                   " bytes is truncated ("),
            std::string::npos)
      << checkError(image);

  EXPECT_EQ(checkError({'.', 'v', 'e', 'r', 's', 'i', 'o', 'n'}),
            "module: the cubin is neither a CUDA ELF image nor a fatbin");
}

TEST(CubinCheckFatbin, ChecksThePayloadSize) {
  // magic, version 1, a 16-byte header, then a payload of 32 bytes.
  std::vector<uint8_t> fatbin = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0,
                                 32,   0,    0,    0,    0, 0, 0,  0};
  fatbin.resize(48);
  EXPECT_EQ(checkError(fatbin), "(accepted)");
  fatbin.pop_back();
  EXPECT_EQ(checkError(fatbin), "module: the cubin of 47 bytes is truncated "
                                "(fatbin payload up to byte 48)");
}

} // namespace
} // namespace megrt::test
