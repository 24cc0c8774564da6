//===- GenCommand.cpp - `megc gen` -------------------------------------===//
//
// Parses the preset flags into gen::GenOptions (megc/Gen/Generate.h), which
// builds the model, and prints it. `megc import` shares the shape, dtype,
// training, precision and mesh flags; its model comes from a Hugging Face
// config.
//
//===----------------------------------------------------------------------===//

#include "GenCommand.h"
#include "PlanCommand.h"

#include "megc/Gen/Generate.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

namespace megc {

cl::SubCommand &genSubCommand() {
  static cl::SubCommand command(
      "gen", "Write a model preset (llama, deepseek, mmdit, flux) as meg IR");
  return command;
}

cl::SubCommand &importSubCommand() {
  static cl::SubCommand command(
      "import", "Write a Hugging Face model (config.json or its directory) "
                "as meg IR: LlamaForCausalLM, MistralForCausalLM, "
                "Qwen2ForCausalLM, Qwen3ForCausalLM, DeepseekV3ForCausalLM");
  return command;
}

namespace {
cl::OptionCategory genCategory("megc gen options");

// Options of both `gen` and `import` (import rejects the model-size flags
// with a message, rather than leaving them to the parser).
// `megc plan` takes them too, to generate each layout it evaluates.
#define MEGC_BOTH                                                              \
  cl::sub(genSubCommand()), cl::sub(importSubCommand()),                       \
      cl::sub(planSubCommand())

cl::opt<std::string> preset(cl::Positional, cl::Required,
                            cl::desc("<llama|deepseek|mmdit|flux>"),
                            cl::sub(genSubCommand()), cl::cat(genCategory));
cl::opt<std::string> hfPath(cl::Positional, cl::Required,
                            cl::desc("<config.json|model directory>"),
                            cl::sub(importSubCommand()), cl::cat(genCategory));
cl::opt<std::string> outputFile("o", cl::desc("Output file ('-' for stdout)"),
                                cl::value_desc("file"), cl::init("-"),
                                cl::sub(genSubCommand()),
                                cl::sub(importSubCommand()),
                                cl::cat(genCategory));

#define MEGC_INT_FLAG(var, flag, help)                                         \
  cl::opt<int64_t> var(flag, cl::desc(help), MEGC_BOTH, cl::cat(genCategory))
MEGC_INT_FLAG(layers, "layers", "Number of transformer blocks");
MEGC_INT_FLAG(hidden, "hidden", "Hidden size");
MEGC_INT_FLAG(heads, "heads", "Attention heads");
MEGC_INT_FLAG(kvHeads, "kv-heads", "Key/value heads (llama; grouped-query)");
MEGC_INT_FLAG(ffn, "ffn", "MLP intermediate size (llama)");
MEGC_INT_FLAG(vocab, "vocab", "Vocabulary size (llama)");
MEGC_INT_FLAG(seq, "seq", "Sequence length (image tokens for mmdit/flux)");
MEGC_INT_FLAG(textSeq, "text-seq", "Text tokens (mmdit, flux)");
MEGC_INT_FLAG(batch, "batch", "Batch size (global, with --mesh)");
MEGC_INT_FLAG(inChannels, "in-channels", "Latent channels (mmdit, flux)");
MEGC_INT_FLAG(contextDim, "context-dim", "Text embedding width (mmdit, flux)");
MEGC_INT_FLAG(experts, "experts", "Routed experts (deepseek)");
MEGC_INT_FLAG(topK, "top-k", "Experts each token is routed to (deepseek)");
MEGC_INT_FLAG(expertGroups, "expert-groups",
              "Groups the experts fall into (deepseek)");
MEGC_INT_FLAG(topGroups, "top-groups",
              "Groups each token's experts come from (deepseek)");
MEGC_INT_FLAG(sharedExperts, "shared-experts", "Shared experts (deepseek)");
MEGC_INT_FLAG(moeFfn, "moe-ffn", "Each expert's MLP width (deepseek)");
MEGC_INT_FLAG(denseLayers, "dense-layers",
              "Leading layers with a dense MLP of width --ffn (deepseek)");
MEGC_INT_FLAG(qLoraRank, "q-lora-rank",
              "Low rank of MLA's query projection; 0: plain (deepseek)");
MEGC_INT_FLAG(kvLoraRank, "kv-lora-rank",
              "Low rank of MLA's key/value projection (deepseek)");
MEGC_INT_FLAG(qkNopeDim, "qk-nope-dim",
              "Per-head query/key width without RoPE (deepseek)");
MEGC_INT_FLAG(qkRopeDim, "qk-rope-dim",
              "Per-head query/key width with RoPE (deepseek)");
MEGC_INT_FLAG(vHeadDim, "v-head-dim", "Per-head value width (deepseek)");
#undef MEGC_INT_FLAG

cl::opt<std::string> dtype("dtype", cl::desc("Element type: f32, bf16, f16"),
                           MEGC_BOTH, cl::cat(genCategory));
cl::opt<bool> rotaryInterleaved(
    "rotary-interleaved",
    cl::desc("Interleaved rotate_half ([-x1, x0, -x3, x2, ...])"), MEGC_BOTH,
    cl::cat(genCategory));
cl::opt<double> rotaryPercent("rotary-percent",
                              cl::desc("Fraction of head dim that rotates"),
                              MEGC_BOTH, cl::cat(genCategory));
cl::opt<double> ropeTheta("rope-theta", cl::desc("RoPE base"), MEGC_BOTH,
                          cl::cat(genCategory));
cl::opt<double> normEps("norm-eps", cl::desc("Normalisation epsilon"),
                        MEGC_BOTH, cl::cat(genCategory));
cl::opt<std::string> ignoreIndex(
    "ignore-index",
    cl::desc("The label the loss ignores, as PyTorch's cross_entropy "
             "ignore_index (llama, import): an integer, or 'none' (default "
             "-100)"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<bool> train("train",
                    cl::desc("Add the AdamW configuration (meg.optimizer), "
                             "so that megc compiles grad and train_step"),
                    MEGC_BOTH, cl::cat(genCategory));
cl::opt<double> learningRate("lr", cl::desc("AdamW learning rate (--train)"),
                             MEGC_BOTH, cl::cat(genCategory));
cl::opt<double> weightDecay("weight-decay",
                            cl::desc("AdamW weight decay (--train)"), MEGC_BOTH,
                            cl::cat(genCategory));
cl::opt<std::string> betas("betas", cl::desc("AdamW B1,B2 (--train)"),
                           MEGC_BOTH, cl::cat(genCategory));
cl::opt<double> adamEps("adam-eps", cl::desc("AdamW epsilon (--train)"),
                        MEGC_BOTH, cl::cat(genCategory));
cl::opt<double> clipGrad(
    "clip-grad",
    cl::desc("Clip the global L2 norm of the gradients to this (--train; "
             "0: off); train_step then returns grad_norm"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<int64_t> microBatches(
    "micro-batches",
    cl::desc("Micro-batches a training step accumulates (--train): --batch "
             "stays the global batch; forward, loss and grad take one "
             "micro-batch"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<std::string> lrSchedule(
    "lr-schedule",
    cl::desc("Learning-rate schedule, computed by the runtime each step: "
             "constant, linear, cosine or wsd (--train)"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<int64_t> warmupSteps("warmup-steps",
                             cl::desc("Linear warmup steps (--lr-schedule)"),
                             MEGC_BOTH, cl::cat(genCategory));
cl::opt<int64_t> decaySteps(
    "decay-steps",
    cl::desc("Step at which the decay reaches --min-lr (--lr-schedule)"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<double> minLr("min-lr", cl::desc("Floor of the decay (default 0)"),
                      MEGC_BOTH, cl::cat(genCategory));
cl::opt<double>
    warmupInitLr("warmup-init-lr",
                 cl::desc("Learning rate warmup starts from (default 0)"),
                 MEGC_BOTH, cl::cat(genCategory));
cl::opt<int64_t>
    wsdDecaySteps("wsd-decay-steps",
                  cl::desc("Steps of the final decay (--lr-schedule wsd)"),
                  MEGC_BOTH, cl::cat(genCategory));
cl::opt<std::string>
    wsdStyle("wsd-style",
             cl::desc("WSD decay: linear, cosine, exponential, minus_sqrt"),
             MEGC_BOTH, cl::cat(genCategory));
cl::opt<std::string> precision(
    "precision",
    cl::desc("Precision policy KEY=DTYPE,... over param, main_params, "
             "main_grads, grad_reduce, exp_avg, exp_avg_sq (--train)"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<std::string> frozen("frozen",
                            cl::desc("Freeze the parameters whose names "
                                     "match this regular expression"),
                            MEGC_BOTH, cl::cat(genCategory));

cl::opt<std::string> mesh(
    "mesh",
    cl::desc("Device mesh AXIS=SIZE,... over pp, dp_outer, dp_shard, ep, "
             "cp, tp (data parallel over dp_outer x dp_shard x ep: --batch "
             "is the global batch; pp cuts the layers into pipeline stages, "
             "ep splits an MoE model's experts, cp every sequence)"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<std::string>
    fsdp("fsdp",
         cl::desc("FSDP strategy over dp_shard (--mesh): no_shard, optim, "
                  "optim_grads, optim_grads_params (default no_shard)"),
         MEGC_BOTH, cl::cat(genCategory));
cl::opt<std::string> outerFsdp(
    "outer-fsdp",
    cl::desc("HSDP strategy over dp_outer: no_shard (default) or optim"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<bool> sequenceParallel(
    "sequence-parallel",
    cl::desc("With tp in --mesh: norms and residual adds on sequence shards, "
             "all-gathered before and reduce-scattered after each attention "
             "and MLP block (Megatron's sequence parallelism)"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<std::string> cpAttention(
    "cp-attention",
    cl::desc("With cp in --mesh: allgather (default: keys and values "
             "gathered over cp, their gradients reduce-scattered) or ring "
             "(passed around the cp ranks block by block, merged by their "
             "softmax statistics)"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<std::string> ppSchedule(
    "pp-schedule",
    cl::desc("With pp in --mesh: the pipeline schedule, 1f1b (default), "
             "interleaved (with --pp-virtual) or zb-h1 (zero-bubble: weight "
             "gradients deferred into the bubble)"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<int64_t> ppVirtual(
    "pp-virtual",
    cl::desc("With pp in --mesh: stages per rank (interleaved schedule; "
             "default 1)"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<std::string> ppLayers(
    "pp-layers",
    cl::desc("With pp in --mesh: the layers of each stage, e.g. 9,8,8,7 "
             "(default: balanced by their work)"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<int64_t> bucketMb("bucket-mb",
                          cl::desc("Gradient bucket size in MiB (default 40)"),
                          MEGC_BOTH, cl::cat(genCategory));
cl::opt<double> routedScaling(
    "routed-scaling",
    cl::desc("Scale of the routed experts' weights (deepseek; default 2.5)"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<double> moeCapacityFactor(
    "moe-capacity-factor",
    cl::desc("Mixture-of-experts models: each expert's capacity as a factor "
             "of its even share of the routed tokens (default 0: capacity "
             "for every token, nothing dropped)"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<double> moeAuxLossCoeff(
    "moe-aux-loss-coeff",
    cl::desc("Mixture-of-experts models: the coefficient of DeepSeek-V3's "
             "sequence-wise balance loss added to the loss (default 0: "
             "none)"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<double> moeBiasUpdateRate(
    "moe-bias-update-rate",
    cl::desc("Mixture-of-experts models with --train: after each step, move "
             "every router's e_score_correction_bias by this much towards "
             "even expert loads over the global batch, as DeepSeek-V3 "
             "balances without an auxiliary loss (default 0: the bias "
             "stays; DeepSeek-V3 used 1e-3)"),
    MEGC_BOTH, cl::cat(genCategory));
cl::opt<std::string> moeDropPolicy(
    "moe-drop-policy",
    cl::desc("Which tokens an expert over capacity keeps: probs (largest "
             "routing weight, default) or position (earliest)"),
    MEGC_BOTH, cl::cat(genCategory));
#undef MEGC_BOTH

/// The flag's value if it was given on the command line.
template <typename T> std::optional<T> given(const cl::opt<T> &flag) {
  if (!flag.getNumOccurrences())
    return std::nullopt;
  return flag.getValue();
}

/// --precision KEY=DTYPE,... as trimmed pairs, in the order given.
std::vector<std::pair<std::string, std::string>> precisionPairs() {
  SmallVector<StringRef> items;
  StringRef(precision).split(items, ',');
  std::vector<std::pair<std::string, std::string>> pairs;
  for (StringRef item : items) {
    auto [key, value] = item.split('=');
    pairs.emplace_back(key.trim().str(), value.trim().str());
  }
  return pairs;
}

} // namespace

gen::GenOptions genOptionsFromFlags(std::optional<std::string> presetName,
                                    std::optional<std::string> hfConfig) {
  gen::GenOptions o;
  if (hfConfig)
    o.hfConfig = *hfConfig;
  else
    o.preset = presetName.value_or("");
  o.layers = given(layers), o.hidden = given(hidden), o.heads = given(heads);
  o.kvHeads = given(kvHeads), o.ffn = given(ffn), o.vocab = given(vocab);
  o.seq = given(seq), o.textSeq = given(textSeq), o.batch = given(batch);
  o.inChannels = given(inChannels), o.contextDim = given(contextDim);
  o.dtype = given(dtype);
  o.ignoreIndex = given(ignoreIndex);
  o.rotaryInterleaved = given(rotaryInterleaved);
  o.rotaryPercent = given(rotaryPercent), o.ropeTheta = given(ropeTheta);
  o.normEps = given(normEps);
  o.train = train;
  o.learningRate = given(learningRate), o.weightDecay = given(weightDecay);
  o.betas = given(betas), o.adamEps = given(adamEps);
  o.clipGrad = given(clipGrad), o.lrSchedule = given(lrSchedule);
  o.microBatches = given(microBatches);
  o.warmupSteps = given(warmupSteps), o.decaySteps = given(decaySteps);
  o.minLr = given(minLr), o.warmupInitLr = given(warmupInitLr);
  o.wsdDecaySteps = given(wsdDecaySteps), o.wsdStyle = given(wsdStyle);
  if (precision.getNumOccurrences())
    o.precision = precisionPairs();
  o.frozen = given(frozen);
  o.mesh = given(mesh), o.fsdp = given(fsdp), o.outerFsdp = given(outerFsdp);
  o.bucketMb = given(bucketMb);
  o.sequenceParallel = sequenceParallel;
  o.cpAttention = given(cpAttention);
  o.ppSchedule = given(ppSchedule);
  o.ppVirtual = given(ppVirtual);
  o.ppLayers = given(ppLayers);
  o.moeCapacityFactor = given(moeCapacityFactor);
  o.moeDropPolicy = given(moeDropPolicy);
  o.moeAuxLossCoeff = given(moeAuxLossCoeff);
  o.moeBiasUpdateRate = given(moeBiasUpdateRate);
  o.experts = given(experts), o.topK = given(topK);
  o.expertGroups = given(expertGroups), o.topGroups = given(topGroups);
  o.sharedExperts = given(sharedExperts), o.moeFfn = given(moeFfn);
  o.denseLayers = given(denseLayers), o.qLoraRank = given(qLoraRank);
  o.kvLoraRank = given(kvLoraRank), o.qkNopeDim = given(qkNopeDim);
  o.qkRopeDim = given(qkRopeDim), o.vHeadDim = given(vHeadDim);
  o.routedScaling = given(routedScaling);
  return o;
}

int runGen() {
  const char *command = importSubCommand() ? "megc import" : "megc gen";
  mlir::MLIRContext context;
  Expected<mlir::OwningOpRef<mlir::ModuleOp>> module = gen::generateModel(
      context, importSubCommand()
                   ? genOptionsFromFlags(std::nullopt, hfPath.getValue())
                   : genOptionsFromFlags(preset.getValue(), std::nullopt));
  if (!module) {
    WithColor::error(errs(), command) << toString(module.takeError()) << "\n";
    return 1;
  }
  std::string error;
  std::unique_ptr<ToolOutputFile> output =
      mlir::openOutputFile(outputFile, &error);
  if (!output) {
    WithColor::error(errs(), command) << error << "\n";
    return 1;
  }
  (*module)->print(output->os());
  output->os() << "\n";
  output->keep();
  return 0;
}

} // namespace megc
