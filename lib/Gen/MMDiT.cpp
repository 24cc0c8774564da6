//===- MMDiT.cpp - the MMDiT (Stable Diffusion 3) preset ---------------===//
//
// Joint text/image transformer blocks with adaLN-Zero modulation; each block
// returns two streams (hidden states and encoder hidden states). Parameter
// names follow diffusers' SD3Transformer2DModel.
//
//===----------------------------------------------------------------------===//

#include "DiffusionCommon.h"

using namespace mlir;

namespace megc::gen {

namespace {
/// The modulation and projections of one stream of a joint block.
struct StreamNames {
  std::string norm, q, k, v, out, ffIn, ffOut;
};

StreamNames imageStream(const std::string &block) {
  return {block + ".norm1.linear",  block + ".attn.to_q",
          block + ".attn.to_k",     block + ".attn.to_v",
          block + ".attn.to_out.0", block + ".ff.net.0.proj",
          block + ".ff.net.2"};
}

StreamNames contextStream(const std::string &block) {
  return {block + ".norm1_context.linear", block + ".attn.add_q_proj",
          block + ".attn.add_k_proj",      block + ".attn.add_v_proj",
          block + ".attn.to_add_out",      block + ".ff_context.net.0.proj",
          block + ".ff_context.net.2"};
}

void declareStream(ModelBuilder &b, const StreamNames &n, int64_t hidden) {
  b.linearParams(n.norm, hidden, 6 * hidden, true);
  for (const std::string *name : {&n.q, &n.k, &n.v, &n.out})
    b.linearParams(*name, hidden, hidden, true);
  b.linearParams(n.ffIn, hidden, 4 * hidden, true);
  b.linearParams(n.ffOut, 4 * hidden, hidden, true);
}

/// The per-stream state between the attention halves of a block.
struct Stream {
  Value x;
  SmallVector<Value> mod; // shift/scale/gate for attention, then MLP
  Value q, k, v;
};

Stream streamQKV(ModelBuilder &b, const MMDiTConfig &c, const StreamNames &n,
                 Value x, Value cond, int64_t seq) {
  Stream s;
  s.x = x;
  s.mod = adaLnChunks(b, cond, n.norm, 6);
  Value normed = b.modulate(b.layerNorm(x, c.normEps), s.mod[0], s.mod[1]);
  int64_t headDim = c.hidden / c.heads;
  auto heads = [&](const std::string &proj) {
    return b.reshape(b.linear(normed, proj, true),
                     {c.batch, seq, c.heads, headDim});
  };
  s.q = heads(n.q);
  s.k = heads(n.k);
  s.v = heads(n.v);
  return s;
}

Value streamFinish(ModelBuilder &b, const MMDiTConfig &c, const StreamNames &n,
                   const Stream &s, Value attention) {
  ArrayRef<int64_t> shape = ModelBuilder::shapeOf(s.x);
  Value attn = b.linear(b.reshape(attention, shape), n.out, true);
  Value x = gatedResidual(b, s.x, s.mod[2], attn);
  Value normed = b.modulate(b.layerNorm(x, c.normEps), s.mod[3], s.mod[4]);
  Value ff = b.linear(b.geluTanh(b.linear(normed, n.ffIn, true)), n.ffOut, true);
  return gatedResidual(b, x, s.mod[5], ff);
}
} // namespace

llvm::Expected<OwningOpRef<ModuleOp>> buildMMDiT(MLIRContext &context,
                                                 const MMDiTConfig &c) {
  if (llvm::Error error = checkDiT(c))
    return std::move(error);

  ModelBuilder b(context, c.dtype);
  declareEmbedders(b, c);
  for (int64_t i = 0; i < c.layers; ++i) {
    b.beginLayer(i);
    std::string block = "transformer_blocks." + std::to_string(i);
    declareStream(b, imageStream(block), c.hidden);
    declareStream(b, contextStream(block), c.hidden);
  }
  b.endLayer();
  declareHead(b, c);

  SmallVector<Value> args = b.beginFunction("forward", ditInputs(b, c));
  Value x = b.linear(args[0], "x_embedder", true);
  Value ctx = b.linear(args[1], "context_embedder", true);
  Value cond = args[2];
  for (int64_t i = 0; i < c.layers; ++i) {
    b.beginLayer(i);
    std::string block = "transformer_blocks." + std::to_string(i);
    StreamNames image = imageStream(block), text = contextStream(block);
    Stream xs = streamQKV(b, c, image, x, cond, c.seq);
    Stream cs = streamQKV(b, c, text, ctx, cond, c.textSeq);
    // Joint attention over [image, text] tokens, no mask.
    Value joint = b.attention(b.concat({xs.q, cs.q}, 1),
                              b.concat({xs.k, cs.k}, 1),
                              b.concat({xs.v, cs.v}, 1), /*causal=*/false);
    SmallVector<Value> parts = b.split(joint, 1, {c.seq, c.textSeq});
    x = streamFinish(b, c, image, xs, parts[0]);
    ctx = streamFinish(b, c, text, cs, parts[1]);
  }
  b.endLayer();
  b.endFunction({{"prediction", ditHead(b, c, x, cond)}});
  ditLoss(b, c);
  return b.finish();
}

} // namespace megc::gen
