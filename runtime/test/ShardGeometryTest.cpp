// The elements a piece of a tensor holds, and the elements two pieces
// share, against element-by-element references: each local element's place
// in the whole tensor from its multi-index (unravelled in the block,
// shifted along the block dimension, ravelled in the whole tensor).
#include "ShardGeometry.h"
#include "megrt/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <random>

namespace megrt::test {
namespace {

using ::testing::HasSubstr;

/// Whole-tensor index of each of the piece's elements, one at a time.
std::vector<int64_t> referenceIndices(const PieceGeometry &piece) {
  Shape block = piece.full;
  if (piece.dim >= 0)
    block[piece.dim] /= piece.blocks;
  std::vector<int64_t> indices;
  for (int64_t e = piece.first; e < piece.first + piece.count; ++e) {
    std::vector<int64_t> index(block.size());
    int64_t rest = e;
    for (size_t d = block.size(); d-- > 0;) {
      index[d] = rest % block[d];
      rest /= block[d];
    }
    if (piece.dim >= 0)
      index[piece.dim] += piece.block * block[piece.dim];
    int64_t global = 0;
    for (size_t d = 0; d < block.size(); ++d)
      global = global * piece.full[d] + index[d];
    indices.push_back(global);
  }
  return indices;
}

std::vector<int64_t> indicesFromRuns(const PieceGeometry &piece) {
  std::vector<int64_t> indices(static_cast<size_t>(piece.count), -1);
  for (const ElementRun &run : elementRuns(piece))
    for (int64_t i = 0; i < run.count; ++i)
      indices.at(static_cast<size_t>(run.local + i)) = run.global + i;
  return indices;
}

/// A random piece of a random tensor of `rank` dimensions (or of `full`).
PieceGeometry randomPiece(std::mt19937 &random, const Shape &full) {
  PieceGeometry piece;
  piece.full = full;
  if (random() % 3 != 0) {
    piece.dim = static_cast<int>(random() % full.size());
    std::vector<int64_t> divisors;
    for (int64_t b = 1; b <= full[piece.dim]; ++b)
      if (full[piece.dim] % b == 0)
        divisors.push_back(b);
    piece.blocks = divisors[random() % divisors.size()];
    piece.block = static_cast<int64_t>(random() % piece.blocks);
  }
  int64_t elements = piece.blockElements();
  piece.first = static_cast<int64_t>(random() % (elements + 1));
  piece.count = static_cast<int64_t>(random() % (elements - piece.first + 1));
  return piece;
}

Shape randomShape(std::mt19937 &random) {
  Shape shape(1 + random() % 4);
  for (int64_t &extent : shape)
    extent = 1 + static_cast<int64_t>(random() % 6);
  return shape;
}

TEST(ShardGeometry, RunsListEveryElementInItsPlace) {
  std::mt19937 random(3);
  for (int trial = 0; trial < 2000; ++trial) {
    PieceGeometry piece = randomPiece(random, randomShape(random));
    piece.check("piece");
    EXPECT_EQ(indicesFromRuns(piece), referenceIndices(piece))
        << "trial " << trial;
    // Runs are in increasing order and as long as they can be.
    std::vector<ElementRun> runs = elementRuns(piece);
    for (size_t r = 1; r < runs.size(); ++r)
      EXPECT_GT(runs[r].global, runs[r - 1].global + runs[r - 1].count - 1);
  }
}

TEST(ShardGeometry, SharedRunsAreTheCommonElements) {
  std::mt19937 random(5);
  for (int trial = 0; trial < 2000; ++trial) {
    Shape full = randomShape(random);
    PieceGeometry a = randomPiece(random, full), b = randomPiece(random, full);
    std::map<int64_t, std::pair<int64_t, int64_t>> want;
    std::vector<int64_t> inA = referenceIndices(a), inB = referenceIndices(b);
    std::map<int64_t, int64_t> whereB;
    for (size_t i = 0; i < inB.size(); ++i)
      whereB[inB[i]] = static_cast<int64_t>(i);
    for (size_t i = 0; i < inA.size(); ++i)
      if (auto it = whereB.find(inA[i]); it != whereB.end())
        want[inA[i]] = {static_cast<int64_t>(i), it->second};
    std::map<int64_t, std::pair<int64_t, int64_t>> got;
    int64_t total =
        forEachSharedRun(elementRuns(a), elementRuns(b),
                         [&](int64_t localA, int64_t localB, int64_t count) {
                           for (int64_t i = 0; i < count; ++i)
                             got[inA.at(static_cast<size_t>(localA + i))] = {
                                 localA + i, localB + i};
                         });
    EXPECT_EQ(got, want) << "trial " << trial;
    EXPECT_EQ(total, static_cast<int64_t>(want.size()));
  }
}

TEST(ShardGeometry, ChecksNameTheProblem) {
  PieceGeometry piece = PieceGeometry::whole({4, 6});
  piece.dim = 1;
  piece.blocks = 4;
  EXPECT_THAT([&] { piece.check("chunk 3"); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("chunk 3: block 0 of 4 along dimension 1 does not "
                            "divide the shape")));
  piece.blocks = 2;
  piece.count = 13;
  EXPECT_THAT([&] { piece.check("chunk 3"); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("elements [0, 13) are outside the 12")));
  piece.dim = 2;
  EXPECT_THAT([&] { piece.check("chunk 3"); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("block dimension 2 is outside the shape")));
}

} // namespace
} // namespace megrt::test
