//===- Deepseek.cpp - the DeepSeek-V3 decoder preset -------------------===//
//
// DeepSeek-V3 with the parameter names and shapes of Hugging Face's
// DeepseekV3ForCausalLM: multi-head latent attention (low-rank query and
// key/value projections with their norms, a decoupled rotary part shared
// by the heads), dense MLPs in the first layers, then mixture-of-experts
// layers: a sigmoid router with group-limited top-k, tokens placed in the
// static capacity of each expert, the experts' SwiGLU MLPs as batched
// products over all experts, and shared experts.
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

int64_t expertCapacity(const DeepseekConfig &c, int64_t tokens) {
  if (c.capacityFactor <= 0.0)
    return tokens;
  double wanted = std::ceil(static_cast<double>(tokens * c.topK) /
                            static_cast<double>(c.routedExperts) *
                            c.capacityFactor);
  return std::clamp<int64_t>(static_cast<int64_t>(wanted), 1, tokens);
}

/// The DeepseekV3ForCausalLM config.json of `c` (default RoPE).
static std::string deepseekHfConfig(const DeepseekConfig &c) {
  llvm::json::Value qLora = nullptr;
  if (c.qLoraRank > 0)
    qLora = c.qLoraRank;
  llvm::json::Object config{
      {"architectures", llvm::json::Array{"DeepseekV3ForCausalLM"}},
      {"model_type", "deepseek_v3"},
      {"vocab_size", c.vocab},
      {"hidden_size", c.hidden},
      {"intermediate_size", c.ffn},
      {"moe_intermediate_size", c.moeFfn},
      {"num_hidden_layers", c.layers},
      {"num_attention_heads", c.heads},
      {"num_key_value_heads", c.heads},
      {"n_shared_experts", c.sharedExperts},
      {"n_routed_experts", c.routedExperts},
      {"num_experts_per_tok", c.topK},
      {"n_group", c.groups},
      {"topk_group", c.topGroups},
      {"first_k_dense_replace", c.firstDense},
      {"routed_scaling_factor", c.routedScaling},
      {"norm_topk_prob", c.normTopkProb},
      {"q_lora_rank", std::move(qLora)},
      {"kv_lora_rank", c.kvLoraRank},
      {"qk_nope_head_dim", c.qkNopeDim},
      {"qk_rope_head_dim", c.qkRopeDim},
      {"v_head_dim", c.vHeadDim},
      {"rope_interleave", c.ropeInterleave},
      {"rope_theta", c.ropeTheta},
      {"attention_bias", c.attentionBias},
      {"hidden_act", "silu"},
      {"max_position_embeddings", c.seq},
      {"rms_norm_eps", c.normEps},
      {"tie_word_embeddings", c.tieEmbeddings},
      {"initializer_range", c.initStd},
      {"dtype", c.dtype == DType::F32    ? "float32"
                : c.dtype == DType::BF16 ? "bfloat16"
                                         : "float16"}};
  return llvm::formatv("{0}", llvm::json::Value(std::move(config))).str();
}

static llvm::Error checkDeepseek(const DeepseekConfig &c) {
  if (llvm::Error error = checkPositive(
          {{"num_hidden_layers", c.layers},
           {"hidden_size", c.hidden},
           {"num_attention_heads", c.heads},
           {"intermediate_size", c.ffn},
           {"vocab_size", c.vocab},
           {"seq", c.seq},
           {"batch", c.batch},
           {"kv_lora_rank", c.kvLoraRank},
           {"qk_nope_head_dim", c.qkNopeDim},
           {"qk_rope_head_dim", c.qkRopeDim},
           {"v_head_dim", c.vHeadDim},
           {"moe_intermediate_size", c.moeFfn},
           {"n_routed_experts", c.routedExperts},
           {"num_experts_per_tok", c.topK},
           {"n_group", c.groups},
           {"topk_group", c.topGroups}}))
    return error;
  if (llvm::Error error = checkDeepseekSizes(c))
    return error;
  if (c.qLoraRank < 0)
    return configError("q_lora_rank must be >= 1 (or none), got " +
                       llvm::Twine(c.qLoraRank));
  if (c.sharedExperts < 0)
    return configError("n_shared_experts must be >= 0, got " +
                       llvm::Twine(c.sharedExperts));
  if (c.firstDense < 0)
    return configError("first_k_dense_replace must be >= 0, got " +
                       llvm::Twine(c.firstDense));
  if (c.qkRopeDim % 2 != 0)
    return configError("qk_rope_head_dim = " + llvm::Twine(c.qkRopeDim) +
                       " must be even (RoPE rotates pairs)");
  if (c.routedExperts % c.groups != 0)
    return configError("n_routed_experts = " + llvm::Twine(c.routedExperts) +
                       " must be a multiple of n_group = " +
                       llvm::Twine(c.groups));
  int64_t perGroup = c.routedExperts / c.groups;
  if (c.groups > 1 && perGroup < 2)
    return configError("each of the n_group = " + llvm::Twine(c.groups) +
                       " groups is scored by its two best experts, but has " +
                       llvm::Twine(perGroup));
  if (c.ep < 1)
    return configError("ep must be >= 1, got " + llvm::Twine(c.ep));
  if (c.routedExperts % c.ep != 0)
    return configError("expert parallelism over ep = " + llvm::Twine(c.ep) +
                       " ranks splits the n_routed_experts = " +
                       llvm::Twine(c.routedExperts) +
                       " experts, which is not a multiple of it");
  if (c.topGroups > c.groups)
    return configError("topk_group = " + llvm::Twine(c.topGroups) +
                       " exceeds n_group = " + llvm::Twine(c.groups));
  if (c.topK > c.topGroups * perGroup)
    return configError("num_experts_per_tok = " + llvm::Twine(c.topK) +
                       " exceeds the " + llvm::Twine(c.topGroups * perGroup) +
                       " experts of the topk_group = " +
                       llvm::Twine(c.topGroups) + " groups kept");
  if (!(c.routedScaling > 0.0) || !std::isfinite(c.routedScaling))
    return configError("routed_scaling_factor must be a finite number > 0");
  if (c.auxLossCoeff < 0.0 || !std::isfinite(c.auxLossCoeff))
    return configError("--moe-aux-loss-coeff must be a finite number >= 0, "
                       "got " +
                       formatNumber(c.auxLossCoeff));
  if (c.biasUpdateRate < 0.0 || !std::isfinite(c.biasUpdateRate))
    return configError("--moe-bias-update-rate must be a finite number >= 0, "
                       "got " +
                       formatNumber(c.biasUpdateRate));
  if (c.capacityFactor < 0.0 || !std::isfinite(c.capacityFactor))
    return configError("--moe-capacity-factor must be >= 0 (0: no token is "
                       "dropped), got " +
                       formatNumber(c.capacityFactor));
  if (!(c.normEps > 0.0))
    return configError("rms_norm_eps must be > 0");
  if (!(c.ropeTheta > 0.0))
    return configError("rope_theta must be > 0");
  if (!(c.initStd > 0.0) || !std::isfinite(c.initStd))
    return configError("the initialisation std must be a finite number > 0");
  return llvm::Error::success();
}

/// A SwiGLU MLP `down(silu(gate(x)) * up(x))` named `prefix`.{gate,up,down}_proj.
static Value swiglu(ModelBuilder &b, Value x, const std::string &prefix) {
  Value gate = b.silu(b.linear(x, prefix + ".gate_proj", false));
  Value up = b.linear(x, prefix + ".up_proj", false);
  return b.linear(b.mul(gate, up), prefix + ".down_proj", false);
}

static void swigluParams(ModelBuilder &b, const std::string &prefix,
                         int64_t hidden, int64_t width) {
  b.linearParams(prefix + ".gate_proj", hidden, width, false);
  b.linearParams(prefix + ".up_proj", hidden, width, false);
  b.linearParams(prefix + ".down_proj", width, hidden, false);
}

/// The name of the routed experts' `proj` weights of MoE MLP `mlp`,
/// stacked into [E, out, in] for the batched products.
static std::string expertsName(const std::string &mlp, StringRef proj) {
  return mlp + ".experts." + proj.str() + ".weight";
}

/// The routed experts' weights `mlp`.experts.`proj`.weight [E, out, in],
/// which checkpoints hold as `mlp`.experts.{e}.`proj`.weight.
static void expertParams(ModelBuilder &b, const std::string &mlp,
                         StringRef proj, int64_t experts, int64_t out,
                         int64_t in) {
  std::vector<std::string> parts;
  for (int64_t e = 0; e < experts; ++e)
    parts.push_back(mlp + ".experts." + std::to_string(e) + "." + proj.str() +
                    ".weight");
  b.expertWeights(expertsName(mlp, proj), {experts, out, in}, parts);
}

namespace {
struct MoeLayer {
  Value output;  // [B, S, H]
  Value dropped; // f32 scalar: choices over capacity
  Value auxLoss; // f32 scalar, or null without the balance loss
};
} // namespace

/// A mixture-of-experts MLP on `x` [B, S, H].
static MoeLayer moeLayer(ModelBuilder &b, const DeepseekConfig &c, Value x,
                         const std::string &mlp) {
  int64_t tokens = c.batch * c.seq, experts = c.routedExperts;
  Value flat = b.reshape(x, {tokens, c.hidden});
  Type f32 = Float32Type::get(b.dtype().getContext());
  auto toF32 = [&](Value v) { return b.dtype().isF32() ? v : b.cast(v, f32); };
  // The router in f32: sigmoid scores, biased for the selection only.
  Value scores = b.sigmoid(b.matmul(toF32(flat), b.param(mlp + ".gate.weight"),
                                    /*transposeRhs=*/true));
  auto [chosen, weights] =
      b.moeRoute(scores, b.param(mlp + ".gate.e_score_correction_bias"), c.topK,
                 c.groups, c.topGroups, c.normTopkProb, c.routedScaling);
  int64_t capacity = expertCapacity(c, tokens);
  ModelBuilder::MoeSlots slots =
      b.moeAssign(chosen, weights, experts, capacity,
                  c.dropPolicy == MoeDropPolicy::Probs);
  // Tokens into their experts' slots [E, C, H], the experts' MLPs as
  // products batched over the experts, and each choice's output back to its
  // token.
  Value work = b.gatherRows(flat, slots.slotTokens, slots.positions);
  int64_t ep = b.expertParallel(), local = experts / ep;
  Value sent = ep > 1 ? b.allToAllExperts(work) : Value();
  // The shared experts need no exchange: built here, between the dispatch
  // and its first reader, they run while the slots move
  // (meg-async-collectives).
  Value shared = c.sharedExperts > 0 ? swiglu(b, x, mlp + ".shared_experts")
                                     : Value();
  if (ep > 1) {
    // Expert parallelism: each rank's slots of the experts of rank r go to
    // rank r, which receives [ep sources, E/ep, C, H] and runs its experts
    // on the slots of every source.
    Value received = b.reshape(sent, {ep, local, capacity, c.hidden});
    work = b.reshape(b.transpose(received, {1, 0, 2, 3}),
                     {local, ep * capacity, c.hidden});
  }
  Value gate = b.matmul(work, b.param(expertsName(mlp, "gate_proj")),
                        /*transposeRhs=*/true);
  Value up = b.matmul(work, b.param(expertsName(mlp, "up_proj")),
                      /*transposeRhs=*/true);
  Value expertOut = b.matmul(b.mul(b.silu(gate), up),
                             b.param(expertsName(mlp, "down_proj")), true);
  if (ep > 1) {
    // And the outputs back to the ranks whose tokens they are.
    Value bySource = b.transpose(
        b.reshape(expertOut, {local, ep, capacity, c.hidden}), {1, 0, 2, 3});
    expertOut = b.allToAllExperts(
        b.reshape(bySource, {experts, capacity, c.hidden}));
  }
  Value outRows = b.reshape(expertOut, {experts * capacity, c.hidden});
  Value perChoice = b.gatherRows(
      outRows, slots.positions,
      b.reshape(slots.slotChoices, {experts * capacity, 1}));
  Value weighted =
      b.mul(perChoice, b.cast(b.reshape(weights, {tokens, c.topK, 1}),
                              b.dtype()));
  Value routed = b.reshape(b.reduceSum(weighted, {1}),
                           {c.batch, c.seq, c.hidden});
  if (shared)
    routed = b.add(routed, shared);
  Value aux;
  if (c.auxLossCoeff > 0.0) {
    // DeepSeek-V3's sequence-wise balance loss, per sequence
    // sum_i f_i P_i: f_i = E / (k S) times the sequence's choices of expert
    // i (a count, so no gradient: one-hot rows of an identity matrix,
    // summed), P_i the sequence's mean of s_i / sum_j s_j; the mean over
    // the sequences, times the coefficient.
    SmallVector<float> identity(experts * experts, 0.0f);
    for (int64_t e = 0; e < experts; ++e)
      identity[e * experts + e] = 1.0f;
    Value eye = b.reshape(b.constantF32(identity), {experts, experts});
    Value oneHot = b.reshape(b.gatherRows(eye, chosen, Value()),
                             {c.batch, c.seq, c.topK, experts});
    auto scalar = [&](double value) {
      return b.reshape(b.constantF32({static_cast<float>(value)}), {});
    };
    Value share = b.stopGradient(
        b.mul(b.reduceSum(oneHot, {1, 2}),
              scalar(static_cast<double>(experts) /
                     static_cast<double>(c.topK * c.seq))));
    Value normalized = b.div(
        scores, b.reshape(b.reduceSum(scores, {1}), {tokens, 1}));
    Value meanScore =
        b.mul(b.reduceSum(b.reshape(normalized, {c.batch, c.seq, experts}),
                          {1}),
              scalar(1.0 / static_cast<double>(c.seq)));
    aux = b.mul(b.reduceSum(b.mul(share, meanScore), {0, 1}),
                scalar(c.auxLossCoeff / static_cast<double>(c.batch)));
  }
  if (c.biasUpdateRate > 0.0)
    // The routed choices per expert, before any is dropped: the load the
    // bias balances.
    b.expertBiasUpdate(mlp + ".gate.e_score_correction_bias",
                       b.cast(slots.load, f32), c.biasUpdateRate);
  return {routed, b.cast(slots.dropped, f32), aux};
}

llvm::Expected<OwningOpRef<ModuleOp>> buildDeepseek(MLIRContext &context,
                                                    const DeepseekConfig &c) {
  if (llvm::Error error = checkDeepseek(c))
    return std::move(error);
  ModelBuilder b(context, c.dtype);
  b.setInitStd(c.initStd);
  b.setExpertParallel(c.ep);
  int64_t qkDim = c.qkNopeDim + c.qkRopeDim;
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
    if (c.qLoraRank > 0) {
      b.linearParams(attn + ".q_a_proj", c.hidden, c.qLoraRank,
                     c.attentionBias);
      b.ones(attn + ".q_a_layernorm.weight", {c.qLoraRank});
      b.linearParams(attn + ".q_b_proj", c.qLoraRank, c.heads * qkDim, false);
    } else {
      b.linearParams(attn + ".q_proj", c.hidden, c.heads * qkDim, false);
    }
    b.linearParams(attn + ".kv_a_proj_with_mqa", c.hidden,
                   c.kvLoraRank + c.qkRopeDim, c.attentionBias);
    b.ones(attn + ".kv_a_layernorm.weight", {c.kvLoraRank});
    b.linearParams(attn + ".kv_b_proj", c.kvLoraRank,
                   c.heads * (c.qkNopeDim + c.vHeadDim), false);
    b.linearParams(attn + ".o_proj", c.heads * c.vHeadDim, c.hidden,
                   c.attentionBias);
    b.ones(layer + ".post_attention_layernorm.weight", {c.hidden});
    std::string mlp = layer + ".mlp";
    if (i < c.firstDense) {
      swigluParams(b, mlp, c.hidden, c.ffn);
      continue;
    }
    // The router stays f32 in every dtype, as transformers keeps it.
    b.weightF32(mlp + ".gate.weight", {c.routedExperts, c.hidden});
    b.frozenZerosF32(mlp + ".gate.e_score_correction_bias", {c.routedExperts});
    expertParams(b, mlp, "gate_proj", c.routedExperts, c.moeFfn, c.hidden);
    expertParams(b, mlp, "up_proj", c.routedExperts, c.moeFfn, c.hidden);
    expertParams(b, mlp, "down_proj", c.routedExperts, c.hidden, c.moeFfn);
    if (c.sharedExperts > 0)
      swigluParams(b, mlp + ".shared_experts", c.hidden,
                   c.moeFfn * c.sharedExperts);
  }
  b.endLayer();
  b.ones("model.norm.weight", {c.hidden});
  if (!c.tieEmbeddings)
    b.linearParams("lm_head", c.hidden, c.vocab, false);

  Type i32 = IntegerType::get(&context, 32);
  RankedTensorType idsType = b.tensor({c.batch, c.seq}, i32);
  // forward(input_ids) -> logits, dropped_tokens (the routed choices over
  // their experts' capacity, summed over the MoE layers).
  Value ids = b.beginFunction("forward", {{"input_ids", idsType}}).front();
  Value hidden = b.embedding(b.param(embedName), ids);
  RopeConfig ropeConfig;
  ropeConfig.interleaved = c.ropeInterleave;
  ropeConfig.theta = c.ropeTheta;
  ropeConfig.yarn = c.yarn;
  // (nope + rope)^-0.5, times mscale(factor, mscale_all_dim)^2 under YaRN.
  double softmaxScale =
      1.0 / std::sqrt(static_cast<double>(c.qkNopeDim + c.qkRopeDim));
  if (c.yarn && c.yarn->mscaleAllDim != 0.0) {
    double m = yarnMscale(c.yarn->factor, c.yarn->mscaleAllDim);
    softmaxScale *= m * m;
  }
  RopeTables rope = buildRopeTables(b, c.seq, c.qkRopeDim, ropeConfig);
  // MLA's own norms use the config's epsilon, as transformers does.
  Value dropped, auxLoss;
  for (int64_t i = 0; i < c.layers; ++i) {
    b.beginLayer(i);
    std::string layer = "model.layers." + std::to_string(i);
    std::string attn = layer + ".self_attn";
    Value x = b.rmsNorm(hidden, layer + ".input_layernorm.weight", c.normEps);
    Value q;
    if (c.qLoraRank > 0)
      q = b.linear(b.rmsNorm(b.linear(x, attn + ".q_a_proj", c.attentionBias),
                             attn + ".q_a_layernorm.weight", 1e-6),
                   attn + ".q_b_proj", false);
    else
      q = b.linear(x, attn + ".q_proj", false);
    q = b.reshape(q, {c.batch, c.seq, c.heads, qkDim});
    SmallVector<Value> qParts = b.split(q, 3, {c.qkNopeDim, c.qkRopeDim});
    Value compressed =
        b.linear(x, attn + ".kv_a_proj_with_mqa", c.attentionBias);
    SmallVector<Value> cParts =
        b.split(compressed, 2, {c.kvLoraRank, c.qkRopeDim});
    Value kv = b.linear(
        b.rmsNorm(cParts[0], attn + ".kv_a_layernorm.weight", 1e-6),
        attn + ".kv_b_proj", false);
    kv = b.reshape(kv, {c.batch, c.seq, c.heads, c.qkNopeDim + c.vHeadDim});
    SmallVector<Value> kvParts = b.split(kv, 3, {c.qkNopeDim, c.vHeadDim});
    // The rotary part: one key head that every query head shares.
    Value kRot = b.reshape(cParts[1], {c.batch, c.seq, 1, c.qkRopeDim});
    Value qRot = applyRope(b, qParts[1], rope, c.ropeInterleave);
    kRot = applyRope(b, kRot, rope, c.ropeInterleave);
    kRot = b.broadcastTo(kRot, {c.batch, c.seq, c.heads, c.qkRopeDim});
    Value query = b.concat({qParts[0], qRot}, 3);
    Value key = b.concat({kvParts[0], kRot}, 3);
    Value a = b.reshape(b.attention(query, key, kvParts[1], /*causal=*/true,
                                    softmaxScale),
                        {c.batch, c.seq, c.heads * c.vHeadDim});
    hidden = b.add(hidden, b.linear(a, attn + ".o_proj", c.attentionBias));

    std::string mlp = layer + ".mlp";
    x = b.rmsNorm(hidden, layer + ".post_attention_layernorm.weight",
                  c.normEps);
    if (i < c.firstDense) {
      hidden = b.add(hidden, swiglu(b, x, mlp));
    } else {
      MoeLayer moe = moeLayer(b, c, x, mlp);
      hidden = b.add(hidden, moe.output);
      dropped = dropped ? b.add(dropped, moe.dropped) : moe.dropped;
      if (moe.auxLoss)
        auxLoss = auxLoss ? b.add(auxLoss, moe.auxLoss) : moe.auxLoss;
    }
    b.endLayer();
  }
  hidden = b.rmsNorm(hidden, "model.norm.weight", c.normEps);
  Value logits = c.tieEmbeddings ? b.linearWith(hidden, embedName)
                                 : b.linear(hidden, "lm_head", false);
  if (!dropped)
    dropped = b.reshape(b.constantF32({0.0f}), {});
  SmallVector<NamedValue> outputs = {{"logits", logits},
                                     {"dropped_tokens", dropped}};
  if (auxLoss)
    outputs.push_back({"moe_aux_loss", auxLoss});
  b.endFunction(outputs);

  SmallVector<Value> args =
      b.beginFunction("loss", {{"input_ids", idsType}, {"labels", idsType}});
  ValueRange forward = b.call("forward", args[0]);
  Value loss = b.crossEntropyMean(forward[0], args[1], c.ignoreIndex);
  if (auxLoss)
    loss = b.add(loss, forward[2]);
  b.endFunction({{"loss", loss}});
  llvm::Expected<OwningOpRef<ModuleOp>> module = b.finish();
  if (!module)
    return module.takeError();
  (**module)->setAttr(
      meg::MegDialect::kHfConfigAttrName,
      StringAttr::get(&context,
                      c.hfConfig.empty() ? deepseekHfConfig(c) : c.hfConfig));
  return module;
}

} // namespace megc::gen
