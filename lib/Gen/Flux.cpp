//===- Flux.cpp - the Flux single-stream preset ------------------------===//
//
// Single-stream transformer blocks over the concatenated text and image
// tokens, with attention and MLP in parallel from one modulated input and
// RoPE (unfused) on q and k. Parameter names follow diffusers'
// FluxSingleTransformerBlock.
//
//===----------------------------------------------------------------------===//

#include "DiffusionCommon.h"

using namespace mlir;

namespace megc::gen {

llvm::Expected<OwningOpRef<ModuleOp>> buildFlux(MLIRContext &context,
                                                const FluxConfig &c) {
  if (llvm::Error error = checkDiT(c))
    return std::move(error);
  int64_t headDim = c.hidden / c.heads;
  llvm::Expected<int64_t> rotaryDim = rotaryDimFor(headDim, c.rope);
  if (!rotaryDim)
    return rotaryDim.takeError();

  ModelBuilder b(context, c.dtype);
  declareEmbedders(b, c);
  int64_t mlpHidden = 4 * c.hidden;
  for (int64_t i = 0; i < c.layers; ++i) {
    b.beginLayer(i);
    std::string block = "single_transformer_blocks." + std::to_string(i);
    b.linearParams(block + ".norm.linear", c.hidden, 3 * c.hidden, true);
    b.linearParams(block + ".proj_mlp", c.hidden, mlpHidden, true);
    for (const char *proj : {".attn.to_q", ".attn.to_k", ".attn.to_v"})
      b.linearParams(block + proj, c.hidden, c.hidden, true);
    b.ones(block + ".attn.norm_q.weight", {headDim});
    b.ones(block + ".attn.norm_k.weight", {headDim});
    b.linearParams(block + ".proj_out", c.hidden + mlpHidden, c.hidden, true);
  }
  b.endLayer();
  declareHead(b, c);

  SmallVector<Value> args = b.beginFunction("forward", ditInputs(b, c));
  Value x = b.linear(args[0], "x_embedder", true);
  Value ctx = b.linear(args[1], "context_embedder", true);
  Value cond = args[2];
  int64_t tokens = c.textSeq + c.seq;
  Value h = b.concat({ctx, x}, 1); // text tokens first, as in Flux
  RopeTables rope = buildRopeTables(b, tokens, *rotaryDim, c.rope);
  for (int64_t i = 0; i < c.layers; ++i) {
    b.beginLayer(i);
    std::string block = "single_transformer_blocks." + std::to_string(i);
    SmallVector<Value> mod = adaLnChunks(b, cond, block + ".norm.linear", 3);
    Value normed = b.modulate(b.layerNorm(h, c.normEps), mod[0], mod[1]);
    Value mlp = b.geluTanh(b.linear(normed, block + ".proj_mlp", true));
    auto heads = [&](const char *proj) {
      return b.reshape(b.linear(normed, block + proj, true),
                       {c.batch, tokens, c.heads, headDim});
    };
    Value q = b.rmsNorm(heads(".attn.to_q"), block + ".attn.norm_q.weight",
                        c.normEps);
    Value k = b.rmsNorm(heads(".attn.to_k"), block + ".attn.norm_k.weight",
                        c.normEps);
    Value v = heads(".attn.to_v");
    q = applyRope(b, q, rope, c.rope.interleaved);
    k = applyRope(b, k, rope, c.rope.interleaved);
    Value attn = b.reshape(b.attention(q, k, v, /*causal=*/false),
                           {c.batch, tokens, c.hidden});
    Value out =
        b.linear(b.concat({attn, mlp}, 2), block + ".proj_out", true);
    h = gatedResidual(b, h, mod[2], out);
  }
  b.endLayer();
  Value image = b.slice(h, {0, c.textSeq, 0}, {c.batch, c.seq, c.hidden},
                        {1, 1, 1});
  b.endFunction({{"prediction", ditHead(b, c, image, cond)}});
  ditLoss(b, c);
  return b.finish();
}

} // namespace megc::gen
