//===- HfImport.h - models from Hugging Face configs ------------*- C++ -*-===//
//
// Reads the config.json of a Hugging Face causal language model of the
// Llama family (Llama 2/3.x, Mistral, Qwen2, Qwen3) into the Llama preset's
// configuration. Every field of the config is honoured or rejected with a
// message naming it; none is ignored.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_GEN_HFIMPORT_H
#define MEGC_GEN_HFIMPORT_H

#include "megc/Gen/Presets.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <variant>

namespace megc::gen {

/// What the config does not say: the shapes of the entries and, when set,
/// the element type that replaces the config's `dtype`.
struct HfImportShape {
  int64_t seq = 16, batch = 2;
  std::optional<DType> dtype;
};

/// The architectures `megc import` reads, for messages.
inline constexpr const char *kHfArchitectures =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
    "Qwen3ForCausalLM and DeepseekV3ForCausalLM";

/// The model a config describes: a Llama-family decoder or DeepSeek-V3.
using HfModelConfig = std::variant<LlamaConfig, DeepseekConfig>;

/// Parses the text of a config.json; `source` names it in errors. The
/// result records the config (with its dtype set to the model's) as its
/// hfConfig.
llvm::Expected<HfModelConfig> parseHfConfig(llvm::StringRef text,
                                          llvm::StringRef source,
                                          const HfImportShape &shape);

/// Reads `path`, a config.json or a model directory holding one.
llvm::Expected<HfModelConfig> readHfConfig(llvm::StringRef path,
                                         const HfImportShape &shape);

} // namespace megc::gen

#endif // MEGC_GEN_HFIMPORT_H
