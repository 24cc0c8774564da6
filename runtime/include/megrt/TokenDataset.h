// Token datasets for training: a flat binary file of token ids (uint16 or
// uint32, little-endian, as nanoGPT-style and Megatron preprocessing write
// them), memory-mapped, cut into windows of seq + 1 tokens that give the
// inputs and their next-token labels.
#ifndef MEGRT_TOKENDATASET_H
#define MEGRT_TOKENDATASET_H

#include "megrt/Program.h"
#include "megrt/Tensor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megrt {

enum class TokenDType { U16, U32 };

/// "uint16" or "uint32"; throws megrt::Error otherwise.
TokenDType parseTokenDType(const std::string &name);

struct TokenDatasetOptions {
  TokenDType dtype = TokenDType::U16;
  /// Windows in a random order, a new one each epoch, from this seed;
  /// without it, in file order.
  std::optional<uint64_t> shuffleSeed;
  /// Token ids must be below it (0: unchecked).
  uint64_t vocab = 0;
};

/// Window w holds tokens [w * seq, w * seq + seq]: input_ids are its first
/// seq tokens and labels the last seq (consecutive windows share one
/// token, as in Megatron's GPT dataset). Batches take consecutive windows
/// of the stream (epoch after epoch); the stream position counts the
/// windows consumed, so that a run resumed at a position continues the
/// same stream. Deterministic for a file, seq, seed and position.
class TokenDataset {
public:
  /// Errors name the file: a byte count that is not a multiple of the token
  /// size, or fewer than seq + 1 tokens.
  TokenDataset(const std::string &path, int64_t seq,
               TokenDatasetOptions options = {});
  ~TokenDataset();
  TokenDataset(const TokenDataset &) = delete;
  TokenDataset &operator=(const TokenDataset &) = delete;

  uint64_t numTokens() const { return numTokens_; }
  uint64_t numWindows() const { return numWindows_; }
  int64_t seq() const { return seq_; }

  /// The next `rows` windows of the stream as i32 tensors [rows, seq]
  /// `inputIds` and `labels`; advances the position. A token id at or
  /// above the vocabulary is an error naming the file and byte offset.
  void next(int64_t rows, Tensor &inputIds, Tensor &labels);
  /// Windows [first, first + rows) in file order (wrapping), for
  /// evaluation; the position does not move.
  void windows(uint64_t first, int64_t rows, Tensor &inputIds,
               Tensor &labels) const;

  uint64_t position() const { return position_; }
  void setPosition(uint64_t position) { position_ = position; }

private:
  uint64_t token(uint64_t index) const;
  uint64_t windowAt(uint64_t streamIndex);
  void fill(const std::vector<uint64_t> &windows, Tensor &inputIds,
            Tensor &labels) const;

  std::string path_;
  int64_t seq_;
  TokenDatasetOptions options_;
  const uint8_t *data_ = nullptr;
  uint64_t bytes_ = 0, numTokens_ = 0, numWindows_ = 0, position_ = 0;
  /// The permutation of the epoch `permutationEpoch_` (shuffled only).
  std::vector<uint64_t> permutation_;
  uint64_t permutationEpoch_ = UINT64_MAX;
};

/// The vocabulary size the artifact's Hugging Face config gives, if any.
std::optional<uint64_t> vocabSizeOf(const Program &program);

/// What a token file feeds an entry: `rows` windows a run (the global batch:
/// dim 0 of input_ids times the data-parallel group it is split over) of
/// `seq` + 1 tokens.
struct TokenBatchShape {
  int64_t rows, seq;
};

/// The entry must take input_ids and labels as i32 [batch, seq]; `flag`
/// names the option in the error otherwise.
TokenBatchShape tokenBatchShape(const Program &program,
                                const std::string &entry,
                                const std::string &flag);

} // namespace megrt

#endif // MEGRT_TOKENDATASET_H
