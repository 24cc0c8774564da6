// The data each rank contributes to a collective in the multi-rank tests: a
// known function of the rank and the index, chosen so that every partial
// sum is exact in bf16 (halves up to 64), whatever order MPI or NCCL add
// in. Tests compute the expected results from it independently.
#ifndef MEGRT_TEST_COMM_RANKVALUES_H
#define MEGRT_TEST_COMM_RANKVALUES_H

#include "megrt/HalfFloat.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace megrt::test {

/// (rank + 1) * (i mod 7 - 3) / 2: halves in [-6, 6] for four ranks.
inline float rankValue(int rank, size_t i) {
  return static_cast<float>(rank + 1) *
         static_cast<float>(static_cast<int>(i % 7) - 3) * 0.5f;
}

inline std::vector<float> rankValues(int rank, size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i)
    values[i] = rankValue(rank, i);
  return values;
}

/// The sum over ranks 0..size-1 of rankValue(r, i), in double.
inline double rankSum(int size, size_t i) {
  double sum = 0;
  for (int r = 0; r < size; ++r)
    sum += rankValue(r, i);
  return sum;
}

inline std::vector<uint16_t> toBf16(const std::vector<float> &values) {
  std::vector<uint16_t> halves(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    halves[i] = floatToBf16(values[i]);
  return halves;
}

inline std::vector<float> fromBf16(const std::vector<uint16_t> &halves) {
  std::vector<float> values(halves.size());
  for (size_t i = 0; i < halves.size(); ++i)
    values[i] = bf16ToFloat(halves[i]);
  return values;
}

} // namespace megrt::test

#endif // MEGRT_TEST_COMM_RANKVALUES_H
