//===- ConfigSizes.cpp - a model's sizes, checked before it is built ----===//

#include "ConfigSizes.h"

#include "ModelBuilder.h"

#include "megc/Dialect/Meg/IR/TensorSizes.h"
#include "llvm/Support/CheckedArithmetic.h"

namespace megc::gen {

const LlamaSettingNames kLlamaFlags = {
    "--layers", "--hidden", "--heads", "--kv-heads", "head dim",
    "--ffn",    "--vocab",  "--seq",   "--batch"};
const LlamaSettingNames kLlamaHfFields = {
    "num_hidden_layers", "hidden_size",       "num_attention_heads",
    "num_key_value_heads", "head_dim",        "intermediate_size",
    "vocab_size",        "--seq",             "--batch"};

llvm::Error checkTensorSize(llvm::StringRef what,
                            llvm::ArrayRef<SizeSetting> factors,
                            unsigned elementBytes) {
  std::optional<uint64_t> bytes = elementBytes;
  for (const SizeSetting &factor : factors)
    if (bytes)
      bytes = llvm::checkedMulUnsigned(*bytes,
                                       static_cast<uint64_t>(factor.value));
  if (bytes && *bytes <= mlir::meg::kMaxTensorBytes)
    return llvm::Error::success();
  std::string product;
  for (const SizeSetting &factor : factors) {
    if (!product.empty())
      product += " x ";
    product += factor.name.empty()
                   ? std::to_string(factor.value)
                   : (factor.name + " " + llvm::Twine(factor.value)).str();
  }
  return configError("the model's " + what + " (" + product +
                     " elements) would need more than 2^48 bytes (256 TiB), "
                     "the most a tensor may have; check those sizes");
}

llvm::Error checkLayerCount(llvm::StringRef name, int64_t layers) {
  if (layers <= kMaxLayers)
    return llvm::Error::success();
  return configError(name + " = " + llvm::Twine(layers) + " is above the " +
                     llvm::Twine(kMaxLayers) +
                     " layers megc builds (the largest models have a few "
                     "hundred)");
}

llvm::Error checkVocabulary(llvm::StringRef name, int64_t vocab) {
  if (vocab <= INT32_MAX)
    return llvm::Error::success();
  return configError(name + " = " + llvm::Twine(vocab) +
                     " is above 2^31 - 1: token ids are i32, so a "
                     "vocabulary has at most that many rows");
}

llvm::Error checkLlamaSizes(const LlamaConfig &c,
                            const LlamaSettingNames &n) {
  if (llvm::Error error = checkLayerCount(n.layers, c.layers))
    return error;
  if (llvm::Error error = checkVocabulary(n.vocab, c.vocab))
    return error;
  SizeSetting headDim = c.headDim ? SizeSetting{n.headDim, c.headDim}
                                  : SizeSetting{"", c.hidden / c.heads};
  unsigned f32 = 4;
  struct {
    const char *what;
    std::vector<SizeSetting> factors;
  } tensors[] = {
      {"embedding", {{n.vocab, c.vocab}, {n.hidden, c.hidden}}},
      {"query projection",
       {{n.heads, c.heads}, headDim, {n.hidden, c.hidden}}},
      {"key projection",
       {{n.kvHeads, c.kvHeads}, headDim, {n.hidden, c.hidden}}},
      {"MLP projection", {{n.ffn, c.ffn}, {n.hidden, c.hidden}}},
      {"hidden states",
       {{n.batch, c.batch}, {n.seq, c.seq}, {n.hidden, c.hidden}}},
      {"queries",
       {{n.batch, c.batch}, {n.seq, c.seq}, {n.heads, c.heads}, headDim}},
      {"MLP activations",
       {{n.batch, c.batch}, {n.seq, c.seq}, {n.ffn, c.ffn}}},
      {"logits", {{n.batch, c.batch}, {n.seq, c.seq}, {n.vocab, c.vocab}}}};
  for (const auto &tensor : tensors)
    if (llvm::Error error = checkTensorSize(tensor.what, tensor.factors, f32))
      return error;
  return llvm::Error::success();
}

llvm::Error checkDeepseekSizes(const DeepseekConfig &c) {
  if (llvm::Error error = checkLayerCount("num_hidden_layers", c.layers))
    return error;
  if (llvm::Error error = checkVocabulary("vocab_size", c.vocab))
    return error;
  SizeSetting vocab{"vocab_size", c.vocab}, hidden{"hidden_size", c.hidden},
      heads{"num_attention_heads", c.heads},
      nope{"qk_nope_head_dim", c.qkNopeDim},
      rope{"qk_rope_head_dim", c.qkRopeDim}, value{"v_head_dim", c.vHeadDim},
      rank{"kv_lora_rank", c.kvLoraRank}, ffn{"intermediate_size", c.ffn},
      moeFfn{"moe_intermediate_size", c.moeFfn},
      experts{"n_routed_experts", c.routedExperts}, seq{"--seq", c.seq},
      batch{"--batch", c.batch};
  struct {
    const char *what;
    std::vector<SizeSetting> factors;
  } tensors[] = {
      {"embedding", {vocab, hidden}},
      {"query projection", {heads, nope, hidden}},
      {"query rotary projection", {heads, rope, hidden}},
      {"key-value up-projection", {heads, nope, rank}},
      {"output projection", {heads, value, hidden}},
      {"dense MLP projection", {ffn, hidden}},
      {"stacked experts", {experts, moeFfn, hidden}},
      {"hidden states", {batch, seq, hidden}},
      {"logits", {batch, seq, vocab}}};
  for (const auto &tensor : tensors)
    if (llvm::Error error = checkTensorSize(tensor.what, tensor.factors, 4))
      return error;
  return llvm::Error::success();
}

llvm::Error checkDiTSizes(const DiTConfig &c) {
  if (llvm::Error error = checkLayerCount("--layers", c.layers))
    return error;
  SizeSetting hidden{"--hidden", c.hidden}, seq{"--seq", c.seq},
      textSeq{"--text-seq", c.textSeq}, batch{"--batch", c.batch};
  struct {
    const char *what;
    std::vector<SizeSetting> factors;
  } tensors[] = {
      {"MLP projection", {{"", 4}, hidden, hidden}},
      {"adaLN projection", {{"", 6}, hidden, hidden}},
      {"image hidden states", {batch, seq, {"", 4}, hidden}},
      {"text hidden states", {batch, textSeq, {"", 4}, hidden}}};
  for (const auto &tensor : tensors)
    if (llvm::Error error = checkTensorSize(tensor.what, tensor.factors, 4))
      return error;
  return llvm::Error::success();
}

} // namespace megc::gen
