// Token datasets (see megrt/TokenDataset.h).
#include "megrt/TokenDataset.h"

#include "CounterRandom.h"
#include "Fail.h"
#include "Json.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "token files are little-endian and read as is");

namespace megrt {

TokenDType parseTokenDType(const std::string &name) {
  if (name == "uint16")
    return TokenDType::U16;
  if (name == "uint32")
    return TokenDType::U32;
  fail("unknown token dtype '", name, "'; expected uint16 or uint32");
}

TokenDataset::TokenDataset(const std::string &path, int64_t seq,
                           TokenDatasetOptions options)
    : path_(path), seq_(seq), options_(options) {
  if (seq < 1)
    fail("'", path, "': windows need a sequence length >= 1, got ", seq);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail("cannot open the token file '", path, "': ", std::strerror(errno));
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    fail("'", path, "' is not a regular file");
  }
  bytes_ = static_cast<uint64_t>(info.st_size);
  uint64_t width = options.dtype == TokenDType::U16 ? 2 : 4;
  if (bytes_ % width != 0) {
    ::close(fd);
    fail("'", path, "': ", bytes_, " bytes is not a whole number of ",
         width == 2 ? "uint16" : "uint32", " tokens (", width,
         " bytes each)");
  }
  numTokens_ = bytes_ / width;
  if (numTokens_ < static_cast<uint64_t>(seq) + 1) {
    ::close(fd);
    fail("'", path, "': ", numTokens_, " tokens is too short for one window "
         "of seq + 1 = ", seq + 1, " tokens");
  }
  void *mapped = ::mmap(nullptr, bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapped == MAP_FAILED)
    fail("cannot map the token file '", path, "': ", std::strerror(errno));
  data_ = static_cast<const uint8_t *>(mapped);
  numWindows_ = (numTokens_ - 1) / static_cast<uint64_t>(seq);
}

TokenDataset::~TokenDataset() {
  if (data_)
    ::munmap(const_cast<uint8_t *>(data_), bytes_);
}

uint64_t TokenDataset::token(uint64_t index) const {
  uint64_t value;
  if (options_.dtype == TokenDType::U16) {
    uint16_t v;
    std::memcpy(&v, data_ + 2 * index, 2);
    value = v;
  } else {
    uint32_t v;
    std::memcpy(&v, data_ + 4 * index, 4);
    value = v;
  }
  if (options_.vocab && value >= options_.vocab)
    fail("'", path_, "': token ", value, " at byte offset ",
         index * (options_.dtype == TokenDType::U16 ? 2 : 4), " (token ",
         index, ") is not below the vocabulary size ", options_.vocab);
  if (value > static_cast<uint64_t>(INT32_MAX))
    fail("'", path_, "': token ", value, " at byte offset ", index * 4,
         " does not fit the model's int32 token ids");
  return value;
}

/// The window of stream element `streamIndex`: file order, or this epoch's
/// Fisher-Yates permutation keyed by (seed, epoch).
uint64_t TokenDataset::windowAt(uint64_t streamIndex) {
  uint64_t epoch = streamIndex / numWindows_;
  uint64_t offset = streamIndex % numWindows_;
  if (!options_.shuffleSeed)
    return offset;
  if (permutationEpoch_ != epoch) {
    permutation_.resize(numWindows_);
    for (uint64_t i = 0; i < numWindows_; ++i)
      permutation_[i] = i;
    CounterRandom random(*options_.shuffleSeed, epoch);
    for (uint64_t i = numWindows_ - 1; i > 0; --i) {
      uint64_t j = random.bits(i) % (i + 1);
      std::swap(permutation_[i], permutation_[j]);
    }
    permutationEpoch_ = epoch;
  }
  return permutation_[offset];
}

void TokenDataset::fill(const std::vector<uint64_t> &windows,
                        Tensor &inputIds, Tensor &labels) const {
  auto rows = static_cast<int64_t>(windows.size());
  std::vector<int32_t> ids(windows.size() * seq_), next(ids.size());
  for (size_t r = 0; r < windows.size(); ++r) {
    uint64_t start = windows[r] * static_cast<uint64_t>(seq_);
    for (int64_t t = 0; t < seq_; ++t) {
      ids[r * seq_ + t] = static_cast<int32_t>(token(start + t));
      next[r * seq_ + t] = static_cast<int32_t>(token(start + t + 1));
    }
  }
  inputIds = Tensor::fromBytes(DType::I32, {rows, seq_}, ids.data(),
                               ids.size() * sizeof(int32_t));
  labels = Tensor::fromBytes(DType::I32, {rows, seq_}, next.data(),
                             next.size() * sizeof(int32_t));
}

void TokenDataset::next(int64_t rows, Tensor &inputIds, Tensor &labels) {
  std::vector<uint64_t> windows;
  for (int64_t r = 0; r < rows; ++r)
    windows.push_back(windowAt(position_ + static_cast<uint64_t>(r)));
  fill(windows, inputIds, labels);
  position_ += static_cast<uint64_t>(rows);
}

void TokenDataset::windows(uint64_t first, int64_t rows, Tensor &inputIds,
                           Tensor &labels) const {
  std::vector<uint64_t> windows;
  for (int64_t r = 0; r < rows; ++r)
    windows.push_back((first + static_cast<uint64_t>(r)) % numWindows_);
  fill(windows, inputIds, labels);
}

TokenBatchShape tokenBatchShape(const Program &program,
                                const std::string &entryName,
                                const std::string &flag) {
  const EntrySpec *entry = program.findEntry(entryName);
  if (!entry)
    fail(flag, ": the artifact has no entry '", entryName, "'");
  const TensorSpec *ids = nullptr;
  bool labels = false;
  for (const TensorSpec &input : entry->inputs) {
    if (input.name == "input_ids")
      ids = &input;
    labels |= input.name == "labels";
  }
  if (!ids || !labels || ids->dtype != DType::I32 || ids->shape.size() != 2)
    fail(flag, " feeds input_ids and labels (i32 [batch, seq]), which entry '",
         entryName, "' does not take");
  int64_t group = ids->split ? program.submeshes()[*ids->split].size : 1;
  return {ids->shape[0] * group, ids->shape[1]};
}

std::optional<uint64_t> vocabSizeOf(const Program &program) {
  if (program.hfConfig().empty())
    return std::nullopt;
  JsonValue config = parseJson(program.hfConfig());
  for (const auto &[key, value] : config.members)
    if (key == "vocab_size" && value.kind == JsonValue::Kind::Number)
      return static_cast<uint64_t>(jsonToInt64(value, "vocab_size"));
  return std::nullopt;
}

} // namespace megrt
