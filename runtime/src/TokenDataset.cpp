// Token datasets (see megrt/TokenDataset.h).
#include "megrt/TokenDataset.h"

#include "CounterRandom.h"
#include "Fail.h"
#include "Json.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <type_traits>
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
  if (name == "int32")
    return TokenDType::I32;
  fail("unknown token dtype '", name,
       "'; expected uint16, uint32 or int32");
}

const char *tokenDTypeName(TokenDType dtype) {
  switch (dtype) {
  case TokenDType::U8:
    return "uint8";
  case TokenDType::U16:
    return "uint16";
  case TokenDType::I16:
    return "int16";
  case TokenDType::I32:
    return "int32";
  case TokenDType::U32:
    return "uint32";
  case TokenDType::I64:
    return "int64";
  }
  return "?";
}

uint64_t tokenDTypeBytes(TokenDType dtype) {
  switch (dtype) {
  case TokenDType::U8:
    return 1;
  case TokenDType::U16:
  case TokenDType::I16:
    return 2;
  case TokenDType::I32:
  case TokenDType::U32:
    return 4;
  case TokenDType::I64:
    return 8;
  }
  return 1;
}

namespace {

/// Megatron's index header (megatron/core/datasets/indexed_dataset.py).
constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};

/// Megatron's dtype codes, for the token types it writes.
std::optional<TokenDType> fromMegatronCode(uint8_t code) {
  switch (code) {
  case 1:
    return TokenDType::U8;
  case 3:
    return TokenDType::I16;
  case 4:
    return TokenDType::I32;
  case 5:
    return TokenDType::I64;
  case 8:
    return TokenDType::U16;
  default:
    return std::nullopt;
  }
}

/// Whether a 32-bit value read from a raw file is two 16-bit tokens below
/// `bound` (a uint16 file read as 32-bit).
bool halvesFit(uint64_t value, size_t width, uint64_t bound) {
  return width == 4 && (value & 0xffff) < bound && (value >> 16) < bound &&
         (value >> 16) != 0;
}

/// Calls `f` with the mapped tokens as an array of their storage type.
template <typename F>
auto withTokens(TokenDType dtype, const uint8_t *data, F &&f) {
  switch (dtype) {
  case TokenDType::U16:
    return f(reinterpret_cast<const uint16_t *>(data));
  case TokenDType::I16:
    return f(reinterpret_cast<const int16_t *>(data));
  case TokenDType::I32:
    return f(reinterpret_cast<const int32_t *>(data));
  case TokenDType::U32:
    return f(reinterpret_cast<const uint32_t *>(data));
  case TokenDType::I64:
    return f(reinterpret_cast<const int64_t *>(data));
  case TokenDType::U8:
    break;
  }
  return f(data);
}

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool isFile(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

/// A whole file read-only mapped; unmapped by the destructor.
class MappedFile {
public:
  MappedFile(const std::string &path, const char *what) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      fail("cannot open the ", what, " '", path, "': ", std::strerror(errno));
    struct stat info;
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      ::close(fd);
      fail("'", path, "' is not a regular file");
    }
    bytes = static_cast<uint64_t>(info.st_size);
    if (bytes) {
      void *mapped = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
      if (mapped == MAP_FAILED) {
        ::close(fd);
        fail("cannot map the ", what, " '", path, "': ", std::strerror(errno));
      }
      data = static_cast<const uint8_t *>(mapped);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data)
      ::munmap(const_cast<uint8_t *>(data), bytes);
  }
  /// Gives the mapping away (to TokenDataset, which unmaps it).
  const uint8_t *release() {
    const uint8_t *kept = data;
    data = nullptr;
    return kept;
  }
  const uint8_t *data = nullptr;
  uint64_t bytes = 0;
};

} // namespace

TokenDataset::TokenDataset(const std::string &path, int64_t seq,
                           TokenDatasetOptions options)
    : path_(path), dataPath_(path), seq_(seq), options_(options) {
  if (seq < 1)
    fail("'", path, "': windows need a sequence length >= 1, got ", seq);
  // An indexed dataset, named by its prefix or either of its files.
  std::string prefix;
  if (endsWith(path, ".idx") || endsWith(path, ".bin"))
    prefix = path.substr(0, path.size() - 4);
  else if (isFile(path + ".idx"))
    prefix = path;
  if (!prefix.empty() && (isFile(prefix + ".idx") || endsWith(path, ".idx"))) {
    indexed_ = true;
    dataPath_ = prefix + ".bin";
    readIndex(prefix + ".idx");
  } else {
    dtype_ = options.dtype.value_or(TokenDType::U16);
  }
  mapTokens();
  scan();
}

void TokenDataset::readIndex(const std::string &indexPath) {
  MappedFile index(indexPath, "dataset index");
  const uint8_t *at = index.data;
  uint64_t left = index.bytes;
  auto take = [&](void *out, uint64_t bytes, const char *what) {
    if (left < bytes)
      fail("'", indexPath, "': the index ends inside its ", what, " (",
           index.bytes, " bytes)");
    std::memcpy(out, at, bytes);
    at += bytes;
    left -= bytes;
  };
  char magic[9];
  uint64_t version, sequences, documents;
  uint8_t code;
  take(magic, 9, "header");
  if (std::memcmp(magic, kIndexMagic, 9) != 0)
    fail("'", indexPath, "' is not a Megatron indexed dataset index (no "
         "MMIDIDX header)");
  take(&version, 8, "version");
  if (version != 1)
    fail("'", indexPath, "': index version ", version,
         "; megrt reads version 1");
  take(&code, 1, "dtype");
  std::optional<TokenDType> dtype = fromMegatronCode(code);
  if (!dtype)
    fail("'", indexPath, "': dtype code ", int(code),
         " is not a token type (uint8, int16, int32, int64, uint16)");
  dtype_ = *dtype;
  if (options_.dtype && *options_.dtype != dtype_)
    fail("'", indexPath, "' holds ", tokenDTypeName(dtype_),
         " tokens, but ", tokenDTypeName(*options_.dtype),
         " was asked for (a dtype is for raw token files)");
  take(&sequences, 8, "sequence count");
  take(&documents, 8, "document count");
  // Sizes (i32), pointers (i64), documents (i64), and for multimodal
  // datasets a mode (i8) per sequence.
  if (sequences > left / 12 || documents > (left - sequences * 12) / 8)
    fail("'", indexPath, "': ", sequences, " sequences and ", documents,
         " documents do not fit its ", index.bytes, " bytes");
  uint64_t rest = left - sequences * 12 - documents * 8;
  if (rest != 0 && rest != sequences)
    fail("'", indexPath, "': ", rest, " bytes after its document indices");
  const uint8_t *sizes = at, *pointers = at + 4 * sequences,
                *starts = pointers + 8 * sequences;
  uint64_t width = tokenDTypeBytes(dtype_), total = 0;
  for (uint64_t i = 0; i < sequences; ++i) {
    int32_t size;
    int64_t pointer;
    std::memcpy(&size, sizes + 4 * i, 4);
    std::memcpy(&pointer, pointers + 8 * i, 8);
    // The sequences follow each other in the data file, as Megatron's
    // builder writes and merges them: the file is the token stream.
    if (size < 0 || static_cast<uint64_t>(pointer) != total * width)
      fail("'", indexPath, "': sequence ", i, " (", size,
           " tokens at byte ", pointer, ") does not follow the one before "
           "it at byte ", total * width,
           "; megrt reads datasets whose sequences are stored in order");
    total += static_cast<uint64_t>(size);
  }
  int64_t previous = 0;
  for (uint64_t d = 0; d < documents; ++d) {
    int64_t start;
    std::memcpy(&start, starts + 8 * d, 8);
    if (start < previous || static_cast<uint64_t>(start) > sequences ||
        (d == 0 && start != 0) ||
        (d + 1 == documents && static_cast<uint64_t>(start) != sequences))
      fail("'", indexPath, "': document index ", d, " (", start,
           ") is not in order from 0 to the ", sequences, " sequences");
    previous = start;
  }
  sequences_ = sequences;
  documents_ = documents ? documents - 1 : 0;
  indexedTokens_ = total;
}

void TokenDataset::mapTokens() {
  MappedFile file(dataPath_, indexed_ ? "dataset" : "token file");
  bytes_ = file.bytes;
  uint64_t width = tokenDTypeBytes(dtype_);
  if (bytes_ % width != 0)
    fail("'", dataPath_, "': ", bytes_, " bytes is not a whole number of ",
         tokenDTypeName(dtype_), " tokens (", width, " bytes each)");
  numTokens_ = bytes_ / width;
  if (indexed_ && numTokens_ != indexedTokens_)
    fail("'", dataPath_, "' holds ", numTokens_, " tokens; its index says ",
         indexedTokens_);
  if (numTokens_ < static_cast<uint64_t>(seq_) + 1)
    fail("'", dataPath_, "': ", numTokens_,
         " tokens is too short for one window of seq + 1 = ", seq_ + 1,
         " tokens");
  data_ = file.release();
  numWindows_ = (numTokens_ - 1) / static_cast<uint64_t>(seq_);
}

void TokenDataset::scan() {
  auto began = std::chrono::steady_clock::now();
  uint64_t limit = options_.vocab ? std::min<uint64_t>(options_.vocab,
                                                       uint64_t(INT32_MAX) + 1)
                                  : uint64_t(INT32_MAX) + 1;
  auto check = [&](auto *tokens) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(tokens)>>;
    uint64_t n = numTokens_;
    // The largest and smallest token, in one pass the compiler vectorizes
    // (the mapping is page-aligned); a bad token is located only when there
    // is one. A raw uint16 file is read in pairs, which also tells a file
    // of 32-bit tokens read as uint16: every second token is a high half,
    // which ids below 2^18 keep under 4, while the low halves are mostly
    // larger.
    T largest = 0, smallest = 0;
    bool pairs = std::is_unsigned_v<T> && !indexed_ && sizeof(T) == 2 &&
                 n >= 64;
    if (pairs) {
      T largestLow = 0, largestHigh = 0;
      uint64_t largeLow = 0;
      for (uint64_t i = 0; i + 1 < n; i += 2) {
        T low = tokens[i], high = tokens[i + 1];
        largestLow = std::max(largestLow, low);
        largestHigh = std::max(largestHigh, high);
        largeLow += low >= 4;
      }
      largest = std::max(largestLow, largestHigh);
      if (n % 2)
        largest = std::max(largest, tokens[n - 1]);
      if (largestHigh < 4 && largeLow >= n / 4)
        fail("'", dataPath_, "': every second token is below 4, as in a "
             "file of 32-bit tokens read as uint16; give the data dtype "
             "uint32 (--data-dtype uint32)");
    } else {
      for (uint64_t i = 0; i < n; ++i) {
        largest = std::max(largest, tokens[i]);
        if constexpr (std::is_signed_v<T>)
          smallest = std::min(smallest, tokens[i]);
      }
    }
    if (smallest >= 0 && static_cast<uint64_t>(largest) < limit)
      return;
    for (uint64_t i = 0; i < n; ++i) {
      T value = tokens[i];
      if (value < 0 || static_cast<uint64_t>(value) >= limit)
        fail("'", dataPath_, "': token ", static_cast<int64_t>(value),
             " at byte offset ", i * sizeof(T), " (token ", i, ") is ",
             value < 0 ? std::string("negative")
             : options_.vocab && static_cast<uint64_t>(value) >= options_.vocab
                 ? concat("not below the vocabulary size ", options_.vocab)
                 : std::string("beyond the model's int32 ids"),
             !indexed_ && halvesFit(static_cast<uint64_t>(value), sizeof(T),
                                    limit)
                 ? "; its two 16-bit halves are both tokens, as in a file "
                   "of uint16 tokens read as 32-bit: give the data dtype "
                   "uint16 (--data-dtype uint16)"
                 : "");
    }
  };
  withTokens(dtype_, data_, check);
  scanSeconds_ = std::chrono::duration<double>(
                     std::chrono::steady_clock::now() - began)
                     .count();
}

TokenDataset::~TokenDataset() {
  if (data_)
    ::munmap(const_cast<uint8_t *>(data_), bytes_);
}

uint64_t TokenDataset::token(uint64_t index) const {
  // Every token was checked when the file was opened.
  return withTokens(dtype_, data_, [&](auto *tokens) {
    return static_cast<uint64_t>(tokens[index]);
  });
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
