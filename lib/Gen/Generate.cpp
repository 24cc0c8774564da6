//===- Generate.cpp - a preset from `megc gen` settings ----------------===//
//
// Checks which settings apply to the chosen preset, builds the model, then
// adds the AdamW configuration, the precision policy and frozen parameters.
//
// Over 600 lines: one settings table per preset and the checks that each
// setting applies to the preset chosen.
//
//===----------------------------------------------------------------------===//

#include "megc/Gen/Generate.h"

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Gen/HfImport.h"
#include "megc/Gen/Presets.h"
#include "megc/Pipeline/Schedule.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Regex.h"

using namespace llvm;

namespace megc::gen {

namespace {
Error genError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

/// A setting by its flag name, and whether it was given.
struct Setting {
  StringRef flag;
  bool given;
};

/// Fails naming the first of `settings` that was given for `presetName`.
Error rejectSettings(StringRef presetName, ArrayRef<Setting> settings) {
  for (const Setting &setting : settings)
    if (setting.given)
      return genError("--" + setting.flag + " does not apply to the " +
                      presetName + " preset");
  return Error::success();
}

/// Copies a setting into `target` if it was given.
template <typename T, typename U>
void take(const std::optional<T> &setting, U &target) {
  if (setting)
    target = *setting;
}

/// `--ignore-index`: an integer, or `none` for a loss that ignores no label.
Error readIgnoreIndex(const GenOptions &o, std::optional<int64_t> &target) {
  if (!o.ignoreIndex)
    return Error::success();
  if (*o.ignoreIndex == "none") {
    target.reset();
    return Error::success();
  }
  int64_t value;
  if (StringRef(*o.ignoreIndex).getAsInteger(10, value))
    return genError("--ignore-index must be an integer or 'none', got '" +
                    *o.ignoreIndex + "'");
  target = value;
  return Error::success();
}

Error readDType(const GenOptions &o, DType &type) {
  Expected<DType> parsed = parseDType(o.dtype.value_or("f32"));
  if (!parsed)
    return parsed.takeError();
  type = *parsed;
  return Error::success();
}

void readDiT(const GenOptions &o, DiTConfig &c) {
  take(o.layers, c.layers), take(o.hidden, c.hidden), take(o.heads, c.heads);
  take(o.seq, c.seq), take(o.textSeq, c.textSeq), take(o.batch, c.batch);
  take(o.inChannels, c.inChannels), take(o.contextDim, c.contextDim);
  take(o.normEps, c.normEps);
}

void readRope(const GenOptions &o, RopeConfig &rope) {
  rope.interleaved = o.rotaryInterleaved.value_or(false);
  take(o.rotaryPercent, rope.percent);
  take(o.ropeTheta, rope.theta);
}

/// The mesh axis sizes of --mesh, in the order dp_outer, dp_shard, ep, cp,
/// tp. Every rank of dp_outer x dp_shard x ep computes on its own samples,
/// every rank of cp on its chunks of their sequences.
struct MeshSizes {
  int64_t pp = 1, dpOuter = 1, dpShard = 1, ep = 1, cp = 1, tp = 1;
  /// Whether --mesh names tp (a tensor-parallel layout, over one rank too).
  bool tensorParallel = false;
  /// Whether --mesh names pp: a pipeline when pp > 1, and over one rank
  /// when a schedule or virtual stages are given too.
  bool pipelineAxis = false;
  int64_t dataParallel() const { return dpOuter * dpShard * ep; }
};

Expected<MeshSizes> parseMesh(StringRef text) {
  MeshSizes sizes;
  SmallVector<StringRef> items;
  text.split(items, ',');
  StringMap<bool> seen;
  for (StringRef item : items) {
    auto [name, value] = item.split('=');
    name = name.trim();
    int64_t size = 0;
    if (value.trim().getAsInteger(10, size) || size <= 0)
      return genError("--mesh: expected AXIS=SIZE with a positive size, got '" +
                      item.trim() + "'");
    if (!seen.insert({name, true}).second)
      return genError("--mesh: axis '" + name + "' is given twice");
    if (name == "pp") {
      sizes.pp = size;
      sizes.pipelineAxis = true;
    } else if (name == "dp_outer")
      sizes.dpOuter = size;
    else if (name == "dp_shard")
      sizes.dpShard = size;
    else if (name == "ep")
      sizes.ep = size;
    else if (name == "cp")
      sizes.cp = size;
    else if (name == "tp") {
      sizes.tp = size;
      sizes.tensorParallel = true;
    } else
      return genError("--mesh: unknown axis '" + name +
                      "'; expected pp, dp_outer, dp_shard, ep, cp or tp");
  }
  return sizes;
}

/// Turns the global batch into one data-parallel rank's micro-batch.
Error localBatch(int64_t &batch, const std::optional<MeshSizes> &mesh,
                 int64_t microBatches = 1) {
  if (microBatches > 1) {
    int64_t ranks = mesh ? mesh->dataParallel() : 1;
    if (batch % (ranks * microBatches) != 0)
      return genError("--batch " + Twine(batch) + " does not split into " +
                      Twine(microBatches) + " micro-batches" +
                      (mesh ? " on each of " + Twine(ranks) +
                                  " data-parallel ranks"
                            : Twine("")));
    batch /= microBatches;
  }
  if (!mesh)
    return Error::success();
  int64_t ranks = mesh->dataParallel();
  if (batch % ranks != 0)
    return genError("--batch " + Twine(batch) + " does not split over the " +
                    Twine(ranks) +
                    " data-parallel ranks of --mesh (dp_outer x dp_shard x ep)");
  batch /= ranks;
  return Error::success();
}

/// Context parallelism splits the token sequence of a causal language
/// model (`what`, for messages) into 2 x cp equal chunks.
Error contextParallelFits(const std::optional<MeshSizes> &mesh, int64_t seq,
                          StringRef what, bool causalLm) {
  if (!mesh || mesh->cp == 1)
    return Error::success();
  if (!causalLm)
    return genError("--mesh cp=" + Twine(mesh->cp) + ": " + what +
                    " has no context-parallel layout (it splits the token "
                    "sequences of causal language models: the llama and "
                    "deepseek presets and imported Llama, Mistral, Qwen and "
                    "DeepSeek-V3 models)");
  if (seq % (2 * mesh->cp) != 0)
    return genError("--mesh cp=" + Twine(mesh->cp) + ": the sequence of " +
                    Twine(seq) + " tokens does not split into 2 x " +
                    Twine(mesh->cp) + " = " + Twine(2 * mesh->cp) +
                    " equal chunks (each context-parallel rank holds two, "
                    "for causal load balancing)");
  return Error::success();
}

/// The settings only the deepseek preset takes.
SmallVector<Setting> deepseekSettings(const GenOptions &o) {
  return {{"experts", bool(o.experts)},
          {"top-k", bool(o.topK)},
          {"expert-groups", bool(o.expertGroups)},
          {"top-groups", bool(o.topGroups)},
          {"shared-experts", bool(o.sharedExperts)},
          {"moe-ffn", bool(o.moeFfn)},
          {"dense-layers", bool(o.denseLayers)},
          {"q-lora-rank", bool(o.qLoraRank)},
          {"kv-lora-rank", bool(o.kvLoraRank)},
          {"qk-nope-dim", bool(o.qkNopeDim)},
          {"qk-rope-dim", bool(o.qkRopeDim)},
          {"v-head-dim", bool(o.vHeadDim)},
          {"routed-scaling", bool(o.routedScaling)}};
}

/// `settings` and `more`, for one rejectSettings call.
SmallVector<Setting> joined(ArrayRef<Setting> settings,
                            ArrayRef<Setting> more) {
  SmallVector<Setting> all(settings);
  all.append(more.begin(), more.end());
  return all;
}

/// The flags only mixture-of-experts models take, rejected for `what`.
Error rejectMoeFlags(const GenOptions &o, const Twine &what) {
  if (!o.moeCapacityFactor && !o.moeDropPolicy && !o.moeAuxLossCoeff &&
      !o.moeBiasUpdateRate)
    return Error::success();
  return genError("--moe-capacity-factor, --moe-drop-policy, "
                  "--moe-aux-loss-coeff and --moe-bias-update-rate apply to "
                  "mixture-of-experts models (the deepseek preset, megc "
                  "import of DeepseekV3ForCausalLM), not to " +
                  what);
}

/// The expert capacity, drop policy and load balancing of a
/// mixture-of-experts model.
Error readMoe(const GenOptions &o, DeepseekConfig &c) {
  if (o.moeCapacityFactor)
    c.capacityFactor = *o.moeCapacityFactor;
  if (o.moeAuxLossCoeff)
    c.auxLossCoeff = *o.moeAuxLossCoeff;
  if (o.moeBiasUpdateRate) {
    if (!o.train)
      return genError("--moe-bias-update-rate updates the routing biases "
                      "after each training step, so it needs --train");
    c.biasUpdateRate = *o.moeBiasUpdateRate;
  }
  if (!o.moeDropPolicy)
    return Error::success();
  if (*o.moeDropPolicy == "probs")
    c.dropPolicy = MoeDropPolicy::Probs;
  else if (*o.moeDropPolicy == "position")
    c.dropPolicy = MoeDropPolicy::Position;
  else
    return genError("--moe-drop-policy '" + *o.moeDropPolicy +
                    "': expected probs (each expert keeps its tokens of "
                    "largest routing weight) or position (its earliest)");
  return Error::success();
}

/// A DeepSeek-V3 model (`what`, for messages) with the settings both
/// `megc gen deepseek` and `megc import` take: the mesh's batch, the ignore
/// index and the MoE flags.
Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildMoeModel(mlir::MLIRContext &context, const GenOptions &o,
              const std::optional<MeshSizes> &mesh, DeepseekConfig c,
              StringRef what) {
  if (mesh && mesh->tp > 1)
    return genError("--mesh tp = " + Twine(mesh->tp) + ": " + what +
                    " has no tensor-parallel layout yet");
  if (Error error = contextParallelFits(mesh, c.seq, what, true))
    return std::move(error);
  c.ep = mesh ? mesh->ep : 1;
  if (Error error = localBatch(c.batch, mesh, o.microBatches.value_or(1)))
    return std::move(error);
  if (Error error = readIgnoreIndex(o, c.ignoreIndex))
    return std::move(error);
  if (Error error = readMoe(o, c))
    return std::move(error);
  return buildDeepseek(context, c);
}

/// `megc import`: the config sets the sizes; the command line the shapes.
Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importModel(mlir::MLIRContext &context, const GenOptions &o,
            const std::optional<MeshSizes> &mesh) {
  for (const Setting &setting :
       {Setting{"layers", bool(o.layers)}, Setting{"hidden", bool(o.hidden)},
        Setting{"heads", bool(o.heads)}, Setting{"kv-heads", bool(o.kvHeads)},
        Setting{"ffn", bool(o.ffn)}, Setting{"vocab", bool(o.vocab)},
        Setting{"text-seq", bool(o.textSeq)},
        Setting{"in-channels", bool(o.inChannels)},
        Setting{"context-dim", bool(o.contextDim)},
        Setting{"rotary-interleaved", bool(o.rotaryInterleaved)},
        Setting{"rotary-percent", bool(o.rotaryPercent)},
        Setting{"rope-theta", bool(o.ropeTheta)},
        Setting{"norm-eps", bool(o.normEps)}})
    if (setting.given)
      return genError("--" + setting.flag +
                      " does not apply to megc import: the model's config "
                      "sets it");
  for (const Setting &setting : deepseekSettings(o))
    if (setting.given)
      return genError("--" + setting.flag +
                      " does not apply to megc import: the model's config "
                      "sets it");
  if (!o.seq || !o.batch)
    return genError("megc import needs --seq and --batch: a Hugging Face "
                    "config does not fix the shapes of the entries");
  HfImportShape shape;
  shape.seq = *o.seq;
  shape.batch = *o.batch;
  if (shape.seq < 1 || shape.batch < 1)
    return genError("--seq and --batch must be >= 1");
  if (o.dtype) {
    Expected<DType> dtype = parseDType(*o.dtype);
    if (!dtype)
      return dtype.takeError();
    shape.dtype = *dtype;
  }
  Expected<HfModelConfig> model = readHfConfig(*o.hfConfig, shape);
  if (!model)
    return model.takeError();
  if (auto *deepseek = std::get_if<DeepseekConfig>(&*model))
    return buildMoeModel(context, o, mesh, *deepseek,
                         "DeepseekV3ForCausalLM");
  if (Error error = rejectMoeFlags(o, "this architecture"))
    return error;
  LlamaConfig *config = &std::get<LlamaConfig>(*model);
  if (Error error =
          contextParallelFits(mesh, config->seq, "this architecture", true))
    return std::move(error);
  if (Error error = localBatch(config->batch, mesh, o.microBatches.value_or(1)))
    return std::move(error);
  if (Error error = readIgnoreIndex(o, config->ignoreIndex))
    return std::move(error);
  config->tp = mesh && mesh->tensorParallel ? mesh->tp : 0;
  config->sequenceParallel = o.sequenceParallel;
  return buildLlama(context, *config);
}

Expected<mlir::OwningOpRef<mlir::ModuleOp>>
build(mlir::MLIRContext &context, const GenOptions &o,
      const std::optional<MeshSizes> &mesh) {
  if (o.hfConfig)
    return importModel(context, o, mesh);
  if (o.preset == "deepseek") {
    if (Error error = rejectSettings("deepseek",
                                     {{"kv-heads", bool(o.kvHeads)},
                                      {"text-seq", bool(o.textSeq)},
                                      {"in-channels", bool(o.inChannels)},
                                      {"context-dim", bool(o.contextDim)},
                                      {"rotary-percent", bool(o.rotaryPercent)},
                                      {"sequence-parallel",
                                       o.sequenceParallel}}))
      return std::move(error);
    DeepseekConfig c;
    if (Error error = readDType(o, c.dtype))
      return std::move(error);
    take(o.layers, c.layers), take(o.hidden, c.hidden), take(o.heads, c.heads);
    take(o.ffn, c.ffn), take(o.vocab, c.vocab), take(o.seq, c.seq);
    take(o.batch, c.batch), take(o.normEps, c.normEps);
    take(o.ropeTheta, c.ropeTheta);
    if (o.rotaryInterleaved)
      c.ropeInterleave = *o.rotaryInterleaved;
    take(o.experts, c.routedExperts), take(o.topK, c.topK);
    take(o.expertGroups, c.groups), take(o.topGroups, c.topGroups);
    take(o.sharedExperts, c.sharedExperts), take(o.moeFfn, c.moeFfn);
    take(o.denseLayers, c.firstDense), take(o.qLoraRank, c.qLoraRank);
    take(o.kvLoraRank, c.kvLoraRank), take(o.qkNopeDim, c.qkNopeDim);
    take(o.qkRopeDim, c.qkRopeDim), take(o.vHeadDim, c.vHeadDim);
    take(o.routedScaling, c.routedScaling);
    return buildMoeModel(context, o, mesh, c, "the deepseek preset");
  }
  if (Error error = rejectMoeFlags(o, "the " + o.preset + " preset"))
    return error;
  if (o.preset == "llama") {
    if (Error error =
            rejectSettings("llama", joined({{"text-seq", bool(o.textSeq)},
                                            {"in-channels", bool(o.inChannels)},
                                            {"context-dim", bool(o.contextDim)}},
                                           deepseekSettings(o))))
      return std::move(error);
    LlamaConfig c;
    if (Error error = readDType(o, c.dtype))
      return std::move(error);
    take(o.layers, c.layers), take(o.hidden, c.hidden), take(o.heads, c.heads);
    take(o.kvHeads, c.kvHeads), take(o.ffn, c.ffn), take(o.vocab, c.vocab);
    take(o.seq, c.seq), take(o.batch, c.batch), take(o.normEps, c.normEps);
    if (Error error = contextParallelFits(mesh, c.seq, "llama", true))
      return std::move(error);
    if (Error error = localBatch(c.batch, mesh, o.microBatches.value_or(1)))
      return std::move(error);
    if (Error error = readIgnoreIndex(o, c.ignoreIndex))
      return std::move(error);
    // Without --kv-heads, --heads means plain multi-head attention.
    if (!o.kvHeads && o.heads)
      c.kvHeads = c.heads;
    readRope(o, c.rope);
    c.tp = mesh && mesh->tensorParallel ? mesh->tp : 0;
    c.sequenceParallel = o.sequenceParallel;
    return buildLlama(context, c);
  }
  if (o.preset == "mmdit") {
    if (Error error = rejectSettings("mmdit", deepseekSettings(o)))
      return std::move(error);
    if (Error error = rejectSettings(
            "mmdit", {{"kv-heads", bool(o.kvHeads)},
                      {"ignore-index", bool(o.ignoreIndex)},
                      {"ffn", bool(o.ffn)},
                      {"vocab", bool(o.vocab)},
                      {"rotary-interleaved", bool(o.rotaryInterleaved)},
                      {"rotary-percent", bool(o.rotaryPercent)},
                      {"rope-theta", bool(o.ropeTheta)},
                      {"sequence-parallel", o.sequenceParallel}}))
      return std::move(error);
    MMDiTConfig c;
    if (Error error = readDType(o, c.dtype))
      return std::move(error);
    readDiT(o, c);
    if (Error error = contextParallelFits(mesh, 0, "the mmdit preset", false))
      return std::move(error);
    if (Error error = localBatch(c.batch, mesh, o.microBatches.value_or(1)))
      return std::move(error);
    return buildMMDiT(context, c);
  }
  if (o.preset == "flux") {
    if (Error error = rejectSettings("flux", deepseekSettings(o)))
      return std::move(error);
    if (Error error = rejectSettings("flux", {{"kv-heads", bool(o.kvHeads)},
                                              {"ignore-index", bool(o.ignoreIndex)},
                                              {"ffn", bool(o.ffn)},
                                              {"vocab", bool(o.vocab)},
                                              {"sequence-parallel",
                                               o.sequenceParallel}}))
      return std::move(error);
    FluxConfig c;
    if (Error error = readDType(o, c.dtype))
      return std::move(error);
    readDiT(o, c);
    if (Error error = contextParallelFits(mesh, 0, "the flux preset", false))
      return std::move(error);
    readRope(o, c.rope);
    if (Error error = localBatch(c.batch, mesh, o.microBatches.value_or(1)))
      return std::move(error);
    return buildFlux(context, c);
  }
  return genError("unknown preset '" + o.preset +
                  "'; expected llama, deepseek, mmdit or flux");
}

/// Sets `meg.precision` from the KEY=DTYPE pairs.
Error applyPrecision(mlir::ModuleOp module,
                     ArrayRef<std::pair<std::string, std::string>> pairs) {
  mlir::MLIRContext *context = module.getContext();
  mlir::Type f32 = mlir::Float32Type::get(context);
  mlir::Type modelType = f32;
  for (auto param : module.getOps<mlir::meg::ParamOp>()) {
    modelType = param.getTensorType().getElementType();
    break;
  }
  StringMap<mlir::Type> types = {{"param", modelType}, {"main_params", f32},
                                 {"main_grads", f32},  {"grad_reduce", f32},
                                 {"exp_avg", f32},     {"exp_avg_sq", f32}};
  for (const auto &[key, value] : pairs) {
    if (!types.count(key))
      return genError("--precision: unknown key '" + key +
                      "'; expected param, main_params, main_grads, "
                      "grad_reduce, exp_avg or exp_avg_sq");
    Expected<DType> dtype = parseDType(value);
    if (!dtype)
      return genError("--precision " + key + ": " +
                      toString(dtype.takeError()));
    types[key] = *dtype == DType::F32 ? f32
                 : *dtype == DType::BF16
                     ? mlir::Type(mlir::BFloat16Type::get(context))
                     : mlir::Type(mlir::Float16Type::get(context));
  }
  auto policy = mlir::meg::PrecisionAttr::getChecked(
      [&]() { return mlir::emitError(module.getLoc()); }, context,
      types["param"], types["main_params"], types["main_grads"],
      types["grad_reduce"], types["exp_avg"], types["exp_avg_sq"]);
  if (!policy)
    return genError("invalid --precision policy (see above)");
  module->setAttr(mlir::meg::MegDialect::kPrecisionAttrName, policy);
  return Error::success();
}

/// Sets meg.lr_schedule when a schedule setting is given (without one the
/// rate is the optimizer's, compiled in).
Error applyLrSchedule(mlir::ModuleOp module, const GenOptions &o) {
  bool given = o.lrSchedule || o.warmupSteps || o.decaySteps || o.minLr ||
               o.warmupInitLr || o.wsdDecaySteps || o.wsdStyle;
  if (!given)
    return Error::success();
  auto kind = mlir::meg::symbolizeLrScheduleKind(o.lrSchedule.value_or("constant"));
  if (!kind)
    return genError("--lr-schedule: unknown schedule '" + *o.lrSchedule +
                    "'; expected constant, linear, cosine or wsd");
  auto style = mlir::meg::symbolizeWsdDecayStyle(o.wsdStyle.value_or("linear"));
  if (!style)
    return genError("--wsd-style: unknown style '" + *o.wsdStyle +
                    "'; expected linear, cosine, exponential or minus_sqrt");
  if (*kind != mlir::meg::LrScheduleKind::wsd && (o.wsdDecaySteps || o.wsdStyle))
    return genError("--wsd-decay-steps and --wsd-style need --lr-schedule wsd");
  if (*kind != mlir::meg::LrScheduleKind::constant && !o.decaySteps)
    return genError("--lr-schedule " + *o.lrSchedule + " needs --decay-steps");
  mlir::MLIRContext *context = module.getContext();
  std::string diagnostics;
  auto schedule = mlir::meg::LrScheduleAttr::getChecked(
      [&]() { return mlir::emitError(module.getLoc()); }, context, *kind,
      o.warmupSteps.value_or(0), o.decaySteps.value_or(0),
      APFloat(o.minLr.value_or(0.0)), APFloat(o.warmupInitLr.value_or(0.0)),
      o.wsdDecaySteps.value_or(0), *style, mlir::FlatSymbolRefAttr(),
      mlir::FlatSymbolRefAttr());
  if (!schedule)
    return genError("invalid learning-rate schedule (see above)");
  double lr = o.learningRate.value_or(1e-3);
  if (o.minLr.value_or(0.0) > lr || o.warmupInitLr.value_or(0.0) > lr)
    return genError("--min-lr and --warmup-init-lr must not exceed --lr");
  module->setAttr(mlir::meg::MegDialect::kLrScheduleAttrName, schedule);
  return Error::success();
}

/// Adds the optimizer attribute and the precision policy, or rejects their
/// settings without `train`.
Error applyOptimizer(mlir::ModuleOp module, const GenOptions &o) {
  if (!o.train) {
    for (const Setting &setting :
         {Setting{"lr", bool(o.learningRate)},
          Setting{"weight-decay", bool(o.weightDecay)},
          Setting{"betas", bool(o.betas)}, Setting{"adam-eps", bool(o.adamEps)},
          Setting{"precision", bool(o.precision)},
          Setting{"clip-grad", bool(o.clipGrad)},
          Setting{"micro-batches", bool(o.microBatches)},
          Setting{"lr-schedule", bool(o.lrSchedule)},
          Setting{"warmup-steps", bool(o.warmupSteps)},
          Setting{"decay-steps", bool(o.decaySteps)},
          Setting{"min-lr", bool(o.minLr)},
          Setting{"warmup-init-lr", bool(o.warmupInitLr)},
          Setting{"wsd-decay-steps", bool(o.wsdDecaySteps)},
          Setting{"wsd-style", bool(o.wsdStyle)}})
      if (setting.given)
        return genError("--" + setting.flag + " needs --train");
    return Error::success();
  }
  std::string betas = o.betas.value_or("0.9,0.999");
  auto [first, second] = StringRef(betas).split(',');
  double beta1, beta2;
  if (first.trim().getAsDouble(beta1) || second.trim().getAsDouble(beta2))
    return genError("--betas expects B1,B2, got '" + betas + "'");
  auto config = mlir::meg::AdamWAttr::getChecked(
      [&]() { return mlir::emitError(module.getLoc()); }, module.getContext(),
      APFloat(o.learningRate.value_or(1e-3)), APFloat(beta1), APFloat(beta2),
      APFloat(o.adamEps.value_or(1e-8)), APFloat(o.weightDecay.value_or(0.0)),
      APFloat(o.clipGrad.value_or(0.0)));
  if (!config)
    return genError("invalid AdamW settings (see above)");
  module->setAttr(mlir::meg::MegDialect::kOptimizerAttrName, config);
  if (Error error = applyLrSchedule(module, o))
    return error;
  if (o.microBatches) {
    if (*o.microBatches < 1)
      return genError("--micro-batches must be >= 1, got " +
                      Twine(*o.microBatches));
    module->setAttr(mlir::meg::MegDialect::kMicroBatchesAttrName,
                    mlir::IntegerAttr::get(
                        mlir::IntegerType::get(module.getContext(), 64),
                        *o.microBatches));
  }
  if (o.precision)
    return applyPrecision(module, *o.precision);
  return Error::success();
}

/// Whether the model runs as a pipeline: over a pp axis of size > 1, or of
/// size 1 with a schedule or virtual stages named (one rank running the
/// schedule, its stages' activations passed to itself).
bool isPipelined(const GenOptions &o, const MeshSizes &sizes) {
  return sizes.pp > 1 || (sizes.pipelineAxis && (o.ppSchedule || o.ppVirtual));
}

/// The #meg.pipeline of a pp axis: its schedule, virtual stages and given
/// layers per stage.
Error applyPipeline(mlir::ModuleOp module, const GenOptions &o,
                    const MeshSizes &sizes) {
  mlir::MLIRContext *context = module.getContext();
  mlir::Builder builder(context);
  if (!isPipelined(o, sizes)) {
    for (const Setting &setting : {Setting{"pp-schedule", bool(o.ppSchedule)},
                                   Setting{"pp-virtual", bool(o.ppVirtual)},
                                   Setting{"pp-layers", bool(o.ppLayers)}})
      if (setting.given)
        return genError("--" + setting.flag + " needs a pp axis in --mesh");
    return Error::success();
  }
  if (o.ppSchedule && !megc::pipeline::parseScheduleKind(*o.ppSchedule))
    return genError("--pp-schedule: unknown schedule '" + *o.ppSchedule +
                    "' (expected 1f1b, interleaved or zb-h1)");
  int64_t virtualStages = o.ppVirtual.value_or(1);
  if (virtualStages < 1)
    return genError("--pp-virtual must be >= 1, got " + Twine(virtualStages));
  StringRef schedule = o.ppSchedule        ? StringRef(*o.ppSchedule)
                       : virtualStages > 1 ? "interleaved"
                                           : "1f1b";
  if ((schedule == "interleaved") != (virtualStages > 1))
    return genError("--pp-schedule " + schedule + " with --pp-virtual " +
                    Twine(virtualStages) +
                    ": the interleaved schedule runs 2 or more virtual "
                    "stages per rank, the others one");
  int64_t microBatches = o.microBatches.value_or(1);
  if (o.train && microBatches < sizes.pp)
    return genError("--mesh pp=" + Twine(sizes.pp) + " needs --micro-batches " +
                    ">= " + Twine(sizes.pp) + " (got " + Twine(microBatches) +
                    "): every stage works on its own micro-batch");
  if (o.train && schedule == "interleaved" && microBatches % sizes.pp != 0)
    return genError("--pp-schedule interleaved needs --micro-batches a "
                    "multiple of pp=" +
                    Twine(sizes.pp) + ", got " + Twine(microBatches));
  mlir::DenseI64ArrayAttr layers;
  if (o.ppLayers) {
    SmallVector<int64_t> counts;
    SmallVector<StringRef> items;
    StringRef(*o.ppLayers).split(items, ',');
    for (StringRef item : items) {
      int64_t count = 0;
      if (item.trim().getAsInteger(10, count) || count < 1)
        return genError("--pp-layers: expected positive layer counts, got '" +
                        item.trim() + "'");
      counts.push_back(count);
    }
    if (static_cast<int64_t>(counts.size()) != sizes.pp * virtualStages)
      return genError("--pp-layers gives " + Twine(counts.size()) +
                      " stages; pp=" + Twine(sizes.pp) + " x " +
                      Twine(virtualStages) + " virtual stages has " +
                      Twine(sizes.pp * virtualStages));
    layers = builder.getDenseI64ArrayAttr(counts);
  }
  module->setAttr(mlir::meg::MegDialect::kPipelineAttrName,
                  mlir::meg::PipelineAttr::get(
                      context, mlir::FlatSymbolRefAttr::get(context, "world"),
                      builder.getStrArrayAttr({"pp"}), virtualStages, layers,
                      builder.getStringAttr(schedule)));
  return Error::success();
}

/// Declares the mesh @world and the #meg.fsdp configuration; meg-fsdp
/// registers the submeshes it communicates over.
Error applyMesh(mlir::ModuleOp module, const GenOptions &o,
                const MeshSizes &sizes) {
  mlir::MLIRContext *context = module.getContext();
  mlir::OpBuilder builder(context);
  builder.setInsertionPointToStart(module.getBody());
  auto sizeOf = [&](mlir::Attribute axis) {
    StringRef name = mlir::cast<mlir::StringAttr>(axis).getValue();
    return name == "pp"         ? sizes.pp
           : name == "dp_outer" ? sizes.dpOuter
           : name == "dp_shard" ? sizes.dpShard
           : name == "ep"       ? sizes.ep
           : name == "cp"       ? sizes.cp
                                : sizes.tp;
  };
  // A tensor- or expert-parallel model declares @world itself; FSDP then
  // shards each rank's blocks over the data-parallel ranks.
  auto world = module.lookupSymbol<mlir::meg::MeshOp>("world");
  if (sizes.ep > 1 && !(world && world.getAxisSize("ep")))
    return genError("--mesh ep=" + Twine(sizes.ep) +
                    ": this preset has no experts to split (the deepseek "
                    "preset and imported DeepseekV3ForCausalLM models do)");
  if (sizes.tp > 1 && !world)
    return genError("--mesh tp=" + Twine(sizes.tp) +
                    ": this preset has no tensor-parallel layout (llama and "
                    "imported models do)");
  // @world with the axes `names` (their sizes set below).
  auto redeclareWorld = [&](ArrayRef<mlir::Attribute> names) {
    builder.setInsertionPoint(world);
    auto extended = mlir::meg::MeshOp::create(
        builder, world.getLoc(), world.getSymNameAttr(),
        builder.getArrayAttr(names),
        builder.getDenseI64ArrayAttr(SmallVector<int64_t>(names.size(), 1)));
    world.erase();
    world = extended;
  };
  // Context parallelism adds its axis before tp (tp varies fastest, so that
  // a node holds a tensor-parallel group).
  if (world && sizes.cp > 1 && !world.getAxisSize("cp")) {
    SmallVector<mlir::Attribute> names;
    for (mlir::Attribute axis : world.getAxisNames()) {
      if (mlir::cast<mlir::StringAttr>(axis).getValue() == "tp")
        names.push_back(builder.getStringAttr("cp"));
      names.push_back(axis);
    }
    if (names.size() == world.getAxisNames().size())
      names.push_back(builder.getStringAttr("cp"));
    redeclareWorld(names);
  }
  // Pipeline parallelism adds its axis first (stages vary slowest, so that
  // the other groups stay within a node).
  if (world && isPipelined(o, sizes) && !world.getAxisSize("pp")) {
    SmallVector<mlir::Attribute> names = {builder.getStringAttr("pp")};
    llvm::append_range(names, world.getAxisNames());
    redeclareWorld(names);
  }
  if (Error error = applyPipeline(module, o, sizes))
    return error;
  auto cpAttention =
      mlir::meg::symbolizeCpAttention(o.cpAttention.value_or("allgather"));
  if (!cpAttention)
    return genError("--cp-attention: unknown algorithm '" + *o.cpAttention +
                    "' (expected allgather or ring)");
  if (o.cpAttention && sizes.cp == 1)
    return genError("--cp-attention needs a cp axis of size > 1 in --mesh");
  if (sizes.cp > 1)
    module->setAttr(mlir::meg::MegDialect::kContextParallelAttrName,
                    mlir::meg::ContextParallelAttr::get(
                        context, mlir::FlatSymbolRefAttr::get(context, "world"),
                        builder.getStrArrayAttr({"cp"}), *cpAttention));
  if (world) {
    SmallVector<int64_t> axisSizes;
    for (mlir::Attribute axis : world.getAxisNames())
      axisSizes.push_back(sizeOf(axis));
    world.setAxisSizesAttr(builder.getDenseI64ArrayAttr(axisSizes));
    if (sizes.dataParallel() * sizes.cp == 1) {
      for (const Setting &setting : {Setting{"fsdp", bool(o.fsdp)},
                                     Setting{"outer-fsdp", bool(o.outerFsdp)},
                                     Setting{"bucket-mb", bool(o.bucketMb)}})
        if (setting.given)
          return genError("--" + setting.flag +
                          " needs a data-parallel axis (dp_shard or dp_outer) "
                          "of size > 1 in --mesh");
      return Error::success();
    }
  } else {
    SmallVector<StringRef> names, dataNames = {"dp_outer", "dp_shard"};
    SmallVector<int64_t> axisSizes;
    if (isPipelined(o, sizes)) {
      names.push_back("pp");
      axisSizes.push_back(sizes.pp);
    }
    names.append(dataNames.begin(), dataNames.end());
    axisSizes.append({sizes.dpOuter, sizes.dpShard});
    if (sizes.cp > 1) {
      names.push_back("cp");
      axisSizes.push_back(sizes.cp);
    }
    names.push_back("tp");
    axisSizes.push_back(sizes.tp);
    mlir::meg::MeshOp::create(builder, module.getLoc(),
                              builder.getStringAttr("world"),
                              builder.getStrArrayAttr(names),
                              builder.getDenseI64ArrayAttr(axisSizes));
    // A pipeline alone has no data-parallel gradients to average.
    if (isPipelined(o, sizes) && sizes.dataParallel() * sizes.cp == 1)
      return Error::success();
  }
  auto strategy = mlir::meg::symbolizeFsdpStrategy(o.fsdp.value_or("no_shard"));
  if (!strategy)
    return genError("--fsdp: unknown strategy '" + *o.fsdp +
                    "'; expected no_shard, optim, optim_grads or "
                    "optim_grads_params");
  auto outer = mlir::meg::symbolizeFsdpStrategy(o.outerFsdp.value_or("no_shard"));
  if (!outer || (*outer != mlir::meg::FsdpStrategy::no_shard &&
                 *outer != mlir::meg::FsdpStrategy::optim))
    return genError("--outer-fsdp: unknown strategy '" + *o.outerFsdp +
                    "'; expected no_shard or optim");
  if (o.outerFsdp && sizes.dpOuter == 1)
    return genError("--outer-fsdp needs a dp_outer axis of size > 1 in --mesh");
  // The context-parallel ranks join the data-parallel group (Megatron's
  // dp x cp): they average the loss and the gradients and share the
  // sharded state, but hold the same samples.
  SmallVector<StringRef> shard = {"dp_shard"};
  if (sizes.ep > 1)
    shard.push_back("ep");
  if (sizes.cp > 1)
    shard.push_back("cp");
  auto config = mlir::meg::FsdpAttr::getChecked(
      [&]() { return mlir::emitError(module.getLoc()); }, context, *strategy,
      mlir::FlatSymbolRefAttr::get(context, "world"),
      builder.getStrArrayAttr(shard),
      sizes.dpOuter > 1 ? builder.getStrArrayAttr({"dp_outer"})
                        : mlir::ArrayAttr(),
      *outer, o.bucketMb.value_or(40),
      sizes.cp > 1 ? builder.getStrArrayAttr({"cp"}) : mlir::ArrayAttr());
  if (!config)
    return genError("invalid --fsdp settings (see above)");
  module->setAttr(mlir::meg::MegDialect::kFsdpAttrName, config);
  return Error::success();
}

Error applyFrozen(mlir::ModuleOp module, StringRef frozen) {
  Regex pattern(frozen);
  std::string regexError;
  if (!pattern.isValid(regexError))
    return genError("--frozen '" + frozen + "': " + regexError);
  int matched = 0;
  for (auto param : module.getOps<mlir::meg::ParamOp>())
    if (pattern.match(param.getSymName())) {
      param.setFrozen(true);
      ++matched;
    }
  if (matched == 0)
    return genError("--frozen '" + frozen + "' matches no parameter");
  return Error::success();
}
} // namespace

Expected<mlir::OwningOpRef<mlir::ModuleOp>>
generateModel(mlir::MLIRContext &context, const GenOptions &options) {
  std::optional<MeshSizes> mesh;
  if (options.mesh) {
    Expected<MeshSizes> parsed = parseMesh(*options.mesh);
    if (!parsed)
      return parsed.takeError();
    mesh = *parsed;
  } else {
    for (const Setting &setting :
         {Setting{"fsdp", bool(options.fsdp)},
          Setting{"outer-fsdp", bool(options.outerFsdp)},
          Setting{"bucket-mb", bool(options.bucketMb)},
          Setting{"cp-attention", bool(options.cpAttention)},
          Setting{"pp-schedule", bool(options.ppSchedule)},
          Setting{"pp-virtual", bool(options.ppVirtual)},
          Setting{"pp-layers", bool(options.ppLayers)}})
      if (setting.given)
        return genError("--" + setting.flag + " needs --mesh");
  }
  Expected<mlir::OwningOpRef<mlir::ModuleOp>> module =
      build(context, options, mesh);
  if (!module)
    return module.takeError();
  if (mesh)
    if (Error error = applyMesh(**module, options, *mesh))
      return std::move(error);
  if (Error error = applyOptimizer(**module, options))
    return std::move(error);
  if (options.frozen)
    if (Error error = applyFrozen(**module, *options.frozen))
      return std::move(error);
  // Settings each valid alone can make an invalid model together (a mesh
  // of too many ranks): the verifier's diagnostics name what.
  std::string diagnostics;
  {
    llvm::raw_string_ostream os(diagnostics);
    mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
      os << diag << "\n";
      return mlir::success();
    });
    if (failed(mlir::verify(**module)))
      return genError("these settings make a model that does not verify: " +
                      StringRef(diagnostics).trim());
  }
  return module;
}

} // namespace megc::gen
