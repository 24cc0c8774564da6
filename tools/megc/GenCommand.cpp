//===- GenCommand.cpp - `megc gen` -------------------------------------===//
//
// Parses the preset flags, checks which apply to the chosen preset, builds
// the model and prints it.
//
//===----------------------------------------------------------------------===//

#include "GenCommand.h"

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Gen/Presets.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

namespace megc {

cl::SubCommand &genSubCommand() {
  static cl::SubCommand command(
      "gen", "Write a model preset (llama, mmdit, flux) as meg IR");
  return command;
}

namespace {
cl::OptionCategory genCategory("megc gen options");

cl::opt<std::string> preset(cl::Positional, cl::Required,
                            cl::desc("<llama|mmdit|flux>"),
                            cl::sub(genSubCommand()), cl::cat(genCategory));
cl::opt<std::string> outputFile("o", cl::desc("Output file ('-' for stdout)"),
                                cl::value_desc("file"), cl::init("-"),
                                cl::sub(genSubCommand()), cl::cat(genCategory));

#define MEGC_INT_FLAG(var, flag, help)                                         \
  cl::opt<int64_t> var(flag, cl::desc(help), cl::sub(genSubCommand()),         \
                       cl::cat(genCategory))
MEGC_INT_FLAG(layers, "layers", "Number of transformer blocks");
MEGC_INT_FLAG(hidden, "hidden", "Hidden size");
MEGC_INT_FLAG(heads, "heads", "Attention heads");
MEGC_INT_FLAG(kvHeads, "kv-heads", "Key/value heads (llama; grouped-query)");
MEGC_INT_FLAG(ffn, "ffn", "MLP intermediate size (llama)");
MEGC_INT_FLAG(vocab, "vocab", "Vocabulary size (llama)");
MEGC_INT_FLAG(seq, "seq", "Sequence length (image tokens for mmdit/flux)");
MEGC_INT_FLAG(textSeq, "text-seq", "Text tokens (mmdit, flux)");
MEGC_INT_FLAG(batch, "batch", "Batch size");
MEGC_INT_FLAG(inChannels, "in-channels", "Latent channels (mmdit, flux)");
MEGC_INT_FLAG(contextDim, "context-dim",
              "Text embedding width (mmdit, flux)");
#undef MEGC_INT_FLAG

cl::opt<std::string> dtype("dtype", cl::desc("Element type: f32, bf16, f16"),
                           cl::init("f32"), cl::sub(genSubCommand()),
                           cl::cat(genCategory));
cl::opt<bool> rotaryInterleaved(
    "rotary-interleaved",
    cl::desc("Interleaved rotate_half ([-x1, x0, -x3, x2, ...])"),
    cl::sub(genSubCommand()), cl::cat(genCategory));
cl::opt<double> rotaryPercent("rotary-percent",
                              cl::desc("Fraction of head dim that rotates"),
                              cl::sub(genSubCommand()), cl::cat(genCategory));
cl::opt<double> ropeTheta("rope-theta", cl::desc("RoPE base"),
                          cl::sub(genSubCommand()), cl::cat(genCategory));
cl::opt<double> normEps("norm-eps", cl::desc("Normalisation epsilon"),
                        cl::sub(genSubCommand()), cl::cat(genCategory));
cl::opt<bool> train("train",
                    cl::desc("Add the AdamW configuration (meg.optimizer), "
                             "so that megc compiles grad and train_step"),
                    cl::sub(genSubCommand()), cl::cat(genCategory));
cl::opt<double> learningRate("lr", cl::desc("AdamW learning rate (--train)"),
                             cl::init(1e-3), cl::sub(genSubCommand()),
                             cl::cat(genCategory));
cl::opt<double> weightDecay("weight-decay",
                            cl::desc("AdamW weight decay (--train)"),
                            cl::init(0.0), cl::sub(genSubCommand()),
                            cl::cat(genCategory));
cl::opt<std::string> betas("betas", cl::desc("AdamW B1,B2 (--train)"),
                           cl::init("0.9,0.999"), cl::sub(genSubCommand()),
                           cl::cat(genCategory));
cl::opt<double> adamEps("adam-eps", cl::desc("AdamW epsilon (--train)"),
                        cl::init(1e-8), cl::sub(genSubCommand()),
                        cl::cat(genCategory));
cl::opt<std::string> precision(
    "precision",
    cl::desc("Precision policy KEY=DTYPE,... over param, main_params, "
             "main_grads, grad_reduce, exp_avg, exp_avg_sq (--train)"),
    cl::sub(genSubCommand()), cl::cat(genCategory));
cl::opt<std::string> frozen("frozen",
                            cl::desc("Freeze the parameters whose names "
                                     "match this regular expression"),
                            cl::sub(genSubCommand()), cl::cat(genCategory));

/// Copies a flag into `target` if it was given on the command line.
template <typename T, typename U>
void take(const cl::opt<T> &flag, U &target) {
  if (flag.getNumOccurrences())
    target = flag;
}

/// Fails with a usage error if any of `flags` was given for `presetName`.
template <typename... Flags>
Error rejectFlags(StringRef presetName, const Flags &...flags) {
  Error error = Error::success();
  auto check = [&](const cl::Option &flag) {
    if (!error && flag.getNumOccurrences())
      error = createStringError(inconvertibleErrorCode(),
                                "--" + flag.ArgStr +
                                    " does not apply to the " + presetName +
                                    " preset");
  };
  (check(flags), ...);
  return error;
}

Error readCommon(gen::DType &type) {
  Expected<gen::DType> parsed = gen::parseDType(dtype);
  if (!parsed)
    return parsed.takeError();
  type = *parsed;
  return Error::success();
}

void readDiT(gen::DiTConfig &c) {
  take(layers, c.layers), take(hidden, c.hidden), take(heads, c.heads);
  take(seq, c.seq), take(textSeq, c.textSeq), take(batch, c.batch);
  take(inChannels, c.inChannels), take(contextDim, c.contextDim);
  take(normEps, c.normEps);
}

void readRope(gen::RopeConfig &rope) {
  rope.interleaved = rotaryInterleaved;
  take(rotaryPercent, rope.percent);
  take(ropeTheta, rope.theta);
}

Expected<mlir::OwningOpRef<mlir::ModuleOp>> build(mlir::MLIRContext &context) {
  if (preset == "llama") {
    if (Error error = rejectFlags("llama", textSeq, inChannels, contextDim))
      return std::move(error);
    gen::LlamaConfig c;
    if (Error error = readCommon(c.dtype))
      return std::move(error);
    take(layers, c.layers), take(hidden, c.hidden), take(heads, c.heads);
    take(kvHeads, c.kvHeads), take(ffn, c.ffn), take(vocab, c.vocab);
    take(seq, c.seq), take(batch, c.batch), take(normEps, c.normEps);
    if (!kvHeads.getNumOccurrences() && heads.getNumOccurrences())
      c.kvHeads = c.heads;
    readRope(c.rope);
    return gen::buildLlama(context, c);
  }
  if (preset == "mmdit") {
    if (Error error = rejectFlags("mmdit", kvHeads, ffn, vocab,
                                  rotaryInterleaved, rotaryPercent, ropeTheta))
      return std::move(error);
    gen::MMDiTConfig c;
    if (Error error = readCommon(c.dtype))
      return std::move(error);
    readDiT(c);
    return gen::buildMMDiT(context, c);
  }
  if (preset == "flux") {
    if (Error error = rejectFlags("flux", kvHeads, ffn, vocab))
      return std::move(error);
    gen::FluxConfig c;
    if (Error error = readCommon(c.dtype))
      return std::move(error);
    readDiT(c);
    readRope(c.rope);
    return gen::buildFlux(context, c);
  }
  return createStringError(inconvertibleErrorCode(),
                           "unknown preset '" + preset +
                               "'; expected llama, mmdit or flux");
}
} // namespace

/// Sets `meg.precision` from --precision KEY=DTYPE,...; keys not given
/// default to the model dtype for `param` and f32 for the rest.
Error applyPrecision(mlir::ModuleOp module) {
  mlir::MLIRContext *context = module.getContext();
  mlir::Type f32 = mlir::Float32Type::get(context);
  mlir::Type modelType = f32;
  for (auto param : module.getOps<mlir::meg::ParamOp>()) {
    modelType = param.getTensorType().getElementType();
    break;
  }
  llvm::StringMap<mlir::Type> types = {
      {"param", modelType}, {"main_params", f32}, {"main_grads", f32},
      {"grad_reduce", f32}, {"exp_avg", f32},     {"exp_avg_sq", f32}};
  SmallVector<StringRef> pairs;
  StringRef(precision).split(pairs, ',');
  for (StringRef pair : pairs) {
    auto [key, value] = pair.split('=');
    key = key.trim();
    if (!types.count(key))
      return createStringError(inconvertibleErrorCode(),
                               "--precision: unknown key '" + key +
                                   "'; expected param, main_params, "
                                   "main_grads, grad_reduce, exp_avg or "
                                   "exp_avg_sq");
    Expected<gen::DType> dtype = gen::parseDType(value.trim());
    if (!dtype)
      return createStringError(inconvertibleErrorCode(),
                               "--precision " + key + ": " +
                                   toString(dtype.takeError()));
    types[key] = *dtype == gen::DType::F32    ? f32
                 : *dtype == gen::DType::BF16 ? mlir::Type(mlir::BFloat16Type::get(context))
                                              : mlir::Type(mlir::Float16Type::get(context));
  }
  auto policy = mlir::meg::PrecisionAttr::getChecked(
      [&]() { return mlir::emitError(module.getLoc()); }, context,
      types["param"], types["main_params"], types["main_grads"],
      types["grad_reduce"], types["exp_avg"], types["exp_avg_sq"]);
  if (!policy)
    return createStringError(inconvertibleErrorCode(),
                             "invalid --precision policy (see above)");
  module->setAttr(mlir::meg::MegDialect::kPrecisionAttrName, policy);
  return Error::success();
}

/// Applies --train (the optimizer attribute) and --frozen to the module.
Error applyTraining(mlir::ModuleOp module) {
  if (!train) {
    for (const cl::Option *flag : std::initializer_list<const cl::Option *>{
             &learningRate, &weightDecay, &betas, &adamEps, &precision})
      if (flag->getNumOccurrences())
        return createStringError(inconvertibleErrorCode(),
                                 "--" + flag->ArgStr + " needs --train");
  } else {
    StringRef first, second;
    std::tie(first, second) = StringRef(betas).split(',');
    double beta1, beta2;
    if (first.trim().getAsDouble(beta1) || second.trim().getAsDouble(beta2))
      return createStringError(inconvertibleErrorCode(),
                               "--betas expects B1,B2, got '" + betas + "'");
    auto config = mlir::meg::AdamWAttr::getChecked(
        [&]() { return mlir::emitError(module.getLoc()); },
        module.getContext(), APFloat(learningRate.getValue()), APFloat(beta1),
        APFloat(beta2), APFloat(adamEps.getValue()),
        APFloat(weightDecay.getValue()));
    if (!config)
      return createStringError(inconvertibleErrorCode(),
                               "invalid AdamW settings (see above)");
    module->setAttr(mlir::meg::MegDialect::kOptimizerAttrName, config);
    if (precision.getNumOccurrences())
      if (Error error = applyPrecision(module))
        return error;
  }
  if (frozen.getNumOccurrences()) {
    Regex pattern(frozen);
    std::string regexError;
    if (!pattern.isValid(regexError))
      return createStringError(inconvertibleErrorCode(),
                               "--frozen '" + frozen + "': " + regexError);
    int matched = 0;
    for (auto param : module.getOps<mlir::meg::ParamOp>())
      if (pattern.match(param.getSymName())) {
        param.setFrozen(true);
        ++matched;
      }
    if (matched == 0)
      return createStringError(inconvertibleErrorCode(),
                               "--frozen '" + frozen +
                                   "' matches no parameter");
  }
  return Error::success();
}

int runGen() {
  mlir::MLIRContext context;
  Expected<mlir::OwningOpRef<mlir::ModuleOp>> module = build(context);
  if (!module) {
    WithColor::error(errs(), "megc gen") << toString(module.takeError())
                                         << "\n";
    return 1;
  }
  if (Error error = applyTraining(**module)) {
    WithColor::error(errs(), "megc gen") << toString(std::move(error)) << "\n";
    return 1;
  }
  std::string error;
  std::unique_ptr<ToolOutputFile> output =
      mlir::openOutputFile(outputFile, &error);
  if (!output) {
    WithColor::error(errs(), "megc gen") << error << "\n";
    return 1;
  }
  (*module)->print(output->os());
  output->os() << "\n";
  output->keep();
  return 0;
}

} // namespace megc
