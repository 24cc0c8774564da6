//===- Presets.h - model presets written as meg IR --------------*- C++ -*-===//
//
// Builds whole models (Llama decoder, MMDiT, Flux single-stream) as meg
// modules, with RoPE in the unfused form a framework exports.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_GEN_PRESETS_H
#define MEGC_GEN_PRESETS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace megc::gen {

/// Element type of parameters and activations.
enum class DType { F32, BF16, F16 };

/// Parses `f32`, `bf16` or `f16`.
llvm::Expected<DType> parseDType(llvm::StringRef text);

/// Llama 3.x frequency scaling (`rope_scaling` of type `llama3`): with
/// wavelength `2 pi / inv_freq` and L = originalMaxPositions, frequencies of
/// wavelength above L / lowFreqFactor are divided by `factor`, those below
/// L / highFreqFactor kept, and those between interpolated.
struct Llama3RopeScaling {
  double factor = 8.0, lowFreqFactor = 1.0, highFreqFactor = 4.0;
  int64_t originalMaxPositions = 8192;
};

/// YaRN frequency scaling (`rope_type` yarn, DeepSeek-V3's): frequencies
/// whose wavelength is long against `originalMaxPositions` are divided by
/// `factor`, short ones kept, and a linear ramp over the dimensions between
/// the correction range of `betaFast` and `betaSlow` rotations blends the
/// two; cos and sin are scaled by the attention factor (the ratio of the
/// mscale terms), and DeepSeek's softmax scale by mscale(mscaleAllDim)^2.
struct YarnRopeScaling {
  double factor = 40.0, betaFast = 32.0, betaSlow = 1.0;
  int64_t originalMaxPositions = 4096;
  double mscale = 0.0, mscaleAllDim = 0.0;
  std::optional<double> attentionFactor;
  bool truncate = true;
};

/// Rotary embedding settings shared by the presets that use RoPE.
struct RopeConfig {
  bool interleaved = false;
  double percent = 1.0;
  double theta = 10000.0;
  std::optional<Llama3RopeScaling> llama3;
  std::optional<YarnRopeScaling> yarn;
};

/// A Llama-style decoder with Hugging Face parameter names; the fields after
/// `normEps` are the variations of the Llama family that `megc import`
/// reads from a config (Mistral, Qwen2, Qwen3).
struct LlamaConfig {
  int64_t layers = 2, hidden = 64, heads = 4, kvHeads = 2, ffn = 176;
  int64_t vocab = 256, seq = 16, batch = 2;
  DType dtype = DType::F32;
  RopeConfig rope;
  double normEps = 1e-5;
  /// Width of one attention head; 0 means hidden / heads.
  int64_t headDim = 0;
  /// Biases on q, k and v; on o; on gate, up and down.
  bool qkvBias = false, outputBias = false, mlpBias = false;
  /// RMSNorm of each query and key head before RoPE (Qwen3's q_norm and
  /// k_norm, weight [head_dim], epsilon normEps).
  bool qkNorm = false;
  /// The LM head reads model.embed_tokens.weight: one parameter, both uses,
  /// known to checkpoints under both names.
  bool tieEmbeddings = false;
  /// Standard deviation of the normal initialisation of the weights.
  double initStd = 0.02;
  /// The label the loss ignores (PyTorch's and Hugging Face's -100 for
  /// padding): the loss is the mean over the other tokens of the global
  /// batch. None: every label is a class.
  std::optional<int64_t> ignoreIndex = -100;
  /// Tensor-parallel ranks (--mesh tp=N, one included): attention heads and
  /// MLP features split over them as Megatron's column- and row-parallel
  /// layers; 0: no tensor parallelism.
  int64_t tp = 0;
  /// With tensor parallelism: norms and residual adds on sequence shards of
  /// seq / tp tokens, all-gathered into each attention and MLP block and
  /// reduce-scattered out of it.
  bool sequenceParallel = false;
  /// The Hugging Face config (a JSON object) that the model is, recorded on
  /// the module as meg.hf_config; empty: derived from the fields above when
  /// Hugging Face's LlamaForCausalLM can express them.
  std::string hfConfig;
};

/// Which routed tokens an expert over its capacity keeps: those of the
/// largest routing weight, or the earliest.
enum class MoeDropPolicy { Probs, Position };

/// A DeepSeek-V3 decoder (Hugging Face's DeepseekV3ForCausalLM): MLA
/// attention and, from layer `firstDense` on, mixture-of-experts MLPs with
/// group-limited sigmoid routing, static expert capacity and shared
/// experts. Field names follow the config's.
struct DeepseekConfig {
  int64_t layers = 2, hidden = 64, heads = 4, ffn = 128, vocab = 256;
  int64_t seq = 16, batch = 2;
  DType dtype = DType::F32;
  /// MLA: the query's low rank (0: a plain q_proj), the keys' and values'
  /// low rank, and the per-head widths.
  int64_t qLoraRank = 0, kvLoraRank = 32;
  int64_t qkNopeDim = 16, qkRopeDim = 8, vHeadDim = 16;
  bool attentionBias = false;
  /// The rotary part's inputs are interleaved pairs (DeepSeek's layout).
  bool ropeInterleave = true;
  double ropeTheta = 10000.0;
  /// YaRN scaling of the rotary part and of the softmax.
  std::optional<YarnRopeScaling> yarn;
  /// Layers below `firstDense` keep a dense MLP of width `ffn`.
  int64_t firstDense = 1;
  int64_t moeFfn = 32, routedExperts = 8, sharedExperts = 1;
  int64_t topK = 2, groups = 2, topGroups = 1;
  bool normTopkProb = true;
  double routedScaling = 2.5;
  /// Expert capacity `ceil(tokens * topK / routedExperts * factor)`
  /// (at most the tokens); 0: the tokens (nothing is dropped).
  double capacityFactor = 0.0;
  MoeDropPolicy dropPolicy = MoeDropPolicy::Probs;
  /// Expert parallelism: the routed experts split over `ep` ranks (the
  /// mesh's ep axis), tokens exchanged with all-to-alls.
  int64_t ep = 1;
  /// The coefficient of DeepSeek-V3's sequence-wise balance loss, added to
  /// the loss (0: none).
  double auxLossCoeff = 0.0;
  /// DeepSeek-V3's load balancing without an auxiliary loss: after each
  /// training step every router's correction bias moves by this much
  /// towards even loads (0: it stays; DeepSeek-V3 trained with 1e-3).
  double biasUpdateRate = 0.0;
  double normEps = 1e-6;
  double initStd = 0.02;
  std::optional<int64_t> ignoreIndex = -100;
  bool tieEmbeddings = false;
  /// The Hugging Face config recorded on the module (meg.hf_config).
  std::string hfConfig;
};

/// The capacity of each expert for `tokens` tokens under `config`.
int64_t expertCapacity(const DeepseekConfig &config, int64_t tokens);

/// The sizes the diffusion transformer presets share: image tokens `seq`,
/// text tokens `textSeq`, latent channels and text embedding width.
struct DiTConfig {
  int64_t layers = 2, hidden = 64, heads = 4, seq = 16, textSeq = 8;
  int64_t batch = 2, inChannels = 16, contextDim = 32;
  DType dtype = DType::F32;
  double normEps = 1e-6;
};

/// Joint text/image blocks with adaLN modulation (Stable Diffusion 3).
struct MMDiTConfig : DiTConfig {};

/// Single-stream blocks with parallel attention and MLP (Flux).
struct FluxConfig : DiTConfig {
  RopeConfig rope;
};

/// Each builder checks its configuration and returns a verified module, or
/// an error that names the offending setting.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildLlama(mlir::MLIRContext &context, const LlamaConfig &config);
/// The LlamaForCausalLM config.json of `config`, or an empty string when
/// the config has no Hugging Face equivalent (interleaved or partial RoPE).
std::string llamaHfConfig(const LlamaConfig &config);
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildDeepseek(mlir::MLIRContext &context, const DeepseekConfig &config);
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildMMDiT(mlir::MLIRContext &context, const MMDiTConfig &config);
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildFlux(mlir::MLIRContext &context, const FluxConfig &config);

} // namespace megc::gen

#endif // MEGC_GEN_PRESETS_H
