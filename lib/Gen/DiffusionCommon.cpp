//===- DiffusionCommon.cpp - shared parts of the DiT presets -----------===//
//
// Embedders, adaLN output head and the MSE loss entry of MMDiT and Flux.
//
//===----------------------------------------------------------------------===//

#include "DiffusionCommon.h"

#include "ConfigSizes.h"

using namespace mlir;

namespace megc::gen {

llvm::Error checkDiT(const DiTConfig &s) {
  if (llvm::Error error = checkPositive({{"layers", s.layers},
                                         {"hidden", s.hidden},
                                         {"heads", s.heads},
                                         {"seq", s.seq},
                                         {"text-seq", s.textSeq},
                                         {"batch", s.batch},
                                         {"in-channels", s.inChannels},
                                         {"context-dim", s.contextDim}}))
    return error;
  if (llvm::Error error = checkDiTSizes(s))
    return error;
  if (s.hidden % s.heads != 0)
    return configError("--hidden " + llvm::Twine(s.hidden) +
                       " must be a multiple of --heads " +
                       llvm::Twine(s.heads));
  if (!(s.normEps > 0.0))
    return configError("--norm-eps must be > 0");
  return llvm::Error::success();
}

void declareEmbedders(ModelBuilder &b, const DiTConfig &s) {
  b.linearParams("x_embedder", s.inChannels, s.hidden, true);
  b.linearParams("context_embedder", s.contextDim, s.hidden, true);
}

void declareHead(ModelBuilder &b, const DiTConfig &s) {
  b.linearParams("norm_out.linear", s.hidden, 2 * s.hidden, true);
  b.linearParams("proj_out", s.hidden, s.inChannels, true);
}

SmallVector<NamedType> ditInputs(ModelBuilder &b, const DiTConfig &s) {
  return {{"latents", b.tensor({s.batch, s.seq, s.inChannels})},
          {"context", b.tensor({s.batch, s.textSeq, s.contextDim})},
          {"conditioning", b.tensor({s.batch, s.hidden})}};
}

Value ditHead(ModelBuilder &b, const DiTConfig &s, Value x, Value cond) {
  // AdaLayerNormContinuous: scale first, then shift.
  SmallVector<Value> chunks = adaLnChunks(b, cond, "norm_out.linear", 2);
  Value normed = b.modulate(b.layerNorm(x, s.normEps), chunks[1], chunks[0]);
  return b.linear(normed, "proj_out", true);
}

void ditLoss(ModelBuilder &b, const DiTConfig &s) {
  SmallVector<NamedType> inputs = ditInputs(b, s);
  inputs.push_back({"target", b.tensor({s.batch, s.seq, s.inChannels})});
  SmallVector<Value> args = b.beginFunction("loss", inputs);
  Value prediction =
      b.call("forward", ValueRange(args).take_front(3)).front();
  b.endFunction({{"loss", b.meanSquaredError(prediction, args[3])}});
}

} // namespace megc::gen
