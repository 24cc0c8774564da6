// Token datasets for training: token ids memory-mapped, cut into windows
// of seq + 1 tokens that give the inputs and their next-token labels. Two
// kinds of file: Megatron-LM's indexed datasets (PREFIX.bin with
// PREFIX.idx, whose MMIDIDX header gives the dtype, the sequences and the
// documents, as preprocess_data.py writes them), and raw files of
// little-endian token ids, whose dtype the caller gives (nanoGPT-style).
#ifndef MEGRT_TOKENDATASET_H
#define MEGRT_TOKENDATASET_H

#include "megrt/Program.h"
#include "megrt/Tensor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megrt {

/// Token storage types: what raw files take (uint16, uint32, int32) and
/// what Megatron's index may name (also uint8, int16, int64).
enum class TokenDType { U8, U16, I16, I32, U32, I64 };

/// "uint16", "uint32" or "int32"; throws megrt::Error otherwise.
TokenDType parseTokenDType(const std::string &name);
const char *tokenDTypeName(TokenDType dtype);
uint64_t tokenDTypeBytes(TokenDType dtype);

struct TokenDatasetOptions {
  /// The dtype of a raw file (default uint16). An indexed dataset's comes
  /// from its index; given, it must be the same.
  std::optional<TokenDType> dtype;
  /// Windows in a random order, a new one each epoch, from this seed;
  /// without it, in file order.
  std::optional<uint64_t> shuffleSeed;
  /// Token ids must be below it (0: unchecked).
  uint64_t vocab = 0;
};

/// Window w holds tokens [w * seq, w * seq + seq] of the token stream (an
/// indexed dataset's sequences in order, documents with them: the
/// end-of-document tokens preprocessing appends separate them, as in
/// Megatron's GPT dataset, which also cuts samples across documents):
/// input_ids are its first seq tokens and labels the last seq
/// (consecutive windows share one token). Batches take consecutive windows
/// of the stream (epoch after epoch); the stream position counts the
/// windows consumed, so that a run resumed at a position continues the
/// same stream. Deterministic for a file, seq, seed and position. One
/// difference from Megatron's GPT dataset: it shuffles the documents and
/// then the samples cut from them; here the documents stay in order and
/// the windows are shuffled (each epoch sees the same windows).
class TokenDataset {
public:
  /// Opens `path` (an indexed dataset's prefix, .bin or .idx, or a raw
  /// file) and checks every token against the vocabulary and int32 ids at
  /// once (a scan of the mapped file). Errors name the file: a malformed
  /// index, a byte count that is not a multiple of the token size, fewer
  /// than seq + 1 tokens, a token out of range (and its offset), a raw
  /// uint16 file whose every second token is 0 (uint32 read as uint16).
  TokenDataset(const std::string &path, int64_t seq,
               TokenDatasetOptions options = {});
  ~TokenDataset();
  TokenDataset(const TokenDataset &) = delete;
  TokenDataset &operator=(const TokenDataset &) = delete;

  uint64_t numTokens() const { return numTokens_; }
  uint64_t numWindows() const { return numWindows_; }
  int64_t seq() const { return seq_; }
  TokenDType dtype() const { return dtype_; }
  /// Whether it is an indexed dataset, and its sequences and documents.
  bool indexed() const { return indexed_; }
  uint64_t numSequences() const { return sequences_; }
  uint64_t numDocuments() const { return documents_; }
  /// The token file read, and how long the scan of its tokens took.
  const std::string &dataPath() const { return dataPath_; }
  double scanSeconds() const { return scanSeconds_; }

  /// The next `rows` windows of the stream as i32 tensors [rows, seq]
  /// `inputIds` and `labels`; advances the position.
  void next(int64_t rows, Tensor &inputIds, Tensor &labels);
  /// Windows [first, first + rows) in file order (wrapping), for
  /// evaluation; the position does not move.
  void windows(uint64_t first, int64_t rows, Tensor &inputIds,
               Tensor &labels) const;

  uint64_t position() const { return position_; }
  void setPosition(uint64_t position) { position_ = position; }

private:
  void readIndex(const std::string &indexPath);
  void mapTokens();
  void scan();
  uint64_t token(uint64_t index) const;
  uint64_t windowAt(uint64_t streamIndex);
  void fill(const std::vector<uint64_t> &windows, Tensor &inputIds,
            Tensor &labels) const;

  std::string path_, dataPath_;
  int64_t seq_;
  TokenDatasetOptions options_;
  TokenDType dtype_ = TokenDType::U16;
  bool indexed_ = false;
  uint64_t sequences_ = 0, documents_ = 0, indexedTokens_ = 0;
  const uint8_t *data_ = nullptr;
  uint64_t bytes_ = 0, numTokens_ = 0, numWindows_ = 0, position_ = 0;
  double scanSeconds_ = 0;
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
