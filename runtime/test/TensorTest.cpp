// Tensor construction, typed access and the checks on both.
#include "megrt/AlignedBuffer.h"
#include "megrt/Error.h"
#include "megrt/Tensor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>

namespace megrt::test {
namespace {

using ::testing::HasSubstr;

template <typename Fn> std::string errorOf(Fn fn) {
  try {
    fn();
  } catch (const Error &error) {
    return error.what();
  }
  return "(no error)";
}

TEST(Tensor, SizesFollowDTypeAndShape) {
  EXPECT_EQ(Tensor(DType::F32, {2, 3}).sizeBytes(), 24u);
  EXPECT_EQ(Tensor(DType::BF16, {2, 3}).sizeBytes(), 12u);
  EXPECT_EQ(Tensor(DType::F16, {5}).sizeBytes(), 10u);
  EXPECT_EQ(Tensor(DType::I32, {}).sizeBytes(), 4u);
  EXPECT_EQ(Tensor(DType::I64, {3, 0}).sizeBytes(), 0u);
  EXPECT_EQ(Tensor(DType::I64, {3, 0}).numElements(), 0);
  Tensor scalar;
  EXPECT_EQ(scalar.dtype(), DType::F32);
  EXPECT_EQ(scalar.numElements(), 1);
  EXPECT_EQ(scalar.dataAs<float>()[0], 0.0f);
}

TEST(Tensor, StorageIsAlignedAndZeroed) {
  Tensor tensor(DType::F16, {7});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tensor.data()) % 64, 0u);
  for (size_t i = 0; i < tensor.sizeBytes(); ++i)
    EXPECT_EQ(tensor.data()[i], 0);
  EXPECT_NE(Tensor(DType::F32, {0}).data(), nullptr);
}

TEST(Tensor, CopiesAreDeep) {
  Tensor a = Tensor::fromInt32({2}, {1, 2});
  Tensor b = a;
  b.dataAs<int32_t>()[0] = 5;
  EXPECT_EQ(a.dataAs<int32_t>()[0], 1);
  EXPECT_NE(a, b);
  b = a;
  EXPECT_EQ(a, b);
}

// A copy allocates without zeroing what it copies over: every byte of the
// source arrives, at a 64-byte boundary, for sizes that fill the last cache
// line or do not, and for empty buffers.
TEST(AlignedBuffer, CopiesKeepEveryByte) {
  for (size_t size : {size_t(1000), size_t(1024), size_t(1), size_t(0)}) {
    AlignedBuffer source(size);
    for (size_t i = 0; i < size; ++i)
      source.data()[i] = static_cast<uint8_t>(i * 37 + 11);
    AlignedBuffer copy(source);
    ASSERT_EQ(copy.size(), size);
    ASSERT_NE(copy.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(copy.data()) % kBufferAlignment, 0u);
    for (size_t i = 0; i < size; ++i)
      ASSERT_EQ(copy.data()[i], source.data()[i]) << "byte " << i;
    AlignedBuffer assigned;
    assigned = source;
    ASSERT_EQ(assigned.size(), size);
    for (size_t i = 0; i < size; ++i)
      ASSERT_EQ(assigned.data()[i], source.data()[i]) << "byte " << i;
  }
  AlignedBuffer none;
  AlignedBuffer copy(none);
  EXPECT_EQ(copy.size(), 0u);
  EXPECT_NE(copy.data(), nullptr);
}

TEST(Tensor, FromFloatsRoundsToTheDType) {
  Tensor bf16 = Tensor::fromFloats(DType::BF16, {2}, {1.0f, 1.00390625f});
  EXPECT_EQ(bf16.dataAs<uint16_t>()[0], 0x3f80);
  EXPECT_EQ(bf16.dataAs<uint16_t>()[1], 0x3f80); // tie to even
  Tensor f16 = Tensor::fromFloats(DType::F16, {1}, {-2.0f});
  EXPECT_EQ(f16.dataAs<uint16_t>()[0], 0xc000);
  EXPECT_EQ(Tensor::fromInt64({2}, {-3, 1ll << 40}).toFloats(),
            (std::vector<float>{-3.0f, 1099511627776.0f}));
}

TEST(Tensor, RejectsWrongSizesAndTypes) {
  std::vector<uint8_t> bytes(10);
  EXPECT_EQ(errorOf([&] {
              Tensor::fromBytes(DType::F32, {2, 2}, bytes.data(), 10);
            }),
            "tensor f32[2,2]: expected 16 bytes of data, found 10");
  EXPECT_EQ(errorOf([] {
              Tensor::fromFloats(DType::F32, {3}, {1, 2});
            }),
            "tensor f32[3]: expected 3 values, found 2");
  EXPECT_EQ(errorOf([] { Tensor::fromFloats(DType::I32, {1}, {1}); }),
            "Tensor::fromFloats: expected a floating-point dtype, found i32");
  EXPECT_EQ(errorOf([] { Tensor(DType::BF16, {2}).dataAs<float>(); }),
            "tensor bf16[2]: elements are not stored as float");
  EXPECT_EQ(errorOf([] { Tensor(DType::I32, {2}).dataAs<int64_t>(); }),
            "tensor i32[2]: elements are not stored as int64_t");
  EXPECT_EQ(errorOf([] {
              Tensor(DType::F32, {2, -1});
            }),
            "tensor: expected non-negative dimensions, found shape [2,-1]");
  int64_t big = std::numeric_limits<int64_t>::max() / 2;
  EXPECT_THAT(errorOf([&] {
                Tensor(DType::F32, {big, 4});
              }),
              HasSubstr("has too many elements"));
  EXPECT_THAT(errorOf([&] { Tensor(DType::F32, {big}); }),
              HasSubstr("is too large"));
}

} // namespace
} // namespace megrt::test
