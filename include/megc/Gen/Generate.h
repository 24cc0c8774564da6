//===- Generate.h - a preset from `megc gen` settings -----------*- C++ -*-===//
//
// The settings of `megc gen` as a struct, shared by the driver and the
// Python bindings: which flags apply to which preset, the AdamW
// configuration, the precision policy and frozen parameters.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_GEN_GENERATE_H
#define MEGC_GEN_GENERATE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace megc::gen {

/// One field per `megc gen` flag; a field left unset keeps the preset's
/// default, and a set one that does not apply to the preset is an error.
/// Errors name the flags as the driver spells them (`--kv-heads`).
struct GenOptions {
  /// `llama`, `deepseek`, `mmdit` or `flux`; empty with `hfConfig`.
  std::string preset;
  /// `megc import`: a Hugging Face config.json or model directory, which
  /// sets the model's sizes (the size flags do not apply; seq and batch
  /// are required).
  std::optional<std::string> hfConfig;
  std::optional<int64_t> layers, hidden, heads, kvHeads, ffn, vocab, seq,
      textSeq, batch, inChannels, contextDim;
  /// `f32`, `bf16` or `f16`.
  std::optional<std::string> dtype;
  /// The label the loss ignores, an integer or `none` (llama and import;
  /// default -100).
  std::optional<std::string> ignoreIndex;
  std::optional<bool> rotaryInterleaved;
  std::optional<double> rotaryPercent, ropeTheta, normEps;

  /// Adds the AdamW configuration; the settings below need it, except
  /// `frozen`.
  bool train = false;
  std::optional<double> learningRate, weightDecay, adamEps;
  /// Global gradient-norm clipping (0: off).
  std::optional<double> clipGrad;
  /// The learning-rate schedule: constant, linear, cosine or wsd, with
  /// its warmup, decay and WSD decay steps, the floor and the start of the
  /// warmup; wsdStyle linear, cosine, exponential or minus_sqrt.
  std::optional<std::string> lrSchedule, wsdStyle;
  std::optional<int64_t> warmupSteps, decaySteps, wsdDecaySteps;
  /// Micro-batches of a training step: --batch stays the global batch;
  /// forward, loss and grad take one micro-batch.
  std::optional<int64_t> microBatches;
  std::optional<double> minLr, warmupInitLr;
  /// `B1,B2`, as the flag takes it.
  std::optional<std::string> betas;
  /// KEY=DTYPE pairs in the order given, over param, main_params,
  /// main_grads, grad_reduce, exp_avg and exp_avg_sq; keys not given default
  /// to the model dtype for `param` and f32 for the rest.
  std::optional<std::vector<std::pair<std::string, std::string>>> precision;
  /// Freezes the parameters whose names match this regular expression.
  std::optional<std::string> frozen;
  /// `dp_outer=2,dp_shard=4,tp=2` declares the mesh @world (axes not given
  /// have size 1); the functions then take the batch of one data-parallel
  /// rank, `batch` / (dp_outer * dp_shard * ep), and (deepseek) the experts
  /// of one ep rank. Naming tp (llama, imported models; tp=1 too) asks for
  /// the tensor-parallel layout, which megc applies when it compiles.
  std::optional<std::string> mesh;
  /// With tp in `mesh`: norms, residual adds and the other work outside
  /// attention and the MLP run on sequence shards (Megatron's sequence
  /// parallelism).
  bool sequenceParallel = false;
  /// With cp in `mesh`: how attention meets the other ranks' keys,
  /// `allgather` (default) or `ring`.
  std::optional<std::string> cpAttention;
  /// With pp in `mesh`: the pipeline schedule (1f1b, interleaved, zb-h1),
  /// each rank's virtual stages (interleaved) and the layers of each stage
  /// ("9,8,8,7"; balanced by the compiler without it).
  std::optional<std::string> ppSchedule, ppLayers;
  std::optional<int64_t> ppVirtual;
  /// The #meg.fsdp strategy (needs `mesh`): no_shard, optim, optim_grads
  /// or optim_grads_params; `outerFsdp` no_shard or optim over dp_outer.
  std::optional<std::string> fsdp, outerFsdp;
  std::optional<int64_t> bucketMb;
  /// Mixture-of-experts models: each expert's capacity as a factor of its
  /// even share of the routed tokens (0: no token is dropped), and which
  /// tokens an expert over capacity keeps (`probs` or `position`).
  std::optional<double> moeCapacityFactor, moeAuxLossCoeff;
  /// DeepSeek-V3's routing-bias update rate per training step (needs
  /// `train`).
  std::optional<double> moeBiasUpdateRate;
  /// The `deepseek` preset's sizes: routed experts, experts per token,
  /// expert groups and groups kept, shared experts, the experts' MLP
  /// width, leading dense layers, MLA's low ranks (q 0: a plain q_proj)
  /// and per-head widths, and the routed experts' output scale.
  std::optional<int64_t> experts, topK, expertGroups, topGroups,
      sharedExperts, moeFfn, denseLayers, qLoraRank, kvLoraRank, qkNopeDim,
      qkRopeDim, vHeadDim;
  std::optional<double> routedScaling;
  std::optional<std::string> moeDropPolicy;
};

/// Builds the preset with its training settings. Besides the returned
/// error, invalid optimizer or precision settings are diagnosed through the
/// context's diagnostic engine first.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
generateModel(mlir::MLIRContext &context, const GenOptions &options);

} // namespace megc::gen

#endif // MEGC_GEN_GENERATE_H
