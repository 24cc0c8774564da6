//===- HfImport.cpp - models from Hugging Face configs -----------------===//
//
// Maps the config.json of LlamaForCausalLM, MistralForCausalLM,
// Qwen2ForCausalLM and Qwen3ForCausalLM onto LlamaConfig, and that of
// DeepseekV3ForCausalLM onto DeepseekConfig, with the defaults of
// transformers' config classes. A reader marks each field it consumes;
// whatever is left at the end is an error, so a field megc does not
// implement cannot be dropped unnoticed.
//
// Over 600 lines: two model families' config readers (Llama and its
// relatives, DeepSeek-V3), which share the field reader and its check that
// nothing is left unread.
//
//===----------------------------------------------------------------------===//

#include "megc/Gen/HfImport.h"

#include "ConfigSizes.h"
#include "ModelBuilder.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <tuple>

using namespace llvm;

namespace megc::gen {

namespace {

enum class Family { Llama, Mistral, Qwen2, Qwen3, DeepseekV3 };

/// The most a config file may hold and be nested: configs have a few
/// thousand bytes and a few levels (the runtime's JSON reader allows 64).
constexpr uint64_t kMaxConfigBytes = 16 << 20;
constexpr size_t kMaxConfigDepth = 64;

/// Where `text`'s arrays and objects first nest deeper than
/// kMaxConfigDepth (strings skipped), or nullopt.
std::optional<size_t> tooDeep(StringRef text) {
  size_t depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxConfigDepth)
        return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

struct FamilyInfo {
  StringRef architecture, modelType;
  Family family;
};

constexpr FamilyInfo kFamilies[] = {
    {"LlamaForCausalLM", "llama", Family::Llama},
    {"MistralForCausalLM", "mistral", Family::Mistral},
    {"Qwen2ForCausalLM", "qwen2", Family::Qwen2},
    {"Qwen3ForCausalLM", "qwen3", Family::Qwen3},
    {"DeepseekV3ForCausalLM", "deepseek_v3", Family::DeepseekV3}};

/// Fields that describe tokenization, generation or bookkeeping and do not
/// change the computation of logits, loss or gradients.
constexpr StringRef kNoEffectFields[] = {
    "transformers_version", "_name_or_path",        "bos_token_id",
    "eos_token_id",         "pad_token_id",         "use_cache",
    "return_dict",          "output_hidden_states", "output_attentions"};

std::string show(const json::Value &value) {
  return formatv("{0}", value).str();
}

/// Reads fields of one JSON object, remembering which were read.
class FieldReader {
public:
  FieldReader(const json::Object &object, std::string where)
      : object(object), where(std::move(where)) {}

  Error error(StringRef field, const Twine &message) const {
    return createStringError(inconvertibleErrorCode(),
                             where + ": field '" + field + "' " + message);
  }

  /// The field's value, or null when absent (JSON null is returned as is).
  const json::Value *get(StringRef field) {
    used.insert(field);
    return object.get(field);
  }
  bool has(StringRef field) const { return object.get(field) != nullptr; }

  /// A positive integer; `fallback` when absent or null (no fallback:
  /// required).
  Expected<int64_t> positive(StringRef field,
                             std::optional<int64_t> fallback = {}) {
    const json::Value *value = get(field);
    if (!value || value->kind() == json::Value::Null) {
      if (fallback)
        return *fallback;
      return error(field, "is required");
    }
    std::optional<int64_t> number = value->getAsInteger();
    if (!number || *number < 1)
      return error(field, "must be a positive integer, got " + show(*value));
    return *number;
  }

  /// A finite number; `fallback` when absent or null.
  Expected<double> number(StringRef field, std::optional<double> fallback = {}) {
    const json::Value *value = get(field);
    if (!value || value->kind() == json::Value::Null) {
      if (fallback)
        return *fallback;
      return error(field, "is required");
    }
    std::optional<double> number = value->getAsNumber();
    if (!number || !std::isfinite(*number))
      return error(field, "must be a finite number, got " + show(*value));
    return *number;
  }

  Expected<bool> boolean(StringRef field, bool fallback) {
    const json::Value *value = get(field);
    if (!value || value->kind() == json::Value::Null)
      return fallback;
    std::optional<bool> flag = value->getAsBoolean();
    if (!flag)
      return error(field, "must be true or false, got " + show(*value));
    return *flag;
  }

  /// A string, or std::nullopt when absent or null.
  Expected<std::optional<std::string>> text(StringRef field) {
    const json::Value *value = get(field);
    if (!value || value->kind() == json::Value::Null)
      return std::optional<std::string>();
    std::optional<StringRef> string = value->getAsString();
    if (!string)
      return error(field, "must be a string, got " + show(*value));
    return std::optional<std::string>(string->str());
  }

  /// Fails on the first field that nothing read.
  Error rejectUnread(StringRef modelName) const {
    std::vector<StringRef> keys;
    for (const auto &entry : object)
      keys.push_back(entry.first);
    llvm::sort(keys);
    for (StringRef key : keys)
      if (!used.contains(key))
        return error(key, "= " + show(*object.get(key)) +
                              " is not supported by megc import for " +
                              modelName +
                              " (it would change the model, or megc does "
                              "not know it)");
    return Error::success();
  }

private:
  const json::Object &object;
  std::string where;
  StringSet<> used;
};

Expected<const FamilyInfo *> findFamily(FieldReader &fields) {
  const json::Value *architectures = fields.get("architectures");
  Expected<std::optional<std::string>> modelType = fields.text("model_type");
  if (!modelType)
    return modelType.takeError();
  const FamilyInfo *family = nullptr;
  if (architectures && architectures->kind() != json::Value::Null) {
    const json::Array *list = architectures->getAsArray();
    if (!list || list->size() != 1 || !(*list)[0].getAsString())
      return fields.error("architectures",
                          "must list one architecture, got " +
                              show(*architectures));
    StringRef name = *(*list)[0].getAsString();
    for (const FamilyInfo &info : kFamilies)
      if (info.architecture == name)
        family = &info;
    if (!family)
      return fields.error("architectures",
                          "names '" + name + "', which megc import does not "
                          "support; it supports " + kHfArchitectures);
  } else if (*modelType) {
    for (const FamilyInfo &info : kFamilies)
      if (info.modelType == **modelType)
        family = &info;
    if (!family)
      return fields.error("model_type",
                          "is '" + **modelType + "', which megc import does "
                          "not support; it supports " + kHfArchitectures);
  } else {
    return fields.error("architectures",
                        "is missing (and so is model_type): cannot tell the "
                        "model; megc import supports " +
                            std::string(kHfArchitectures));
  }
  if (*modelType && **modelType != family->modelType)
    return fields.error("model_type", "is '" + **modelType + "', but " +
                                          family->architecture +
                                          " has model_type '" +
                                          family->modelType + "'");
  return family;
}

Expected<DType> readDType(FieldReader &fields, StringRef field) {
  Expected<std::optional<std::string>> name = fields.text(field);
  if (!name)
    return name.takeError();
  if (!*name || **name == "float32")
    return DType::F32;
  if (**name == "bfloat16")
    return DType::BF16;
  if (**name == "float16")
    return DType::F16;
  return fields.error(field, "is '" + **name +
                                 "'; megc supports float32, bfloat16 and "
                                 "float16 (or pass --dtype)");
}

/// rope_parameters (transformers 5) or rope_theta with rope_scaling (older
/// configs, which transformers 5 still reads).
/// With `allowYarn` (DeepSeek-V3), YaRN scaling too.
Error readRope(FieldReader &fields, StringRef source, RopeConfig &rope,
               int64_t maxPositions, bool allowYarn = false) {
  const json::Value *parameters = fields.get("rope_parameters");
  const json::Value *scaling = fields.get("rope_scaling");
  bool hasParameters = parameters && parameters->kind() != json::Value::Null;
  bool hasScaling = scaling && scaling->kind() != json::Value::Null;
  if (hasParameters && hasScaling)
    return fields.error("rope_scaling",
                        "is given next to rope_parameters; give one");
  Expected<double> theta = fields.number("rope_theta", 10000.0);
  if (!theta)
    return theta.takeError();
  rope.theta = *theta;
  const json::Value *section = hasParameters ? parameters
                               : hasScaling  ? scaling
                                             : nullptr;
  if (!section)
    return Error::success();
  StringRef sectionName = hasParameters ? "rope_parameters" : "rope_scaling";
  const json::Object *object = section->getAsObject();
  if (!object)
    return fields.error(sectionName,
                        "must be an object, got " + show(*section));
  FieldReader params(*object, (source + ": " + sectionName).str());
  Expected<std::optional<std::string>> type = params.text("rope_type");
  if (!type)
    return type.takeError();
  if (!*type) {
    // The legacy spelling.
    type = params.text("type");
    if (!type)
      return type.takeError();
  }
  std::string kind = type->value_or("default");
  if (params.has("rope_theta")) {
    Expected<double> theta = params.number("rope_theta");
    if (!theta)
      return theta.takeError();
    // Given twice, the two must agree: which one a library reads differs.
    if (fields.has("rope_theta") && *theta != rope.theta)
      return params.error(
          "rope_theta",
          "= " + formatNumber(*theta) + " disagrees with the top-level "
          "rope_theta = " + formatNumber(rope.theta) + "; give one, or the "
          "same value in both");
    rope.theta = *theta;
  }
  Expected<double> partial = params.number("partial_rotary_factor", 1.0);
  if (!partial)
    return partial.takeError();
  if (*partial != 1.0)
    return params.error("partial_rotary_factor",
                        "= " + formatNumber(*partial) +
                            " is not supported: the Llama family rotates "
                            "the whole head");
  if (kind == "llama3") {
    Llama3RopeScaling llama3;
    Expected<double> factor = params.number("factor");
    Expected<double> low = params.number("low_freq_factor");
    Expected<double> high = params.number("high_freq_factor");
    Expected<int64_t> original =
        params.positive("original_max_position_embeddings", maxPositions);
    if (!factor || !low || !high || !original)
      return joinErrors(joinErrors(factor.takeError(), low.takeError()),
                        joinErrors(high.takeError(), original.takeError()));
    if (!(*factor >= 1.0))
      return params.error("factor", "must be >= 1, got " +
                                        formatNumber(*factor));
    if (!(*low > 0.0) || !(*high > *low))
      return params.error("high_freq_factor",
                          "must be above low_freq_factor > 0, got " +
                              formatNumber(*high) + " and " +
                              formatNumber(*low));
    llama3.factor = *factor;
    llama3.lowFreqFactor = *low;
    llama3.highFreqFactor = *high;
    llama3.originalMaxPositions = *original;
    rope.llama3 = llama3;
  } else if (kind == "yarn" && allowYarn) {
    YarnRopeScaling yarn;
    Expected<int64_t> original =
        params.positive("original_max_position_embeddings");
    if (!original)
      return original.takeError();
    yarn.originalMaxPositions = *original;
    // Without a factor, the ratio of the context to the pretrained one.
    Expected<double> factor = params.number(
        "factor", static_cast<double>(maxPositions) /
                      static_cast<double>(yarn.originalMaxPositions));
    if (!factor)
      return factor.takeError();
    yarn.factor = *factor;
    // transformers reads beta_fast/beta_slow with `or`: 0 is the default.
    for (auto [field, target, fallback] :
         {std::tuple<StringRef, double *, double>{"beta_fast", &yarn.betaFast,
                                                  32.0},
          {"beta_slow", &yarn.betaSlow, 1.0},
          {"mscale", &yarn.mscale, 0.0},
          {"mscale_all_dim", &yarn.mscaleAllDim, 0.0}}) {
      Expected<double> value = params.number(field, fallback);
      if (!value)
        return value.takeError();
      *target = *value == 0.0 ? fallback : *value;
    }
    if (params.has("attention_factor")) {
      Expected<double> attention = params.number("attention_factor");
      if (!attention)
        return attention.takeError();
      yarn.attentionFactor = *attention;
    }
    Expected<bool> truncate = params.boolean("truncate", true);
    if (!truncate)
      return truncate.takeError();
    yarn.truncate = *truncate;
    if (!(yarn.factor > 0.0))
      return params.error("factor",
                          "must be > 0, got " + formatNumber(yarn.factor));
    rope.yarn = yarn;
  } else if (kind != "default") {
    return params.error(params.has("rope_type") ? "rope_type" : "type",
                        "is '" + kind + "'; megc import supports " +
                            (allowYarn ? "the default RoPE and yarn scaling"
                                       : "the default RoPE and llama3 "
                                         "scaling"));
  }
  return params.rejectUnread("RoPE type '" + kind + "'");
}

/// Sliding-window attention has no effect when every query sees its whole
/// causal past: kv > q - window holds for all kv <= q when seq <= window.
Error checkWindow(FieldReader &fields, std::optional<int64_t> window,
                  int64_t seq, StringRef why) {
  if (!window || seq <= *window)
    return Error::success();
  return fields.error("sliding_window",
                      "= " + Twine(*window) + " (" + why +
                          ") is below --seq " + Twine(seq) +
                          ": megc's attention has no window; use --seq <= " +
                          Twine(*window));
}

Error readSlidingWindow(FieldReader &fields, Family family, int64_t layers,
                        int64_t seq) {
  const json::Value *windowValue = fields.get("sliding_window");
  std::optional<int64_t> window;
  if (family == Family::Mistral && !windowValue)
    window = 4096; // MistralConfig's default
  if (windowValue && windowValue->kind() != json::Value::Null) {
    Expected<int64_t> value = fields.positive("sliding_window");
    if (!value)
      return value.takeError();
    window = *value;
  }
  if (family == Family::Llama) {
    if (windowValue)
      return fields.error("sliding_window",
                          "is not a field of LlamaForCausalLM");
    return Error::success();
  }
  if (family == Family::Mistral)
    return checkWindow(fields, window, seq, "Mistral attends in a window");
  // Qwen2 and Qwen3: a window only on the layers it is switched on for.
  Expected<bool> useWindow = fields.boolean("use_sliding_window", false);
  if (!useWindow)
    return useWindow.takeError();
  Expected<int64_t> maxWindowLayers =
      fields.positive("max_window_layers", layers);
  if (!maxWindowLayers)
    return maxWindowLayers.takeError();
  bool anySliding = *useWindow && *maxWindowLayers < layers;
  if (const json::Value *types = fields.get("layer_types");
      types && types->kind() != json::Value::Null) {
    const json::Array *list = types->getAsArray();
    if (!list || static_cast<int64_t>(list->size()) != layers)
      return fields.error("layer_types", "must list one type for each of the " +
                                             Twine(layers) + " layers, got " +
                                             show(*types));
    anySliding = false;
    for (const json::Value &type : *list) {
      std::optional<StringRef> name = type.getAsString();
      if (name == "sliding_attention")
        anySliding = true;
      else if (name != "full_attention")
        return fields.error("layer_types",
                            "holds " + show(type) +
                                "; expected full_attention or "
                                "sliding_attention");
    }
  }
  if (!anySliding)
    return Error::success();
  return checkWindow(fields, window, seq, "some layers attend in a window");
}

/// The config as recorded on the module: the model's dtype replaces the
/// checkpoint's, since megc saves weights in the model's dtype.
std::string recordedConfig(json::Object object, DType dtype) {
  const char *name = dtype == DType::F32    ? "float32"
                     : dtype == DType::BF16 ? "bfloat16"
                                            : "float16";
  if (object.get("torch_dtype"))
    object["torch_dtype"] = name;
  object["dtype"] = name;
  return formatv("{0}", json::Value(std::move(object))).str();
}

/// Reads a positive integer field into `target`.
Error takePositive(FieldReader &fields, StringRef field, int64_t &target,
                   std::optional<int64_t> fallback = {}) {
  Expected<int64_t> value = fields.positive(field, fallback);
  if (!value)
    return value.takeError();
  target = *value;
  return Error::success();
}

/// Reads a finite number field into `target`.
Error takeNumber(FieldReader &fields, StringRef field, double &target,
                 double fallback) {
  Expected<double> value = fields.number(field, fallback);
  if (!value)
    return value.takeError();
  target = *value;
  return Error::success();
}

/// The fields every family reads alike, into `c` (a LlamaConfig or a
/// DeepseekConfig): the activation (SwiGLU's silu; the message names `mlp`),
/// the norm epsilon, the initialisation, dropout (none), tied embeddings and
/// the dtype (`--dtype` first). Returns the positions the sequence must fit
/// in.
template <typename Config>
Expected<int64_t> readCommonFields(FieldReader &fields,
                                   const json::Object &object,
                                   const HfImportShape &shape, StringRef mlp,
                                   Config &c) {
  int64_t maxPositions = 0;
  Expected<std::optional<std::string>> act = fields.text("hidden_act");
  if (!act)
    return act.takeError();
  if (act->value_or("silu") != "silu")
    return fields.error("hidden_act",
                        "is '" + **act + "'; " + mlp + " SwiGLU (silu)");
  if (Error error =
          takePositive(fields, "max_position_embeddings", maxPositions,
                       std::max<int64_t>(shape.seq, 1)))
    return std::move(error);
  if (shape.seq > maxPositions)
    return fields.error("max_position_embeddings",
                        "= " + Twine(maxPositions) +
                            " is below --seq " + Twine(shape.seq));
  double dropout = 0.0;
  if (Error error = takeNumber(fields, "rms_norm_eps", c.normEps, 1e-6))
    return std::move(error);
  if (Error error =
          takeNumber(fields, "initializer_range", c.initStd, 0.02))
    return std::move(error);
  if (Error error = takeNumber(fields, "attention_dropout", dropout, 0.0))
    return std::move(error);
  if (dropout != 0.0)
    return fields.error("attention_dropout",
                        "= " + formatNumber(dropout) +
                            " is not supported: megc has no dropout");
  Expected<bool> tied = fields.boolean("tie_word_embeddings", false);
  if (!tied)
    return tied.takeError();
  c.tieEmbeddings = *tied;
  StringRef dtypeField = object.get("dtype") ? "dtype" : "torch_dtype";
  if (object.get("dtype") && object.get("torch_dtype"))
    fields.get("torch_dtype");
  Expected<DType> dtype = readDType(fields, dtypeField);
  if (!dtype)
    return dtype.takeError();
  c.dtype = shape.dtype.value_or(*dtype);
  return maxPositions;
}

/// DeepseekV3ForCausalLM, with the defaults of transformers'
/// DeepseekV3Config.
Expected<DeepseekConfig> parseDeepseek(FieldReader &fields,
                                       const json::Object &object,
                                       StringRef source,
                                       const HfImportShape &shape) {
  DeepseekConfig c;
  c.seq = shape.seq;
  c.batch = shape.batch;
  for (StringRef field : kNoEffectFields)
    fields.get(field);
  // The multi-token-prediction layers are not part of the causal LM, and
  // returning the router's logits does not change the model's.
  fields.get("num_nextn_predict_layers");
  fields.get("output_router_logits");
  // The fields of DeepSeek's own release (its remote code): the code map
  // and the expert-parallel size change nothing; the router they name must
  // be the one transformers implements.
  fields.get("auto_map");
  fields.get("ep_size");
  for (auto [field, wanted] :
       {std::pair<StringRef, StringRef>{"scoring_func", "sigmoid"},
        {"topk_method", "noaux_tc"}}) {
    Expected<std::optional<std::string>> value = fields.text(field);
    if (!value)
      return value.takeError();
    if (*value && **value != wanted)
      return fields.error(field, "is '" + **value + "'; DeepSeek-V3 routes "
                                 "with " + wanted +
                                 " (the only router megc implements)");
  }
  int64_t layerFreq = 1;
  if (Error error = takePositive(fields, "moe_layer_freq", layerFreq, 1))
    return std::move(error);
  if (layerFreq != 1)
    return fields.error("moe_layer_freq",
                        "= " + Twine(layerFreq) +
                            " is not supported: every layer from "
                            "first_k_dense_replace on is an MoE layer");
  // The release's sequence-wise balance loss: its coefficient, which
  // --moe-aux-loss-coeff overrides.
  Expected<bool> seqAux = fields.boolean("seq_aux", true);
  if (!seqAux)
    return seqAux.takeError();
  if (Error error = takeNumber(fields, "aux_loss_alpha", c.auxLossCoeff, 0.0))
    return std::move(error);
  if (c.auxLossCoeff != 0.0 && !*seqAux)
    return fields.error("seq_aux", "is false: megc implements the "
                                   "sequence-wise balance loss only");
  for (auto [field, target, fallback] :
       {std::tuple<StringRef, int64_t *, int64_t>{"vocab_size", &c.vocab,
                                                  129280},
        {"hidden_size", &c.hidden, 7168},
        {"intermediate_size", &c.ffn, 18432},
        {"moe_intermediate_size", &c.moeFfn, 2048},
        {"num_hidden_layers", &c.layers, 61},
        {"num_attention_heads", &c.heads, 128},
        {"n_routed_experts", &c.routedExperts, 256},
        {"num_experts_per_tok", &c.topK, 8},
        {"n_group", &c.groups, 8},
        {"topk_group", &c.topGroups, 4},
        {"kv_lora_rank", &c.kvLoraRank, 512},
        {"qk_nope_head_dim", &c.qkNopeDim, 128},
        {"qk_rope_head_dim", &c.qkRopeDim, 64},
        {"v_head_dim", &c.vHeadDim, 128}})
    if (Error error = takePositive(fields, field, *target, fallback))
      return std::move(error);
  int64_t kvHeads = 0;
  if (Error error = takePositive(fields, "num_key_value_heads", kvHeads,
                                 c.heads))
    return std::move(error);
  if (kvHeads != c.heads)
    return fields.error("num_key_value_heads",
                        "= " + Twine(kvHeads) +
                            " must equal num_attention_heads = " +
                            Twine(c.heads) +
                            ": MLA gives every head its own keys");
  // Derived sizes transformers stores next to the ones they come from.
  int64_t headDim = 0, qkHeadDim = 0;
  if (Error error = takePositive(fields, "head_dim", headDim, c.qkRopeDim))
    return std::move(error);
  if (headDim != c.qkRopeDim)
    return fields.error("head_dim", "= " + Twine(headDim) +
                                        " must equal qk_rope_head_dim = " +
                                        Twine(c.qkRopeDim));
  if (Error error = takePositive(fields, "qk_head_dim", qkHeadDim,
                                 c.qkNopeDim + c.qkRopeDim))
    return std::move(error);
  if (qkHeadDim != c.qkNopeDim + c.qkRopeDim)
    return fields.error("qk_head_dim",
                        "= " + Twine(qkHeadDim) +
                            " must equal qk_nope_head_dim + qk_rope_head_dim "
                            "= " +
                            Twine(c.qkNopeDim + c.qkRopeDim));
  const json::Value *qLora = fields.get("q_lora_rank");
  if (!qLora)
    c.qLoraRank = 1536;
  else if (qLora->kind() == json::Value::Null)
    c.qLoraRank = 0;
  else if (Error error = takePositive(fields, "q_lora_rank", c.qLoraRank))
    return std::move(error);
  const json::Value *shared = fields.get("n_shared_experts");
  if (!shared)
    c.sharedExperts = 1;
  else if (shared->kind() == json::Value::Null)
    c.sharedExperts = 0;
  else if (Error error =
               takePositive(fields, "n_shared_experts", c.sharedExperts))
    return std::move(error);
  const json::Value *firstDense = fields.get("first_k_dense_replace");
  std::optional<int64_t> dense =
      firstDense ? firstDense->getAsInteger() : std::optional<int64_t>(3);
  if (!dense || *dense < 0)
    return fields.error("first_k_dense_replace",
                        "must be an integer >= 0, got " + show(*firstDense));
  c.firstDense = *dense;
  if (Error error =
          takeNumber(fields, "routed_scaling_factor", c.routedScaling, 2.5))
    return std::move(error);
  Expected<int64_t> tp = fields.positive("pretraining_tp", 1);
  if (!tp)
    return tp.takeError();
  if (*tp != 1)
    return fields.error("pretraining_tp", "= " + Twine(*tp) +
                                              " is not supported; use 1");
  for (auto [field, target, fallback] :
       {std::tuple<StringRef, bool *, bool>{"norm_topk_prob", &c.normTopkProb,
                                            true},
        {"rope_interleave", &c.ropeInterleave, true},
        {"attention_bias", &c.attentionBias, false}}) {
    Expected<bool> flag = fields.boolean(field, fallback);
    if (!flag)
      return flag.takeError();
    *target = *flag;
  }
  Expected<int64_t> maxPositions =
      readCommonFields(fields, object, shape, "DeepSeek-V3's MLPs are", c);
  if (!maxPositions)
    return maxPositions.takeError();
  RopeConfig rope;
  if (Error error = readRope(fields, source, rope, *maxPositions,
                             /*allowYarn=*/true))
    return std::move(error);
  if (rope.llama3)
    return fields.error(object.get("rope_parameters") ? "rope_parameters"
                                                      : "rope_scaling",
                        "is llama3 scaling, which DeepSeek-V3 does not use; "
                        "megc import supports its default RoPE and yarn");
  c.ropeTheta = rope.theta;
  c.yarn = rope.yarn;
  if (Error error = fields.rejectUnread("DeepseekV3ForCausalLM"))
    return std::move(error);
  c.hfConfig = recordedConfig(object, c.dtype);
  return c;
}

} // namespace

Expected<HfModelConfig> parseHfConfig(StringRef text, StringRef source,
                                      const HfImportShape &shape) {
  // The JSON parser recurses per level: a nesting limit keeps a hostile
  // file from overflowing the stack.
  if (std::optional<size_t> at = tooDeep(text))
    return createStringError(inconvertibleErrorCode(),
                             source + ": nested more than " +
                                 Twine(kMaxConfigDepth) +
                                 " levels deep (at byte " + Twine(*at) +
                                 "); a model config is a few levels deep");
  Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return createStringError(inconvertibleErrorCode(),
                             source + ": not valid JSON: " +
                                 toString(parsed.takeError()));
  const json::Object *object = parsed->getAsObject();
  if (!object)
    return createStringError(inconvertibleErrorCode(),
                             source + ": expected a JSON object");
  FieldReader fields(*object, source.str());
  Expected<const FamilyInfo *> family = findFamily(fields);
  if (!family)
    return family.takeError();
  Family kind = (*family)->family;
  if (kind == Family::DeepseekV3) {
    Expected<DeepseekConfig> deepseek =
        parseDeepseek(fields, *object, source, shape);
    if (!deepseek)
      return deepseek.takeError();
    return HfModelConfig(std::move(*deepseek));
  }

  LlamaConfig c;
  c.seq = shape.seq;
  c.batch = shape.batch;
  for (StringRef field : kNoEffectFields)
    fields.get(field);

  auto take = [](Expected<int64_t> value, int64_t &target) -> Error {
    if (!value)
      return value.takeError();
    target = *value;
    return Error::success();
  };
  if (Error error = take(fields.positive("vocab_size"), c.vocab))
    return std::move(error);
  if (Error error = take(fields.positive("hidden_size"), c.hidden))
    return std::move(error);
  if (Error error = take(fields.positive("intermediate_size"), c.ffn))
    return std::move(error);
  if (Error error = take(fields.positive("num_hidden_layers"), c.layers))
    return std::move(error);
  if (Error error = checkLayerCount("num_hidden_layers", c.layers))
    return std::move(error);
  if (Error error = take(fields.positive("num_attention_heads"), c.heads))
    return std::move(error);
  if (Error error =
          take(fields.positive("num_key_value_heads", c.heads), c.kvHeads))
    return std::move(error);
  if (c.heads % c.kvHeads != 0)
    return fields.error("num_key_value_heads",
                        "= " + Twine(c.kvHeads) +
                            " must divide num_attention_heads = " +
                            Twine(c.heads));
  // Qwen3's head_dim is independent of the hidden size (default 128);
  // the others default to hidden / heads.
  const json::Value *headDim = fields.get("head_dim");
  if (headDim && headDim->kind() != json::Value::Null) {
    if (Error error = take(fields.positive("head_dim"), c.headDim))
      return std::move(error);
  } else if (kind == Family::Qwen3) {
    c.headDim = 128;
  }
  if (c.headDim == 0 && c.hidden % c.heads != 0)
    return fields.error("hidden_size",
                        "= " + Twine(c.hidden) +
                            " is not a multiple of num_attention_heads = " +
                            Twine(c.heads) + " and no head_dim is given");

  Expected<int64_t> maxPositions =
      readCommonFields(fields, *object, shape, "the Llama family's MLP is", c);
  if (!maxPositions)
    return maxPositions.takeError();

  switch (kind) {
  case Family::Llama: {
    Expected<bool> attentionBias = fields.boolean("attention_bias", false);
    Expected<bool> mlpBias = fields.boolean("mlp_bias", false);
    Expected<int64_t> tp = fields.positive("pretraining_tp", 1);
    if (!attentionBias || !mlpBias || !tp)
      return joinErrors(joinErrors(attentionBias.takeError(),
                                   mlpBias.takeError()),
                        tp.takeError());
    if (*tp != 1)
      return fields.error("pretraining_tp",
                          "= " + Twine(*tp) +
                              " is not supported (it splits the "
                              "projections' products); use 1");
    c.qkvBias = c.outputBias = *attentionBias;
    c.mlpBias = *mlpBias;
    break;
  }
  case Family::Mistral:
    break;
  case Family::Qwen2:
    c.qkvBias = true;
    break;
  case Family::Qwen3: {
    Expected<bool> attentionBias = fields.boolean("attention_bias", false);
    if (!attentionBias)
      return attentionBias.takeError();
    c.qkvBias = c.outputBias = *attentionBias;
    c.qkNorm = true;
    break;
  }
  case Family::DeepseekV3:
    llvm_unreachable("read by parseDeepseek");
  }
  if (Error error = checkLlamaSizes(c, kLlamaHfFields))
    return std::move(error);
  if (Error error = readSlidingWindow(fields, kind, c.layers, c.seq))
    return std::move(error);
  if (Error error = readRope(fields, source, c.rope, *maxPositions))
    return std::move(error);

  if (Error error = fields.rejectUnread((*family)->architecture))
    return std::move(error);
  c.hfConfig = recordedConfig(*object, c.dtype);
  return HfModelConfig(std::move(c));
}

Expected<HfModelConfig> readHfConfig(StringRef path,
                                   const HfImportShape &shape) {
  SmallString<256> file(path);
  if (sys::fs::is_directory(path))
    sys::path::append(file, "config.json");
  // Only a regular file of a config's size is read: /dev/zero behind a
  // symlink would be read until memory runs out.
  sys::fs::file_status status;
  if (std::error_code error = sys::fs::status(file, status))
    return createStringError(error, "cannot read '" + file +
                                        "': " + error.message());
  if (status.type() != sys::fs::file_type::regular_file)
    return createStringError(inconvertibleErrorCode(),
                             "'" + file +
                                 "' is not a regular file; a model config "
                                 "is a JSON file");
  if (status.getSize() > kMaxConfigBytes)
    return createStringError(
        inconvertibleErrorCode(),
        "'" + file + "' has " + Twine(status.getSize()) +
            " bytes, above the " + Twine(kMaxConfigBytes) +
            " bytes megc reads of a config (they have a few thousand)");
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
      MemoryBuffer::getFile(file, /*IsText=*/true);
  if (!buffer)
    return createStringError(buffer.getError(),
                             "cannot read '" + file +
                                 "': " + buffer.getError().message());
  return parseHfConfig((*buffer)->getBuffer(), file, shape);
}

} // namespace megc::gen
