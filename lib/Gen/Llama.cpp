//===- Llama.cpp - the Llama decoder preset ----------------------------===//
//
// A Llama-style decoder with the parameter names and shapes of Hugging
// Face's LlamaForCausalLM, RoPE unfused, and the family's variations that
// `megc import` reads from configs: biases, an explicit head dim, Qwen3's
// q/k norms, tied embeddings, Llama 3 RoPE scaling.
//
//===----------------------------------------------------------------------===//

#include "ConfigSizes.h"
#include "ModelBuilder.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <cmath>

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
  if (c.headDim < 0)
    return configError("head dim must be >= 1, got " + llvm::Twine(c.headDim));
  if (llvm::Error error = checkLlamaSizes(c, kLlamaFlags))
    return error;
  if (c.headDim == 0 && c.hidden % c.heads != 0)
    return configError("--hidden " + llvm::Twine(c.hidden) +
                       " must be a multiple of --heads " +
                       llvm::Twine(c.heads));
  if (c.heads % c.kvHeads != 0)
    return configError("--heads " + llvm::Twine(c.heads) +
                       " must be a multiple of --kv-heads " +
                       llvm::Twine(c.kvHeads));
  if (c.tp < 0)
    return configError("tp must be >= 1, got " + llvm::Twine(c.tp));
  if (c.sequenceParallel && c.tp == 0)
    return configError("--sequence-parallel needs tensor parallelism (tp in "
                       "--mesh)");
  if (c.sequenceParallel && c.seq % c.tp != 0)
    return configError("sequence parallelism over tp = " + llvm::Twine(c.tp) +
                       " ranks splits the sequence, but --seq " +
                       llvm::Twine(c.seq) + " is not a multiple of " +
                       llvm::Twine(c.tp));
  if (c.tp > 1) {
    for (auto [what, extent] :
         {std::pair<const char *, int64_t>{"attention heads", c.heads},
          {"MLP features (ffn)", c.ffn},
          {"vocabulary (the embedding and LM head are vocab-parallel)",
           c.vocab}})
      if (extent % c.tp != 0)
        return configError(llvm::Twine("tensor parallelism over tp = ") +
                           llvm::Twine(c.tp) + " ranks splits the " + what +
                           ", but " + llvm::Twine(extent) +
                           " is not a multiple of " + llvm::Twine(c.tp));
    // Each rank takes whole query groups, or a share of one.
    if (c.kvHeads % c.tp != 0 && c.tp % c.kvHeads != 0)
      return configError(
          "tensor parallelism over tp = " + llvm::Twine(c.tp) +
          " ranks splits the query groups (key/value heads), but " +
          llvm::Twine(c.kvHeads) + " is not a multiple of " +
          llvm::Twine(c.tp) + ", nor " + llvm::Twine(c.tp) +
          " a multiple of it (each rank then taking its group's)");
  }
  if (!(c.normEps > 0.0))
    return configError("--norm-eps must be > 0");
  if (!(c.initStd > 0.0) || !std::isfinite(c.initStd))
    return configError("the initialisation std must be a finite number > 0, "
                       "got " +
                       formatNumber(c.initStd));
  return llvm::Error::success();
}

static const char *hfDTypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "float32";
  case DType::BF16:
    return "bfloat16";
  case DType::F16:
    return "float16";
  }
  llvm_unreachable("unknown dtype");
}

std::string llamaHfConfig(const LlamaConfig &c) {
  if (c.rope.interleaved || c.rope.percent != 1.0 || c.qkvBias != c.outputBias ||
      c.qkNorm)
    return "";
  llvm::json::Object config{
      {"architectures", llvm::json::Array{"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"vocab_size", c.vocab},
      {"hidden_size", c.hidden},
      {"intermediate_size", c.ffn},
      {"num_hidden_layers", c.layers},
      {"num_attention_heads", c.heads},
      {"num_key_value_heads", c.kvHeads},
      {"head_dim", c.headDim ? c.headDim : c.hidden / c.heads},
      {"hidden_act", "silu"},
      {"max_position_embeddings", c.seq},
      {"rms_norm_eps", c.normEps},
      {"rope_theta", c.rope.theta},
      {"attention_bias", c.qkvBias},
      {"mlp_bias", c.mlpBias},
      {"tie_word_embeddings", c.tieEmbeddings},
      {"initializer_range", c.initStd},
      {"dtype", hfDTypeName(c.dtype)}};
  if (c.rope.llama3)
    config["rope_scaling"] = llvm::json::Object{
        {"rope_type", "llama3"},
        {"factor", c.rope.llama3->factor},
        {"low_freq_factor", c.rope.llama3->lowFreqFactor},
        {"high_freq_factor", c.rope.llama3->highFreqFactor},
        {"original_max_position_embeddings",
         c.rope.llama3->originalMaxPositions}};
  return llvm::formatv("{0}", llvm::json::Value(std::move(config))).str();
}

llvm::Expected<OwningOpRef<ModuleOp>> buildLlama(MLIRContext &context,
                                                 const LlamaConfig &c) {
  if (llvm::Error error = checkLlama(c))
    return std::move(error);
  int64_t headDim = c.headDim ? c.headDim : c.hidden / c.heads;
  llvm::Expected<int64_t> rotaryDim = rotaryDimFor(headDim, c.rope);
  if (!rotaryDim)
    return rotaryDim.takeError();

  ModelBuilder b(context, c.dtype);
  b.setInitStd(c.initStd);
  if (c.tp)
    b.setTensorParallel(c.tp, c.sequenceParallel);
  int64_t qDim = c.heads * headDim;
  int64_t kvDim = c.kvHeads * headDim;
  const char *embedName = "model.embed_tokens.weight";
  if (c.tieEmbeddings)
    b.weight(embedName, {c.vocab, c.hidden}, {"lm_head.weight"});
  else
    b.weight(embedName, {c.vocab, c.hidden});
  for (int64_t i = 0; i < c.layers; ++i) {
    b.beginLayer(i);
    std::string layer = "model.layers." + std::to_string(i);
    std::string attn = layer + ".self_attn";
    b.ones(layer + ".input_layernorm.weight", {c.hidden});
    b.linearParams(attn + ".q_proj", c.hidden, qDim, c.qkvBias);
    b.linearParams(attn + ".k_proj", c.hidden, kvDim, c.qkvBias);
    b.linearParams(attn + ".v_proj", c.hidden, kvDim, c.qkvBias);
    b.linearParams(attn + ".o_proj", qDim, c.hidden, c.outputBias);
    if (c.qkNorm) {
      b.ones(attn + ".q_norm.weight", {headDim});
      b.ones(attn + ".k_norm.weight", {headDim});
    }
    b.ones(layer + ".post_attention_layernorm.weight", {c.hidden});
    b.linearParams(layer + ".mlp.gate_proj", c.hidden, c.ffn, c.mlpBias);
    b.linearParams(layer + ".mlp.up_proj", c.hidden, c.ffn, c.mlpBias);
    b.linearParams(layer + ".mlp.down_proj", c.ffn, c.hidden, c.mlpBias);
  }
  b.endLayer();
  b.ones("model.norm.weight", {c.hidden});
  if (!c.tieEmbeddings)
    b.linearParams("lm_head", c.hidden, c.vocab, false);

  Type i32 = IntegerType::get(&context, 32);
  RankedTensorType idsType = b.tensor({c.batch, c.seq}, i32);

  // forward(input_ids) -> logits. Each layer records how Megatron splits
  // it (meg-tensor-parallel applies that under --mesh tp=N): q/k/v (whole
  // heads: groups) and gate/up column-parallel, o and down row-parallel,
  // the embedding and the LM head vocab-parallel.
  using TP = meg::TpLayerKind;
  Value ids = b.beginFunction("forward", {{"input_ids", idsType}}).front();
  Value hidden = b.tpLayer(b.embedding(b.param(embedName), ids), TP::vocab);
  RopeTables rope = buildRopeTables(b, c.seq, *rotaryDim, c.rope);
  for (int64_t i = 0; i < c.layers; ++i) {
    b.beginLayer(i);
    std::string layer = "model.layers." + std::to_string(i);
    std::string attn = layer + ".self_attn";
    Value x = b.rmsNorm(hidden, layer + ".input_layernorm.weight", c.normEps);
    auto project = [&](const char *proj, int64_t heads) {
      Value projected =
          b.tpLayer(b.linear(x, attn + proj, c.qkvBias), TP::column, heads);
      return b.reshape(projected, {c.batch, c.seq, heads, headDim});
    };
    Value q = project(".q_proj", c.heads);
    Value k = project(".k_proj", c.kvHeads);
    Value v = project(".v_proj", c.kvHeads);
    if (c.qkNorm) {
      q = b.rmsNorm(q, attn + ".q_norm.weight", c.normEps);
      k = b.rmsNorm(k, attn + ".k_norm.weight", c.normEps);
    }
    q = applyRope(b, q, rope, c.rope.interleaved);
    k = applyRope(b, k, rope, c.rope.interleaved);
    Value a = b.reshape(b.attention(q, k, v, /*causal=*/true),
                        {c.batch, c.seq, qDim});
    hidden =
        b.add(hidden,
              b.tpLayer(b.linear(a, attn + ".o_proj", c.outputBias), TP::row));

    std::string mlp = layer + ".mlp";
    x = b.rmsNorm(hidden, layer + ".post_attention_layernorm.weight",
                  c.normEps);
    Value gate = b.silu(
        b.tpLayer(b.linear(x, mlp + ".gate_proj", c.mlpBias), TP::column));
    Value up = b.tpLayer(b.linear(x, mlp + ".up_proj", c.mlpBias), TP::column);
    hidden = b.add(hidden, b.tpLayer(b.linear(b.mul(gate, up),
                                              mlp + ".down_proj", c.mlpBias),
                                     TP::row));
    b.endLayer();
  }
  hidden = b.rmsNorm(hidden, "model.norm.weight", c.normEps);
  Value logits = b.tpLayer(c.tieEmbeddings ? b.linearWith(hidden, embedName)
                                           : b.linear(hidden, "lm_head", false),
                           TP::column);
  b.endFunction({{"logits", logits}});

  // loss(input_ids, labels) -> mean token cross-entropy (labels not
  // shifted) over the labels other than the ignore index
  SmallVector<Value> args =
      b.beginFunction("loss", {{"input_ids", idsType}, {"labels", idsType}});
  Value lossLogits = b.call("forward", args[0]).front();
  b.endFunction(
      {{"loss", b.crossEntropyMean(lossLogits, args[1], c.ignoreIndex)}});
  llvm::Expected<OwningOpRef<ModuleOp>> module = b.finish();
  if (!module)
    return module.takeError();
  std::string hfConfig = c.hfConfig.empty() ? llamaHfConfig(c) : c.hfConfig;
  if (!hfConfig.empty())
    (**module)->setAttr(meg::MegDialect::kHfConfigAttrName,
                        StringAttr::get(&context, hfConfig));
  return module;
}

} // namespace megc::gen
