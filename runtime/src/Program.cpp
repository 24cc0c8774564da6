// Loading a megc artifact: structural checks, version check, then semantics.
#include "megrt/Program.h"

#include "Fail.h"
#include "FbTypes.h"
#include "FileIO.h"
#include "ProgramImpl.h"
#include "ProgramVerifier.h"
#include "megrt/ArtifactSeal.h"
#include "megrt/FormatVersion.h"

#include <cctype>
#include <cmath>
#include <cstring>

namespace megrt {
namespace {

/// Shows a 4-byte identifier with non-printable bytes escaped.
std::string printableIdentifier(const uint8_t *bytes) {
  static const char *const kHex = "0123456789abcdef";
  std::string text;
  for (int i = 0; i < 4; ++i) {
    if (std::isprint(bytes[i])) {
      text += static_cast<char>(bytes[i]);
    } else {
      text += "\\x";
      text += kHex[bytes[i] >> 4];
      text += kHex[bytes[i] & 0xf];
    }
  }
  return text;
}

[[noreturn]] void failCorrupt(size_t size) {
  fail("megc artifact is truncated or corrupt: FlatBuffers verification "
       "failed on its ",
       size, " bytes");
}

/// Reads format_version after verifying only the root table, so that an
/// artifact of another version, whose layout may differ, still gets the
/// version message rather than a corruption message.
uint32_t readFormatVersion(const std::vector<uint8_t> &bytes) {
  flatbuffers::Verifier verifier(bytes.data(), bytes.size());
  flatbuffers::uoffset_t rootOffset = verifier.VerifyOffset(0);
  if (!rootOffset)
    failCorrupt(bytes.size());
  auto *root =
      reinterpret_cast<const flatbuffers::Table *>(bytes.data() + rootOffset);
  if (!root->VerifyTableStart(verifier) ||
      !root->VerifyField<uint32_t>(verifier, fb::Program::VT_FORMAT_VERSION,
                                   sizeof(uint32_t)))
    failCorrupt(bytes.size());
  return root->GetField<uint32_t>(fb::Program::VT_FORMAT_VERSION, 0);
}

void verifyStructure(const std::vector<uint8_t> &bytes) {
  constexpr size_t kHeaderBytes = 8;
  if (bytes.size() < kHeaderBytes)
    fail("megc artifact is truncated: ", bytes.size(),
         " bytes is less than the ", kHeaderBytes, "-byte header");
  if (bytes.size() >= FLATBUFFERS_MAX_BUFFER_SIZE)
    fail("megc artifact of ", bytes.size(),
         " bytes exceeds the FlatBuffers limit of ",
         FLATBUFFERS_MAX_BUFFER_SIZE - 1, " bytes");
  if (!flatbuffers::BufferHasIdentifier(bytes.data(), kFileIdentifier))
    fail("not a megc artifact: file identifier is '",
         printableIdentifier(bytes.data() + 4), "', expected '",
         kFileIdentifier, "'");
  uint32_t version = readFormatVersion(bytes);
  if (version != kFormatVersion)
    fail("artifact format version ", version, ", this runtime reads ",
         kFormatVersion);
  flatbuffers::Verifier verifier(bytes.data(), bytes.size());
  if (!fb::VerifyProgramBuffer(verifier))
    failCorrupt(bytes.size());
  std::optional<size_t> offset = checksumOffset(bytes.data());
  if (!offset)
    fail("megc artifact has no checksum; it was not written by megc");
  uint64_t stored = fb::GetProgram(bytes.data())->checksum();
  uint64_t computed = artifactChecksum(bytes.data(), bytes.size(), *offset);
  if (stored != computed)
    fail("megc artifact is corrupt: checksum mismatch (stored ", std::hex,
         stored, ", computed ", computed, std::dec, ")");
}

TensorSpec toTensorSpec(const fb::TensorSpec &spec) {
  std::optional<uint32_t> split;
  if (spec.split() >= 0)
    split = static_cast<uint32_t>(spec.split());
  std::optional<int64_t> ignore;
  if (spec.index_ignore())
    ignore = *spec.index_ignore();
  return {spec.name()->str(), toDType(spec.dtype()), toShape(spec.shape()),
          split, spec.index_bound(),
          spec.index_use() ? spec.index_use()->str() : std::string(), ignore};
}

std::vector<TensorSpec> toTensorSpecs(
    const flatbuffers::Vector<flatbuffers::Offset<fb::TensorSpec>> *specs) {
  std::vector<TensorSpec> result;
  for (uint32_t i = 0; i < sizeOf(specs); ++i)
    result.push_back(toTensorSpec(*specs->Get(i)));
  return result;
}

ParameterSpec toParameterSpec(const fb::Parameter &param) {
  ParameterSpec spec{param.name()->str(),
                     toDType(param.dtype()),
                     toShape(param.shape()),
                     param.trainable(),
                     static_cast<InitKind>(param.init_kind()),
                     param.init_scale(),
                     std::nullopt,
                     param.state(),
                     toString(param.init_source())};
  spec.nonNegative = param.non_negative();
  spec.pipelineSubmesh = param.pipeline_submesh();
  spec.pipelineOwner = param.pipeline_owner();
  for (uint32_t i = 0; i < sizeOf(param.aliases()); ++i)
    spec.aliases.push_back(param.aliases()->Get(i)->str());
  for (uint32_t i = 0; i < sizeOf(param.parts()); ++i)
    spec.parts.push_back(param.parts()->Get(i)->str());
  if (const fb::Sharding *sharding = param.sharding())
    spec.sharding =
        ShardingSpec{sharding->submesh(), toShape(sharding->full_shape()),
                     sharding->dim() >= 0 ? std::optional<int>(sharding->dim())
                                          : std::nullopt,
                     sharding->block_submesh() >= 0
                         ? std::optional<uint32_t>(sharding->block_submesh())
                         : std::nullopt};
  return spec;
}

/// Verification guarantees unique axis names, positive sizes and submesh
/// axes that name mesh axes.
void readMesh(const fb::Program &root, Program::Impl &impl) {
  const fb::Mesh *mesh = root.mesh();
  if (!mesh)
    return;
  MeshSpec spec{toString(mesh->name()), {}, 1};
  for (uint32_t i = 0; i < sizeOf(mesh->axes()); ++i) {
    const fb::MeshAxis &axis = *mesh->axes()->Get(i);
    spec.axes.push_back({toString(axis.name()), axis.size()});
    spec.numRanks *= axis.size();
  }
  for (uint32_t i = 0; i < sizeOf(root.submeshes()); ++i) {
    const fb::Submesh &submesh = *root.submeshes()->Get(i);
    SubmeshSpec group{{}, {}, 1};
    for (uint32_t j = 0; j < sizeOf(submesh.axes()); ++j) {
      std::string name = toString(submesh.axes()->Get(j));
      for (size_t a = 0; a < spec.axes.size(); ++a)
        if (spec.axes[a].name == name) {
          group.axisIndices.push_back(a);
          group.size *= spec.axes[a].size;
        }
      group.axes.push_back(std::move(name));
    }
    impl.submeshes.push_back(std::move(group));
  }
  impl.mesh = std::move(spec);
}

void describe(Program::Impl &impl) {
  const fb::Program &root = *fb::GetProgram(impl.bytes.data());
  impl.formatVersion = root.format_version();
  impl.producer = toString(root.producer());
  for (uint32_t i = 0; i < sizeOf(root.parameters()); ++i)
    impl.parameters.push_back(toParameterSpec(*root.parameters()->Get(i)));
  for (uint32_t i = 0; i < sizeOf(root.entries()); ++i) {
    const fb::Entry &entry = *root.entries()->Get(i);
    MemoryPlanInfo plan;
    if (const fb::MemoryPlan *memoryPlan = entry.plan())
      plan = {memoryPlan->arena_bytes(), memoryPlan->peak_bytes(),
              memoryPlan->unplanned_bytes()};
    impl.entries.push_back({entry.name()->str(), toTensorSpecs(entry.inputs()),
                            toTensorSpecs(entry.outputs()), plan,
                            sizeOf(entry.buffers()), sizeOf(entry.commands()),
                            entry.flops(), entry.stage_submesh(),
                            entry.pipeline_rank()});
  }
  for (uint32_t i = 0; i < sizeOf(root.kernels()); ++i) {
    const fb::Kernel &kernel = *root.kernels()->Get(i);
    KernelSpec spec{kernel.name()->str(), kernel.num_args(), {}, {}};
    const fb::KernelCode *codes[] = {kernel.cpu(), kernel.cuda()};
    KernelCodeSpec *specs[] = {&spec.cpu, &spec.cuda};
    for (int target = 0; target < 2; ++target) {
      const fb::KernelCode *code = codes[target];
      if (!code)
        continue;
      KernelCodeSpec &out = *specs[target];
      if (const fb::KernelStrategy *strategy = code->strategy()) {
        out.strategy = fb::EnumNameKernelStrategyKind(strategy->kind());
        out.domain = toShape(strategy->domain());
        out.tile = toShape(strategy->tile());
        out.vectorWidth = strategy->vector_width();
      }
      for (uint32_t j = 0; j < sizeOf(code->dispatches()); ++j) {
        const fb::Dispatch &dispatch = *code->dispatches()->Get(j);
        uint64_t workgroups = 1;
        for (uint32_t d = 0; d < sizeOf(dispatch.grid()); ++d)
          workgroups *= dispatch.grid()->Get(d);
        out.dispatches.push_back({toString(dispatch.entry()), workgroups});
      }
      out.scratchBytes = code->scratch_bytes();
    }
    impl.kernels.push_back(std::move(spec));
  }
  impl.hasCpuModule = root.cpu() != nullptr;
  impl.hasCudaModule = root.cuda() != nullptr;
  readMesh(root, impl);
  impl.hfConfig = toString(root.hf_config());
  if (const fb::LrSchedule *s = root.lr_schedule())
    impl.lrSchedule = LrScheduleSpec{
        static_cast<LrScheduleSpec::Kind>(s->kind()),
        s->max_lr(),
        s->min_lr(),
        s->init_lr(),
        s->warmup(),
        s->decay(),
        s->wsd_decay(),
        static_cast<LrScheduleSpec::WsdStyle>(s->wsd_style()),
        s->lr_parameter(),
        s->step_parameter()};
  impl.checksum = root.checksum();
}

} // namespace

const char *initKindName(InitKind kind) {
  return fb::EnumNameInitKind(static_cast<fb::InitKind>(kind));
}

Program::Program(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Program Program::load(const std::string &path) {
  std::vector<uint8_t> bytes = readFile(path);
  try {
    return fromBytes(std::move(bytes));
  } catch (const Error &error) {
    fail("'", path, "': ", error.what());
  }
}

Program Program::fromBytes(const void *data, size_t size) {
  const auto *begin = static_cast<const uint8_t *>(data);
  return fromBytes(std::vector<uint8_t>(begin, begin + size));
}

Program Program::fromBytes(std::vector<uint8_t> bytes) {
  verifyStructure(bytes);
  verifyProgramSemantics(*fb::GetProgram(bytes.data()));
  auto impl = std::make_shared<Impl>();
  impl->bytes = std::move(bytes);
  describe(*impl);
  return Program(std::move(impl));
}

uint32_t Program::formatVersion() const { return impl_->formatVersion; }
const std::string &Program::producer() const { return impl_->producer; }
const std::vector<ParameterSpec> &Program::parameters() const {
  return impl_->parameters;
}
const std::vector<EntrySpec> &Program::entries() const {
  return impl_->entries;
}
const std::vector<KernelSpec> &Program::kernels() const {
  return impl_->kernels;
}
bool Program::hasCpuModule() const { return impl_->hasCpuModule; }
bool Program::hasCudaModule() const { return impl_->hasCudaModule; }
const std::optional<MeshSpec> &Program::mesh() const { return impl_->mesh; }
const std::vector<SubmeshSpec> &Program::submeshes() const {
  return impl_->submeshes;
}
const std::string &Program::hfConfig() const { return impl_->hfConfig; }
const std::optional<LrScheduleSpec> &Program::lrSchedule() const {
  return impl_->lrSchedule;
}

double LrScheduleSpec::learningRateAt(int64_t n) const {
  if (warmup > 0 && n <= warmup)
    return initLr + (maxLr - initLr) * static_cast<double>(n) /
                        static_cast<double>(warmup);
  if (kind == Kind::Constant)
    return maxLr;
  if (n > decay)
    return minLr;
  double r = static_cast<double>(n - warmup) /
             static_cast<double>(decay - warmup);
  double c = 1.0;
  switch (kind) {
  case Kind::Linear:
    c = 1.0 - r;
    break;
  case Kind::Cosine:
    c = 0.5 * (std::cos(M_PI * r) + 1.0);
    break;
  case Kind::Wsd: {
    int64_t stable = decay - wsdDecay;
    if (n <= stable)
      break;
    double q = static_cast<double>(n - stable) / static_cast<double>(wsdDecay);
    switch (wsdStyle) {
    case WsdStyle::Linear:
      c = 1.0 - q;
      break;
    case WsdStyle::Cosine:
      c = 0.5 * (std::cos(M_PI * q) + 1.0);
      break;
    case WsdStyle::Exponential:
      c = 2.0 * std::pow(0.5, q) - 1.0;
      break;
    case WsdStyle::MinusSqrt:
      c = 1.0 - std::sqrt(q);
      break;
    }
    break;
  }
  case Kind::Constant:
    break;
  }
  return minLr + c * (maxLr - minLr);
}
uint64_t Program::checksum() const { return impl_->checksum; }

std::string Program::describeMesh() const {
  if (!impl_->mesh)
    return "(no mesh)";
  std::string text = "@" + impl_->mesh->name + " [";
  for (size_t i = 0; i < impl_->mesh->axes.size(); ++i) {
    const MeshAxis &axis = impl_->mesh->axes[i];
    text += concat(i ? ", " : "", axis.name, "=", axis.size);
  }
  return text + "]";
}
const uint8_t *Program::bytes() const { return impl_->bytes.data(); }
size_t Program::size() const { return impl_->bytes.size(); }

const EntrySpec *Program::findEntry(std::string_view name) const {
  for (size_t i = 0; i < impl_->entries.size(); ++i)
    if (impl_->entries[i].name == name &&
        !(i < otherRank_.size() && otherRank_[i]))
      return &impl_->entries[i];
  return nullptr;
}

void Program::selectPipelineRank(
    const std::function<int(uint32_t submesh)> &indexInGroup) {
  otherRank_.assign(impl_->entries.size(), false);
  for (size_t i = 0; i < impl_->entries.size(); ++i) {
    const EntrySpec &entry = impl_->entries[i];
    if (entry.stageSubmesh >= 0)
      otherRank_[i] = indexInGroup(static_cast<uint32_t>(entry.stageSubmesh)) !=
                      entry.pipelineRank;
  }
}

std::optional<size_t> Program::findParameter(std::string_view name) const {
  for (size_t i = 0; i < impl_->parameters.size(); ++i)
    if (impl_->parameters[i].name == name)
      return i;
  return std::nullopt;
}

} // namespace megrt
