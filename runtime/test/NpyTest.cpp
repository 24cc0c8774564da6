// .npy files: NumPy's exact layout, round trips and every rejection.
#include "megrt/Npy.h"
#include "TestFiles.h"
#include "megrt/Error.h"

#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megrt::test {
namespace {

using ::testing::HasSubstr;

/// A file laid out as NumPy writes it, with the header padded to 64 bytes.
std::vector<uint8_t> npyBytes(const std::string &dict,
                              const std::vector<uint8_t> &data, int major = 1) {
  size_t lengthBytes = major == 1 ? 2 : 4;
  std::string header = dict;
  size_t preamble = 8 + lengthBytes;
  while ((preamble + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::vector<uint8_t> bytes = {
      0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  for (size_t i = 0; i < lengthBytes; ++i)
    bytes.push_back(static_cast<uint8_t>((header.size() >> (8 * i)) & 0xff));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

std::string readError(const std::vector<uint8_t> &bytes) {
  std::string path = tempPath("bad.npy");
  writeBytes(path, bytes);
  try {
    readNpy(path);
  } catch (const Error &error) {
    return error.what();
  }
  return "(read)";
}

std::vector<uint8_t> zeros(size_t count) {
  return std::vector<uint8_t>(count, 0);
}

TEST(Npy, WritesNumPysExactLayout) {
  std::string path = tempPath("x.npy");
  writeNpy(path, Tensor(DType::F32, {2, 3}));
  std::vector<uint8_t> bytes = readBytes(path);
  EXPECT_EQ(bytes, npyBytes("{'descr': '<f4', 'fortran_order': False, "
                            "'shape': (2, 3), }",
                            zeros(24)));
  writeNpy(path, Tensor(DType::I64, {3}));
  EXPECT_EQ(readBytes(path), npyBytes("{'descr': '<i8', 'fortran_order': "
                                      "False, 'shape': (3,), }",
                                      zeros(24)));
  writeNpy(path, Tensor(DType::F16, {}));
  EXPECT_EQ(readBytes(path), npyBytes("{'descr': '<f2', 'fortran_order': "
                                      "False, 'shape': (), }",
                                      zeros(2)));
}

TEST(Npy, RoundTripsEveryDType) {
  std::vector<Tensor> tensors = {
      Tensor::fromFloats(DType::F32, {2, 1, 3}, testValues(6, 1)),
      Tensor::fromFloats(DType::F16, {4}, testValues(4, 2)),
      Tensor::fromFloats(DType::BF16, {2, 2}, testValues(4, 3)),
      Tensor::fromInt32({3}, {1, -7, 1 << 30}),
      Tensor::fromInt64({}, {-(1ll << 50)}),
      Tensor(DType::F32, {0, 5})};
  std::string path = tempPath("t.npy");
  for (const Tensor &tensor : tensors) {
    writeNpy(path, tensor);
    EXPECT_EQ(readNpy(path), tensor)
        << formatType(tensor.dtype(), tensor.shape());
  }
}

TEST(Npy, StoresBf16AsU2Bits) {
  std::string path = tempPath("bf16.npy");
  Tensor tensor = Tensor::fromFloats(DType::BF16, {2}, {1.0f, -2.0f});
  writeNpy(path, tensor);
  std::vector<uint8_t> bytes = readBytes(path);
  ASSERT_EQ(bytes.size(), 128u + 4u);
  std::string header(bytes.begin() + 10, bytes.begin() + 128);
  EXPECT_THAT(header, HasSubstr("'descr': '<u2'"));
  EXPECT_EQ(bytes[128], 0x80);
  EXPECT_EQ(bytes[129], 0x3f);
}

TEST(Npy, ReadsVersion2AndOtherSpellings) {
  std::vector<uint8_t> data(8);
  float values[2] = {0.5f, 4.0f};
  std::memcpy(data.data(), values, 8);
  std::string path = tempPath("v2.npy");
  writeBytes(path, npyBytes("{\"shape\": (2L,), \"fortran_order\": False, "
                            "\"descr\": \"<f4\"}",
                            data, 2));
  Tensor tensor = readNpy(path);
  EXPECT_EQ(tensor.shape(), Shape{2});
  EXPECT_EQ(tensor.toFloats(), (std::vector<float>{0.5f, 4.0f}));
}

TEST(Npy, RejectsUnsupportedContent) {
  EXPECT_THAT(readError(npyBytes("{'descr': '<f4', 'fortran_order': True, "
                                 "'shape': (2, 2), }",
                                 zeros(16))),
              HasSubstr("Fortran-order arrays are not supported"));
  EXPECT_THAT(readError(npyBytes("{'descr': '>f4', 'fortran_order': False, "
                                 "'shape': (2,), }",
                                 zeros(8))),
              HasSubstr("big-endian data ('>f4') is not supported"));
  EXPECT_THAT(readError(npyBytes("{'descr': '<f8', 'fortran_order': False, "
                                 "'shape': (2,), }",
                                 zeros(16))),
              HasSubstr("dtype '<f8' is not supported (supported: '<f4', "
                        "'<f2', '<i4', '<i8', and '<u2' read as bf16 bits)"));
  EXPECT_THAT(readError(npyBytes("{'descr': [('a', '<f4')], 'fortran_order': "
                                 "False, 'shape': (2,), }",
                                 zeros(8))),
              HasSubstr("structured dtypes are not supported"));
}

TEST(Npy, RejectsMalformedFiles) {
  std::vector<uint8_t> good = npyBytes(
      "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", zeros(12));
  std::vector<uint8_t> bytes = good;
  bytes[1] = 'X';
  EXPECT_THAT(readError(bytes), HasSubstr("is not a .npy file"));
  bytes = good;
  bytes[6] = 3;
  EXPECT_THAT(readError(bytes), HasSubstr("format version 3.0 is not "
                                          "supported (supported: 1.0, 2.0)"));
  EXPECT_THAT(readError({good.begin(), good.end() - 1}),
              HasSubstr("is truncated: i32[3] needs 12 bytes of data, found "
                        "11"));
  EXPECT_THAT(readError({good.begin(), good.begin() + 30}),
              HasSubstr("is truncated: header length 118 exceeds the 20 "
                        "bytes after it"));
  bytes = good;
  bytes.push_back(0);
  EXPECT_THAT(readError(bytes),
              HasSubstr("1 unexpected bytes after the i32[3] data"));
  EXPECT_THAT(
      readError(npyBytes("{'descr': '<i4', 'shape': (3,), }", zeros(12))),
      HasSubstr("header has no 'fortran_order'"));
  EXPECT_THAT(readError(npyBytes("{'descr': '<i4', 'fortran_order': False, "
                                 "'shape': (3,  }",
                                 zeros(12))),
              HasSubstr("malformed header at character"));
}

} // namespace
} // namespace megrt::test
