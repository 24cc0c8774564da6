// What each rank of dataParallelProgram() computes, from the definitions of
// the collectives, for the single-process and the multi-rank tests.
#include "DataParallelReference.h"

#include "ParameterInit.h"
#include "megrt/Program.h"

namespace megrt::test {

Tensor dataParallelInput(int64_t outer, int64_t shard, uint32_t seed) {
  int64_t rows = 2 * outer * shard;
  std::vector<float> values;
  for (int64_t i = 0; i < rows * 4; ++i)
    values.push_back(static_cast<float>((i * 7 + seed) % 19) * 0.25f - 2.0f);
  return Tensor::fromFloats(DType::F32, {rows, 4}, values);
}

std::vector<float> fullInitialValues(const std::string &name, uint64_t seed) {
  ParameterSpec spec{name, DType::F32, {3, 5}, true, InitKind::Normal,
                     0.5,  {},         false,  ""};
  Tensor full(DType::F32, {3, 5});
  initializeParameter(full, spec, seed);
  return full.toFloats();
}

std::map<std::string, std::vector<float>>
dataParallelOutputs(int64_t outer, int64_t shard, int64_t extraPadding,
                    int rank, const Tensor &x, uint64_t seed) {
  std::vector<float> global = x.toFloats();
  // Rank r holds rows [2r, 2r + 2): 8 values.
  auto rowsOf = [&](int64_t r) {
    return std::vector<float>(global.begin() + 8 * r,
                              global.begin() + 8 * (r + 1));
  };
  int64_t o = rank / shard, s = rank % shard;
  int64_t c = 8 / shard;
  int64_t n = (15 + shard - 1) / shard + extraPadding;

  std::map<std::string, std::vector<float>> out;
  std::vector<float> gathered = fullInitialValues("w", seed);
  gathered.resize(static_cast<size_t>(shard * n), 0.0f);
  out["gathered"] = gathered;

  std::vector<float> sum(8, 0.0f), outerSum(8, 0.0f), shardSum(8, 0.0f);
  for (int64_t r = 0; r < outer * shard; ++r)
    for (int i = 0; i < 8; ++i) {
      float v = rowsOf(r)[i];
      sum[i] += v;
      if (r % shard == s)
        outerSum[i] += v;
      if (r / shard == o)
        shardSum[i] += v;
    }
  std::vector<float> outerAvg;
  for (float v : outerSum)
    outerAvg.push_back(v / static_cast<float>(outer));
  out["sum"] = sum;
  out["outer_avg"] = outerAvg;
  out["shard_sum"] = shardSum;
  out["scattered"] = std::vector<float>(shardSum.begin() + s * c,
                                        shardSum.begin() + (s + 1) * c);
  std::vector<float> mine = rowsOf(rank);
  out["sliced"] =
      std::vector<float>(mine.begin() + s * c, mine.begin() + (s + 1) * c);
  return out;
}

} // namespace megrt::test
