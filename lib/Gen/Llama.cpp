//===- Llama.cpp - the Llama decoder preset ----------------------------===//
//
// A Llama-style decoder with the parameter names and shapes of Hugging
// Face's LlamaForCausalLM (no biases, untied head), RoPE unfused.
//
//===----------------------------------------------------------------------===//

#include "ModelBuilder.h"

#include "llvm/ADT/Twine.h"

using namespace mlir;

namespace megc::gen {

static llvm::Error checkLlama(const LlamaConfig &c) {
  if (llvm::Error error = checkPositive({{"layers", c.layers},
                                         {"hidden", c.hidden},
                                         {"heads", c.heads},
                                         {"kv-heads", c.kvHeads},
                                         {"ffn", c.ffn},
                                         {"vocab", c.vocab},
                                         {"seq", c.seq},
                                         {"batch", c.batch}}))
    return error;
  if (c.hidden % c.heads != 0)
    return configError("--hidden " + llvm::Twine(c.hidden) +
                       " must be a multiple of --heads " +
                       llvm::Twine(c.heads));
  if (c.heads % c.kvHeads != 0)
    return configError("--heads " + llvm::Twine(c.heads) +
                       " must be a multiple of --kv-heads " +
                       llvm::Twine(c.kvHeads));
  if (!(c.normEps > 0.0))
    return configError("--norm-eps must be > 0");
  return llvm::Error::success();
}

llvm::Expected<OwningOpRef<ModuleOp>> buildLlama(MLIRContext &context,
                                                 const LlamaConfig &c) {
  if (llvm::Error error = checkLlama(c))
    return std::move(error);
  int64_t headDim = c.hidden / c.heads;
  llvm::Expected<int64_t> rotaryDim = rotaryDimFor(headDim, c.rope);
  if (!rotaryDim)
    return rotaryDim.takeError();

  ModelBuilder b(context, c.dtype);
  int64_t kvDim = c.kvHeads * headDim;
  b.weight("model.embed_tokens.weight", {c.vocab, c.hidden});
  for (int64_t i = 0; i < c.layers; ++i) {
    std::string layer = "model.layers." + std::to_string(i);
    b.ones(layer + ".input_layernorm.weight", {c.hidden});
    b.linearParams(layer + ".self_attn.q_proj", c.hidden, c.hidden, false);
    b.linearParams(layer + ".self_attn.k_proj", c.hidden, kvDim, false);
    b.linearParams(layer + ".self_attn.v_proj", c.hidden, kvDim, false);
    b.linearParams(layer + ".self_attn.o_proj", c.hidden, c.hidden, false);
    b.ones(layer + ".post_attention_layernorm.weight", {c.hidden});
    b.linearParams(layer + ".mlp.gate_proj", c.hidden, c.ffn, false);
    b.linearParams(layer + ".mlp.up_proj", c.hidden, c.ffn, false);
    b.linearParams(layer + ".mlp.down_proj", c.ffn, c.hidden, false);
  }
  b.ones("model.norm.weight", {c.hidden});
  b.linearParams("lm_head", c.hidden, c.vocab, false);

  Type i32 = IntegerType::get(&context, 32);
  RankedTensorType idsType = b.tensor({c.batch, c.seq}, i32);

  // forward(input_ids) -> logits
  Value ids = b.beginFunction("forward", {{"input_ids", idsType}}).front();
  Value hidden = b.embedding(b.param("model.embed_tokens.weight"), ids);
  RopeTables rope = buildRopeTables(b, c.seq, *rotaryDim, c.rope);
  for (int64_t i = 0; i < c.layers; ++i) {
    std::string layer = "model.layers." + std::to_string(i);
    std::string attn = layer + ".self_attn";
    Value x = b.rmsNorm(hidden, layer + ".input_layernorm.weight", c.normEps);
    Value q = b.reshape(b.linear(x, attn + ".q_proj", false),
                        {c.batch, c.seq, c.heads, headDim});
    Value k = b.reshape(b.linear(x, attn + ".k_proj", false),
                        {c.batch, c.seq, c.kvHeads, headDim});
    Value v = b.reshape(b.linear(x, attn + ".v_proj", false),
                        {c.batch, c.seq, c.kvHeads, headDim});
    q = applyRope(b, q, rope, c.rope.interleaved);
    k = applyRope(b, k, rope, c.rope.interleaved);
    Value a = b.reshape(b.attention(q, k, v, /*causal=*/true),
                        {c.batch, c.seq, c.hidden});
    hidden = b.add(hidden, b.linear(a, attn + ".o_proj", false));

    std::string mlp = layer + ".mlp";
    x = b.rmsNorm(hidden, layer + ".post_attention_layernorm.weight",
                  c.normEps);
    Value gate = b.silu(b.linear(x, mlp + ".gate_proj", false));
    Value up = b.linear(x, mlp + ".up_proj", false);
    hidden = b.add(hidden, b.linear(b.mul(gate, up), mlp + ".down_proj", false));
  }
  hidden = b.rmsNorm(hidden, "model.norm.weight", c.normEps);
  Value logits = b.linear(hidden, "lm_head", false);
  b.endFunction({{"logits", logits}});

  // loss(input_ids, labels) -> mean token cross-entropy (labels not shifted)
  SmallVector<Value> args =
      b.beginFunction("loss", {{"input_ids", idsType}, {"labels", idsType}});
  Value lossLogits = b.call("forward", args[0]).front();
  b.endFunction({{"loss", b.crossEntropyMean(lossLogits, args[1])}});
  return b.finish();
}

} // namespace megc::gen
