// megc.compile and the preset generator: the driver's library calls
// (megc/Compiler/CompilePipeline.h, megc/Gen/Generate.h) with their
// diagnostics and LLVM's fatal errors turned into megc.Error.
#include "Bindings.h"

#include "megc/Compiler/CompilePipeline.h"
#include "megc/Gen/Generate.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <mutex>
#include <optional>

namespace nb = nanobind;

namespace megc::python {
namespace {

/// LLVM's fatal error handler belongs to the process: one compiler call at
/// a time.
std::mutex compilerMutex;

/// LLVM exits the process after a fatal error unless the handler leaves by
/// throwing. LLVM is built without exceptions, so the frames this unwinds
/// release nothing: the failed call leaks what it held, which beats ending
/// the interpreter. Reachable through user input, e.g. a --cuda-arch whose
/// PTX version NVPTX rejects.
[[noreturn]] void throwFatalError(void *, const char *reason, bool) {
  throw CompilerError(std::string("LLVM ERROR: ") + reason);
}

/// What every compiler call runs under: the lock, the fatal error handler,
/// a single-threaded context (a throw from a worker thread would terminate
/// the process) and its diagnostics, collected as the driver prints them.
class CompilerCall {
public:
  explicit CompilerCall(const mlir::DialectRegistry &registry)
      : lock(compilerMutex), fatalErrors(throwFatalError),
        context(registry, mlir::MLIRContext::Threading::DISABLED), stream(text),
        printer(sourceMgr, &context, stream) {}

  mlir::MLIRContext &getContext() { return context; }
  llvm::SourceMgr &getSourceMgr() { return sourceMgr; }

  /// The diagnostics so far, then `message` if not empty.
  std::string report(const std::string &message = "") {
    std::string all = text + message;
    while (!all.empty() && all.back() == '\n')
      all.pop_back();
    return all.empty() ? "failed without a diagnostic" : all;
  }

  /// What a call that succeeded reported (warnings, remarks), if anything.
  std::optional<std::string> diagnostics() {
    if (text.empty())
      return std::nullopt;
    return report();
  }

private:
  std::lock_guard<std::mutex> lock;
  llvm::ScopedFatalErrorHandler fatalErrors;
  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  std::string text;
  llvm::raw_string_ostream stream;
  mlir::SourceMgrDiagnosticHandler printer;
};

/// Issues what a compilation that succeeded reported as one Python
/// warning, as the driver prints it; needs the GIL.
void warn(const std::optional<std::string> &diagnostics) {
  if (diagnostics &&
      PyErr_WarnEx(PyExc_UserWarning, diagnostics->c_str(), 1) < 0)
    throw nb::python_error();
}

/// megc.compile's keywords into flags, each converted as its kind in
/// CompileFlags.def says: String takes a str (an int becomes its decimal
/// text, None keeps the default), Bool a bool, Int an int, List a str of
/// comma-separated items or a sequence of str.
void setFlag(std::string &field, nb::handle value, const char *keyword) {
  if (value.is_none())
    return;
  if (nb::isinstance<nb::str>(value))
    field = nb::cast<std::string>(value);
  else if (nb::isinstance<nb::int_>(value) && !nb::isinstance<nb::bool_>(value))
    field = nb::cast<std::string>(nb::str(value));
  else
    throw nb::type_error(
        (std::string("compile(): ") + keyword + " must be a str").c_str());
}
void setFlag(bool &field, nb::handle value, const char *keyword) {
  if (!nb::isinstance<nb::bool_>(value))
    throw nb::type_error(
        (std::string("compile(): ") + keyword + " must be a bool").c_str());
  field = nb::cast<bool>(value);
}
void setFlag(int64_t &field, nb::handle value, const char *keyword) {
  if (!nb::isinstance<nb::int_>(value) || nb::isinstance<nb::bool_>(value))
    throw nb::type_error(
        (std::string("compile(): ") + keyword + " must be an int").c_str());
  field = nb::cast<int64_t>(value);
}
void setFlag(std::vector<std::string> &field, nb::handle value,
             const char *keyword) {
  field.clear();
  if (nb::isinstance<nb::str>(value)) {
    llvm::SmallVector<llvm::StringRef> items;
    std::string text = nb::cast<std::string>(value);
    llvm::StringRef(text).split(items, ',');
    for (llvm::StringRef item : items)
      field.push_back(item.str());
    return;
  }
  try {
    field = nb::cast<std::vector<std::string>>(value);
  } catch (const nb::cast_error &) {
    throw nb::type_error((std::string("compile(): ") + keyword +
                          " must be a str or a sequence of str")
                             .c_str());
  }
}

CompileFlags flagsFromKeywords(const nb::dict &keywords) {
  CompileFlags flags;
  for (auto [key, value] : keywords) {
    std::string name = nb::cast<std::string>(key);
    bool known = false;
#define MEGC_COMPILE_FLAG(field, kind, flag, python, defaultValue, help)       \
  if (name == python) {                                                        \
    setFlag(flags.field, value, python);                                       \
    known = true;                                                              \
  }
#include "megc/Compiler/CompileFlags.def"
    if (!known) {
      std::string expected;
#define MEGC_COMPILE_FLAG(field, kind, flag, python, defaultValue, help)       \
  expected += std::string(expected.empty() ? "" : ", ") + python;
#include "megc/Compiler/CompileFlags.def"
      throw nb::type_error(("compile() got an unexpected keyword argument '" +
                            name + "'; its options are " + expected)
                               .c_str());
    }
  }
  return flags;
}

nb::object compile(const std::string &source, const std::string &sourceName,
                   const CompileFlags &flags) {
  llvm::Expected<CompileOptions> options = parseCompileFlags(flags);
  if (!options)
    throw CompilerError(llvm::toString(options.takeError()));
  static std::once_flag registered;
  std::call_once(registered, registerCompilerPasses);
  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);

  std::string result;
  std::optional<std::string> diagnostics;
  {
    nb::gil_scoped_release release;
    CompilerCall call(registry);
    call.getContext().loadAllAvailableDialects();
    call.getSourceMgr().AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(source, sourceName),
        llvm::SMLoc());
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceFile<mlir::ModuleOp>(call.getSourceMgr(),
                                              &call.getContext());
    if (!module)
      throw CompilerError(call.report());
    mlir::FailureOr<std::string> compiled = compileModule(*module, *options);
    if (failed(compiled))
      throw CompilerError(call.report());
    result = std::move(*compiled);
    diagnostics = call.diagnostics();
  }
  warn(diagnostics);
  if (options->emit == Emit::Artifact || options->emit == Emit::CudaEmulation)
    return nb::bytes(result.data(), result.size());
  return nb::str(result.data(), result.size());
}

/// A setting of megc.gen by its keyword, and where it goes in GenOptions.
template <typename T> struct Setting {
  const char *keyword;
  T gen::GenOptions::*field;
};

const Setting<std::optional<int64_t>> kIntSettings[] = {
    {"layers", &gen::GenOptions::layers},
    {"hidden", &gen::GenOptions::hidden},
    {"heads", &gen::GenOptions::heads},
    {"kv_heads", &gen::GenOptions::kvHeads},
    {"ffn", &gen::GenOptions::ffn},
    {"vocab", &gen::GenOptions::vocab},
    {"seq", &gen::GenOptions::seq},
    {"text_seq", &gen::GenOptions::textSeq},
    {"batch", &gen::GenOptions::batch},
    {"in_channels", &gen::GenOptions::inChannels},
    {"context_dim", &gen::GenOptions::contextDim},
    {"bucket_mb", &gen::GenOptions::bucketMb},
    {"warmup_steps", &gen::GenOptions::warmupSteps},
    {"decay_steps", &gen::GenOptions::decaySteps},
    {"wsd_decay_steps", &gen::GenOptions::wsdDecaySteps},
    {"micro_batches", &gen::GenOptions::microBatches},
    {"experts", &gen::GenOptions::experts},
    {"top_k", &gen::GenOptions::topK},
    {"expert_groups", &gen::GenOptions::expertGroups},
    {"top_groups", &gen::GenOptions::topGroups},
    {"shared_experts", &gen::GenOptions::sharedExperts},
    {"moe_ffn", &gen::GenOptions::moeFfn},
    {"dense_layers", &gen::GenOptions::denseLayers},
    {"q_lora_rank", &gen::GenOptions::qLoraRank},
    {"kv_lora_rank", &gen::GenOptions::kvLoraRank},
    {"qk_nope_dim", &gen::GenOptions::qkNopeDim},
    {"qk_rope_dim", &gen::GenOptions::qkRopeDim},
    {"v_head_dim", &gen::GenOptions::vHeadDim}};
const Setting<std::optional<double>> kFloatSettings[] = {
    {"rotary_percent", &gen::GenOptions::rotaryPercent},
    {"rope_theta", &gen::GenOptions::ropeTheta},
    {"norm_eps", &gen::GenOptions::normEps},
    {"lr", &gen::GenOptions::learningRate},
    {"weight_decay", &gen::GenOptions::weightDecay},
    {"adam_eps", &gen::GenOptions::adamEps},
    {"clip_grad", &gen::GenOptions::clipGrad},
    {"min_lr", &gen::GenOptions::minLr},
    {"warmup_init_lr", &gen::GenOptions::warmupInitLr},
    {"moe_capacity_factor", &gen::GenOptions::moeCapacityFactor},
    {"moe_aux_loss_coeff", &gen::GenOptions::moeAuxLossCoeff},
    {"moe_bias_update_rate", &gen::GenOptions::moeBiasUpdateRate},
    {"routed_scaling", &gen::GenOptions::routedScaling}};
const Setting<std::optional<std::string>> kTextSettings[] = {
    {"dtype", &gen::GenOptions::dtype},
    {"ignore_index", &gen::GenOptions::ignoreIndex},
    {"betas", &gen::GenOptions::betas},
    {"frozen", &gen::GenOptions::frozen},
    {"mesh", &gen::GenOptions::mesh},
    {"fsdp", &gen::GenOptions::fsdp},
    {"outer_fsdp", &gen::GenOptions::outerFsdp},
    {"hf_config", &gen::GenOptions::hfConfig},
    {"lr_schedule", &gen::GenOptions::lrSchedule},
    {"wsd_style", &gen::GenOptions::wsdStyle},
    {"moe_drop_policy", &gen::GenOptions::moeDropPolicy}};

/// Stores `value` in the field `keyword` names, if one of `settings` does.
template <typename T, size_t N>
bool store(gen::GenOptions &options, const std::string &keyword,
           nb::handle value, const Setting<std::optional<T>> (&settings)[N]) {
  for (const auto &setting : settings) {
    if (keyword != setting.keyword)
      continue;
    T converted;
    if (!nb::try_cast(value, converted))
      throw nb::type_error(("megc.gen: '" + keyword + "' got " +
                            nb::type_name(value.type()).c_str())
                               .c_str());
    options.*setting.field = converted;
    return true;
  }
  return false;
}

gen::GenOptions genOptions(const std::string &preset, nb::dict settings) {
  gen::GenOptions options;
  options.preset = preset;
  for (auto [key, value] : settings) {
    std::string keyword = nb::cast<std::string>(key);
    if (store(options, keyword, value, kIntSettings) ||
        store(options, keyword, value, kFloatSettings) ||
        store(options, keyword, value, kTextSettings))
      continue;
    if (keyword == "rotary_interleaved")
      options.rotaryInterleaved = nb::cast<bool>(value);
    else if (keyword == "train")
      options.train = nb::cast<bool>(value);
    else if (keyword == "sequence_parallel")
      options.sequenceParallel = nb::cast<bool>(value);
    else if (keyword == "precision")
      options.precision =
          nb::cast<std::vector<std::pair<std::string, std::string>>>(value);
    else
      throw nb::type_error(
          ("megc.gen: unexpected setting '" + keyword + "'").c_str());
  }
  return options;
}

std::string generate(const std::string &preset, nb::dict settings) {
  gen::GenOptions options = genOptions(preset, settings);
  nb::gil_scoped_release release;
  CompilerCall call((mlir::DialectRegistry()));
  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> module =
      gen::generateModel(call.getContext(), options);
  if (!module)
    throw CompilerError(call.report(llvm::toString(module.takeError())));
  std::string text;
  llvm::raw_string_ostream os(text);
  (**module)->print(os);
  os << "\n";
  return text;
}

} // namespace

void bindCompiler(nb::module_ &m) {
  m.def(
      "compile",
      [](const std::string &source, const std::string &sourceName,
         const nb::dict &options) {
        return compile(source, sourceName, flagsFromKeywords(options));
      },
      nb::arg("source"), nb::arg("source_name"), nb::arg("options"),
      nb::sig("def compile(source: str, source_name: str, options: "
              "dict[str, object]) -> bytes | str"),
      "Compiles meg IR text as `megc` does; see megc.compile.");
  m.def(
      "compile_flags",
      []() {
        nb::list flags;
#define MEGC_COMPILE_FLAG(field, kind, flag, python, defaultValue, help)       \
  flags.append(nb::make_tuple(python, "--" flag, #kind));
#include "megc/Compiler/CompileFlags.def"
        return flags;
      },
      nb::sig("def compile_flags() -> list[tuple[str, str, str]]"),
      "Every option of megc.compile as CompileFlags.def declares it: "
      "(keyword, driver flag, kind).");
  m.def("generate", &generate, nb::arg("preset"), nb::arg("settings"),
        nb::sig("def generate(preset: str, settings: dict[str, object]) -> "
                "str"),
        "Writes a preset as meg IR as `megc gen` does; see megc.gen.");
  // What no valid input reaches on purpose, but a compiler bug or an LLVM
  // backend can: the tests check that it raises and that the next call
  // works.
  m.def(
      "_report_fatal_error",
      [](const std::string &reason) {
        mlir::DialectRegistry registry;
        nb::gil_scoped_release release;
        CompilerCall call(registry);
        llvm::report_fatal_error(llvm::Twine(reason));
      },
      nb::arg("reason"),
      "For the tests: an LLVM fatal error inside a compiler call, which "
      "raises megc.Error instead of ending the process.");
}

} // namespace megc::python
