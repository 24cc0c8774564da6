//===- InspectCommand.cpp - `megc inspect` -----------------------------===//
//
// Verifies an artifact with the FlatBuffers verifier and prints what it
// holds: entries with their signatures, parameters, kernels (with their CUDA
// launches), command counts, CUDA graph regions and each entry's memory plan
// (arena, peak, and what no reuse would need).
//
//===----------------------------------------------------------------------===//

#include "InspectCommand.h"
#include "ScheduleCommand.h"

#include "megc/Compiler/CompileOptions.h"
#include "megrt/ArtifactSeal.h"
#include "megrt/Collectives.h"
#include "megrt/FormatVersion.h"
#include "megrt/megc_generated.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <optional>

using namespace llvm;

namespace megc {

cl::SubCommand &inspectSubCommand() {
  static cl::SubCommand command("inspect", "Describe a .megc artifact");
  return command;
}

namespace {
namespace fb = megrt::fb;

cl::OptionCategory inspectCategory("megc inspect options");

cl::opt<std::string> artifactFile(cl::Positional, cl::Required,
                                  cl::desc("<model.megc>"),
                                  cl::sub(inspectSubCommand()),
                                  cl::cat(inspectCategory));
cl::opt<std::string> deviceMemory(
    "device-memory",
    cl::desc("Say whether each entry's plan (arena plus parameters and "
             "state, per rank) fits in this much memory, e.g. 80GiB"),
    cl::init(""), cl::sub(inspectSubCommand()), cl::cat(inspectCategory));
cl::opt<bool> drawPipeline(
    "schedule",
    cl::desc("Draw the pipeline schedule each rank's entries were compiled "
             "in (passes and transfers per rank, unit pass costs)"),
    cl::init(false), cl::sub(inspectSubCommand()), cl::cat(inspectCategory));
cl::opt<std::string> scheduleTrace(
    "schedule-trace",
    cl::desc("Write the pipeline schedule's planned order as a Chrome trace "
             "(one row per rank)"),
    cl::init(""), cl::sub(inspectSubCommand()), cl::cat(inspectCategory));

std::string typeText(fb::DType dtype,
                     const flatbuffers::Vector<int64_t> *shape) {
  std::string text = "tensor<";
  if (shape)
    for (int64_t dim : *shape)
      text += std::to_string(dim) + "x";
  return text + EnumNameDType(dtype) + ">";
}

/// A data-parallel input shows the global tensor the caller passes.
/// What a signature says of one tensor after its name.
std::string specText(const fb::TensorSpec *spec,
                     const std::vector<int64_t> &groupSizes) {
  std::string text;
  raw_string_ostream os(text);
  os << typeText(spec->dtype(), spec->shape());
  if (spec->index_bound() > 0)
    os << " in [0," << spec->index_bound() << ")";
  if (spec->index_ignore())
    os << " or " << *spec->index_ignore();
  int32_t split = spec->split();
  if (split >= 0 && static_cast<size_t>(split) < groupSizes.size() &&
      spec->shape() && spec->shape()->size()) {
    std::vector<int64_t> global(spec->shape()->begin(), spec->shape()->end());
    global[0] *= groupSizes[split];
    os << " per rank of tensor<";
    for (int64_t dim : global)
      os << dim << "x";
    os << EnumNameDType(spec->dtype()) << "> split over submesh " << split;
  }
  return text;
}

/// A name's first dot-separated part that is a number (a layer index), as
/// the name with `{}` in its place and the number; none without.
std::optional<std::pair<std::string, int64_t>> numberedPart(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    int64_t index = 0;
    if (parts[i].empty() || parts[i].getAsInteger(10, index))
      continue;
    std::string pattern;
    for (size_t j = 0; j < parts.size(); ++j)
      pattern += (j ? "." : "") + (j == i ? std::string("{}") : parts[j].str());
    return std::make_pair(pattern, index);
  }
  return std::nullopt;
}

/// The entry's tensors, the same tensor of consecutive layers folded into
/// one line: `grad.model.layers.{0..125}.mlp.up_proj.weight: tensor<...>`
/// for three layers and more with the same type (a 405B model's gradient
/// has 1,137 outputs), placed where the first of them was.
void printSpecs(
    raw_ostream &os,
    const flatbuffers::Vector<flatbuffers::Offset<fb::TensorSpec>> *specs,
    const std::vector<int64_t> &groupSizes) {
  if (!specs)
    return;
  struct Item {
    std::string name, text;
    std::optional<std::pair<std::string, int64_t>> numbered;
  };
  std::vector<Item> items;
  // Per (pattern, text): the items, in order.
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> groups;
  for (const fb::TensorSpec *spec : *specs) {
    Item item{spec->name()->str(), specText(spec, groupSizes),
              numberedPart(spec->name()->str())};
    if (item.numbered)
      groups[{item.numbered->first, item.text}].push_back(items.size());
    items.push_back(std::move(item));
  }
  // A group folds when its numbers run consecutively from the first.
  auto folds = [&](const std::vector<size_t> &members) {
    if (members.size() < 3)
      return false;
    for (size_t i = 1; i < members.size(); ++i)
      if (items[members[i]].numbered->second !=
          items[members[0]].numbered->second + static_cast<int64_t>(i))
        return false;
    return true;
  };
  bool first = true;
  for (size_t i = 0; i < items.size(); ++i) {
    const Item &item = items[i];
    std::string name = item.name;
    if (item.numbered) {
      const std::vector<size_t> &members =
          groups[{item.numbered->first, item.text}];
      if (folds(members)) {
        if (members.front() != i)
          continue;
        std::string range =
            "{" + std::to_string(item.numbered->second) + ".." +
            std::to_string(items[members.back()].numbered->second) + "}";
        name = item.numbered->first;
        name.replace(name.find("{}"), 2, range);
      }
    }
    os << (first ? "" : ", ") << name << ": " << item.text;
    first = false;
  }
}

uint64_t elementBytes(fb::DType dtype) {
  switch (dtype) {
  case fb::DType::bf16:
  case fb::DType::f16:
    return 2;
  case fb::DType::i64:
    return 8;
  default:
    return 4;
  }
}

std::string megabytes(uint64_t bytes) {
  std::string text;
  raw_string_ostream(text) << format("%.3f MB", bytes / 1e6);
  return text;
}

/// Per kind: how many collectives an entry runs, their payload, and what a
/// rank sends with ring algorithms ((G-1)/G of the gathered or reduced
/// buffer for all-gather and reduce-scatter, twice that for all-reduce).
void printCollectives(raw_ostream &os, const fb::Entry &entry,
                      const std::vector<int64_t> &groupSizes) {
  if (!entry.commands() || !entry.buffers())
    return;
  struct Totals {
    int count = 0;
    uint64_t payload = 0;
    double sent = 0;
  };
  std::map<std::string, Totals> kinds;
  double sent = 0;
  for (const fb::Command *command : *entry.commands()) {
    const fb::Collective *collective = command->op_as_Collective();
    if (!collective || collective->submesh() >= groupSizes.size())
      continue;
    int64_t group = groupSizes[collective->submesh()];
    uint64_t width = elementBytes(collective->dtype());
    uint64_t whole = collective->count() * width;
    const megrt::CollectiveInfo *info =
        collective->kind()
            ? megrt::findCollective(collective->kind()->string_view())
            : nullptr;
    if (!info)
      continue;
    // What it moves: its larger buffer (a local copy: what it copies), and
    // what leaves this rank, the collective's share of that.
    if (info->communicates)
      whole = info->largerElements(collective->count(),
                                   static_cast<uint64_t>(group)) *
              width;
    double bytes =
        info->sentElements(collective->count(), static_cast<uint64_t>(group)) *
        static_cast<double>(width);
    Totals &totals = kinds[info->name];
    ++totals.count;
    totals.payload += whole;
    totals.sent += bytes;
    sent += bytes;
  }
  if (kinds.empty())
    return;
  os << "  collectives:";
  for (auto &[name, totals] : kinds)
    os << " " << name << " " << totals.count << " ("
       << megabytes(totals.payload) << ")";
  os << "; sent per rank " << megabytes(static_cast<uint64_t>(sent)) << "\n";
}
/// `    cpu: row_reduction domain [2, 256] tile [1, 16] vector 16, grid 32
/// + 1, 8.2 KB scratch`: a kernel's strategy and its dispatch grids.
void printCode(raw_ostream &os, const char *target,
               const fb::KernelCode *code) {
  if (!code)
    return;
  os << "    " << target << ": ";
  auto dims = [&](const flatbuffers::Vector<int64_t> *values) {
    os << "[";
    for (uint32_t i = 0; values && i < values->size(); ++i)
      os << (i ? ", " : "") << values->Get(i);
    os << "]";
  };
  if (const fb::KernelStrategy *strategy = code->strategy()) {
    os << fb::EnumNameKernelStrategyKind(strategy->kind());
    if (strategy->domain() && strategy->domain()->size()) {
      os << " domain ";
      dims(strategy->domain());
      os << " tile ";
      dims(strategy->tile());
    }
    os << " vector " << strategy->vector_width() << ", ";
  }
  os << "grid";
  if (const auto *dispatches = code->dispatches())
    for (auto [index, dispatch] : llvm::enumerate(*dispatches)) {
      os << (index ? " + " : " ");
      for (uint32_t i = 0; dispatch->grid() && i < dispatch->grid()->size();
           ++i)
        if (i == 0 || dispatch->grid()->Get(i) != 1)
          os << (i ? "x" : "") << dispatch->grid()->Get(i);
    }
  if (code->scratch_bytes())
    os << ", " << code->scratch_bytes() << " B scratch";
  os << "\n";
}

int fail(const Twine &message) {
  WithColor::error(errs(), "megc inspect") << message << "\n";
  return 1;
}

} // namespace

int runInspect() {
  std::optional<uint64_t> device;
  if (!deviceMemory.empty()) {
    Expected<uint64_t> bytes = parseByteSize(deviceMemory, "--device-memory");
    if (!bytes) {
      WithColor::error(errs(), "megc inspect") << toString(bytes.takeError())
                                               << "\n";
      return 1;
    }
    device = *bytes;
  }
  auto file = MemoryBuffer::getFile(artifactFile);
  if (!file) {
    WithColor::error(errs(), "megc inspect")
        << artifactFile << ": " << file.getError().message() << "\n";
    return 1;
  }
  auto *data = reinterpret_cast<const uint8_t *>((*file)->getBufferStart());
  flatbuffers::Verifier verifier(data, (*file)->getBufferSize());
  size_t size = (*file)->getBufferSize();
  if (size < 8 || !fb::ProgramBufferHasIdentifier(data) ||
      !fb::VerifyProgramBuffer(verifier)) {
    WithColor::error(errs(), "megc inspect")
        << artifactFile << " is not a valid megc artifact\n";
    return 1;
  }
  if (const fb::Program *program = fb::GetProgram(data);
      program->format_version() != megrt::kFormatVersion) {
    WithColor::error(errs(), "megc inspect")
        << artifactFile << ": artifact format version "
        << program->format_version() << ", this tool reads "
        << megrt::kFormatVersion << "\n";
    return 1;
  }
  std::optional<size_t> sealAt = megrt::checksumOffset(data);
  if (!sealAt || fb::GetProgram(data)->checksum() !=
                     megrt::artifactChecksum(data, size, *sealAt)) {
    WithColor::error(errs(), "megc inspect")
        << artifactFile
        << " is not a valid megc artifact: checksum mismatch (corrupt)\n";
    return 1;
  }
  const fb::Program *program = fb::GetProgram(data);
  raw_ostream &os = outs();
  os << artifactFile << ": format " << program->format_version()
     << ", produced by "
     << (program->producer() ? program->producer()->str() : "?") << "\n";

  // Group sizes of the registered submeshes.
  std::vector<int64_t> groupSizes;
  if (const fb::Mesh *mesh = program->mesh()) {
    std::map<std::string, int64_t> axisSizes;
    int64_t ranks = 1;
    os << "mesh @" << (mesh->name() ? mesh->name()->str() : "?") << " [";
    if (mesh->axes())
      for (auto [index, axis] : llvm::enumerate(*mesh->axes())) {
        std::string name = axis->name() ? axis->name()->str() : "?";
        os << (index ? ", " : "") << name << " = " << axis->size();
        axisSizes[name] = axis->size();
        ranks *= axis->size();
      }
    os << "]: " << ranks << " ranks\n";
    if (program->submeshes())
      for (auto [index, submesh] : llvm::enumerate(*program->submeshes())) {
        int64_t size = 1;
        os << "  submesh " << index << ": [";
        if (submesh->axes())
          for (auto [i, axis] : llvm::enumerate(*submesh->axes())) {
            os << (i ? ", " : "") << axis->str();
            size *= axisSizes[axis->str()];
          }
        os << "], " << size << " ranks\n";
        groupSizes.push_back(size);
      }
  }

  // Per rank: a sharded parameter holds its piece.
  uint64_t weightBytes = 0, stateBytes = 0, fullBytes = 0;
  int64_t trainable = 0, sharded = 0;
  auto *params = program->parameters();
  if (params)
    for (const fb::Parameter *param : *params) {
      auto count = [](const flatbuffers::Vector<int64_t> *shape) {
        int64_t elements = 1;
        if (shape)
          for (int64_t dim : *shape)
            elements *= dim;
        return elements;
      };
      uint64_t width = elementBytes(param->dtype());
      uint64_t bytes = count(param->shape()) * width;
      (param->state() ? stateBytes : weightBytes) += bytes;
      fullBytes += param->sharding()
                       ? count(param->sharding()->full_shape()) * width
                       : bytes;
      trainable += param->trainable();
      sharded += param->sharding() != nullptr;
    }
  os << "parameters: " << (params ? params->size() : 0) << " (" << trainable
     << " trainable";
  if (sharded)
    os << ", " << sharded << " sharded";
  os << "), per rank " << megabytes(weightBytes + stateBytes)
     << " (model weights " << megabytes(weightBytes) << ", training state "
     << megabytes(stateBytes) << ")";
  if (sharded)
    os << " of " << megabytes(fullBytes) << " unsharded";
  os << "\n";
  if (program->memory_budget())
    os << "memory budget: " << megabytes(program->memory_budget())
       << " per rank (megc --memory-budget)\n";
  if (const fb::PipelineSchedule *pipeline = program->pipeline()) {
    std::string kindName = pipeline->kind() ? pipeline->kind()->str() : "";
    os << "pipeline: " << kindName << " schedule, " << pipeline->ranks()
       << " ranks, " << pipeline->chunks() << " stage"
       << (pipeline->chunks() > 1 ? "s" : "") << " each, "
       << pipeline->micro_batches() << " micro-batches a step\n";
    if (drawPipeline || !scheduleTrace.empty()) {
      std::optional<pipeline::ScheduleKind> kind =
          pipeline::parseScheduleKind(kindName);
      if (!kind)
        return fail("the pipeline's schedule '" + kindName +
                    "' is none this megc knows");
      std::string drawing;
      raw_string_ostream drawn(drawing);
      if (int code = drawSchedule(*kind, pipeline->ranks(), pipeline->chunks(),
                                  pipeline->micro_batches(), {}, scheduleTrace,
                                  "megc inspect", drawn))
        return code;
      // The drawing's own header repeats the line above.
      if (drawPipeline)
        for (StringRef line :
             split(StringRef(drawing).rtrim('\n').split('\n').second, '\n'))
          os << "  " << line << "\n";
    }
  } else if (drawPipeline || !scheduleTrace.empty()) {
    return fail("the artifact has no pipeline schedule (compile with pp in "
                "the mesh)");
  }

  auto *kernels = program->kernels();
  os << "kernels: " << (kernels ? kernels->size() : 0);
  if (program->cpu() && program->cpu()->shared_object()) {
    os << ", cpu shared object " << program->cpu()->shared_object()->size()
       << " bytes";
    if (const auto *features = program->cpu()->features();
        features && features->size()) {
      os << " (x86-64 +";
      for (auto [index, feature] : llvm::enumerate(*features))
        os << (index ? "," : "") << feature->str();
      os << ")";
    }
  }
  if (const fb::CudaModule *cuda = program->cuda())
    os << ", cuda " << (cuda->arch() ? cuda->arch()->str() : "?") << " PTX "
       << (cuda->ptx() ? cuda->ptx()->size() : 0) << " bytes, cubin "
       << (cuda->cubin() ? cuda->cubin()->size() : 0) << " bytes";
  os << "\n";
  if (kernels)
    for (const fb::Kernel *kernel : *kernels) {
      os << "  " << kernel->name()->str() << " (" << kernel->num_args()
         << " args)\n";
      printCode(os, "cpu", kernel->cpu());
      printCode(os, "cuda", kernel->cuda());
    }

  if (program->entries())
    for (const fb::Entry *entry : *program->entries()) {
      os << "entry " << entry->name()->str() << "(";
      printSpecs(os, entry->inputs(), groupSizes);
      os << ") -> (";
      printSpecs(os, entry->outputs(), groupSizes);
      os << ")\n";
      if (entry->pipeline_rank() >= 0)
        os << "  pipeline rank " << entry->pipeline_rank()
           << " of the group of submesh " << entry->stage_submesh() << "\n";
      std::map<std::string, int> counts;
      if (entry->commands())
        for (const fb::Command *command : *entry->commands()) {
          // A library call counts under its kernel's name.
          const fb::LibraryCall *call = command->op_as_LibraryCall();
          ++counts[call && call->name()
                       ? call->name()->str()
                       : EnumNameCommandOp(command->op_type())];
        }
      os << "  commands:";
      for (auto &[name, count] : counts)
        os << " " << name << " " << count;
      os << "\n";
      if (entry->flops())
        os << "  flops: " << llvm::format("%.4g", double(entry->flops()))
           << " a run in GEMMs and attention (per rank)\n";
      if (entry->recompute_flops())
        os << "  recomputed: "
           << llvm::format("%.4g", double(entry->recompute_flops()))
           << " flops a run ("
           << llvm::format("%.1f%%", 100.0 * entry->recompute_flops() /
                                         std::max<uint64_t>(entry->flops(), 1))
           << " of the entry's)\n";
      printCollectives(os, *entry, groupSizes);
      if (entry->graphs() && entry->graphs()->size()) {
        os << "  graph regions: " << entry->graphs()->size() << "\n";
        for (const fb::GraphRegion *graph : *entry->graphs())
          os << "    " << (graph->name() ? graph->name()->str() : "?")
             << ": commands " << graph->first_command() << ".."
             << graph->first_command() + graph->num_commands()
             << (graph->share_io() ? ", shares I/O buffers" : "")
             << (graph->forward_only() ? ", forward only" : "") << "\n";
      }
      if (const fb::MemoryPlan *plan = entry->plan())
        os << "  memory plan: arena " << megabytes(plan->arena_bytes())
           << ", peak live " << megabytes(plan->peak_bytes())
           << ", without reuse " << megabytes(plan->unplanned_bytes())
           << format(" (arena is %.1f%% of that)",
                     plan->unplanned_bytes()
                         ? 100.0 * plan->arena_bytes() / plan->unplanned_bytes()
                         : 0.0)
           << "\n";
      if (const fb::MemoryPlan *plan = entry->plan()) {
        // A pipeline rank holds its stages' parameters and the shared ones.
        uint64_t held = weightBytes + stateBytes;
        if (entry->pipeline_rank() >= 0 && params)
          for (const fb::Parameter *param : *params)
            if (param->pipeline_owner() >= 0 &&
                param->pipeline_owner() != entry->pipeline_rank()) {
              uint64_t elements = 1;
              if (param->shape())
                for (int64_t dim : *param->shape())
                  elements *= static_cast<uint64_t>(dim);
              held -= elements * elementBytes(param->dtype());
            }
        uint64_t peak = plan->arena_bytes() + held;
        os << "  peak per rank: " << megabytes(peak) << " (arena "
           << megabytes(plan->arena_bytes()) << " + parameters and state "
           << megabytes(held) << ")";
        if (uint64_t budget = program->memory_budget())
          os << (peak <= budget ? ", within" : ", over") << " the budget";
        if (device)
          os << (peak <= *device ? ", fits in " : ", does not fit in ")
             << megabytes(*device);
        os << "\n";
      }
    }
  return 0;
}

} // namespace megc
