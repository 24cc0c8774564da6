//===- ConfigSizes.h - a model's sizes, checked before it is built -*- C++ -*-===//
//
// Every size setting of a preset or an imported config is checked before
// one op is built: positive, the layers at most kMaxLayers, and every
// tensor the model will have under the ceiling of mlir::meg::
// kMaxTensorBytes, with checked products. Errors name the settings as the
// user spelled them (a flag of megc gen, a field of config.json) and their
// values, so that 2^40 layers or a hidden size of 2^62 is a message, not a
// run out of memory.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_GEN_CONFIGSIZES_H
#define MEGC_LIB_GEN_CONFIGSIZES_H

#include "megc/Gen/Presets.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace megc::gen {

/// The most layers megc builds: the largest models have a few hundred, and
/// every layer is ops in the IR.
constexpr int64_t kMaxLayers = 4096;

/// A size setting as the user spells it ("--hidden", "hidden_size") and
/// its value; a factor with an empty name is a constant of the model.
struct SizeSetting {
  llvm::StringRef name;
  int64_t value;
};

/// The tensor `what` of the model, of `elementBytes` per element, whose
/// element count is the product of `factors`: an error naming them when
/// its bytes overflow or exceed the ceiling.
llvm::Error checkTensorSize(llvm::StringRef what,
                            llvm::ArrayRef<SizeSetting> factors,
                            unsigned elementBytes);

/// The layer count `layers` (spelled `name`) is at most kMaxLayers.
llvm::Error checkLayerCount(llvm::StringRef name, int64_t layers);

/// The vocabulary (spelled `name`) fits the i32 token ids.
llvm::Error checkVocabulary(llvm::StringRef name, int64_t vocab);

/// How the settings of a Llama-family model are spelled.
struct LlamaSettingNames {
  llvm::StringRef layers, hidden, heads, kvHeads, headDim, ffn, vocab, seq,
      batch;
};
extern const LlamaSettingNames kLlamaFlags, kLlamaHfFields;

/// The sizes of `config` (positive settings already checked).
llvm::Error checkLlamaSizes(const LlamaConfig &config,
                            const LlamaSettingNames &names);
llvm::Error checkDeepseekSizes(const DeepseekConfig &config);
llvm::Error checkDiTSizes(const DiTConfig &config);

} // namespace megc::gen

#endif // MEGC_LIB_GEN_CONFIGSIZES_H
