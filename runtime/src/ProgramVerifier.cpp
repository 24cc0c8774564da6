// Semantic verification of a structurally valid artifact: its parameters,
// schedule and kernels here, each entry in EntryVerifier.cpp.
#include "ProgramVerifier.h"

#include "EntryVerifier.h"
#include "Fail.h"
#include "FbTypes.h"
#include "MeshVerifier.h"
#include "VerifierChecks.h"

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace megrt {
namespace {

/// A sharded copy takes its piece of a replicated source of its full shape,
/// or copies a source sharded the same way elementwise; a replicated copy
/// copies a replicated source of its shape.
void verifyCopyLayout(const fb::Parameter &param, const fb::Parameter &from,
                      const std::string &where) {
  std::string source = from.name()->str();
  const fb::Sharding *sharding = param.sharding();
  const fb::Sharding *fromSharding = from.sharding();
  // A piece of a block copies a source that is that block (sharded over
  // the block group along the same dim) and takes its piece.
  if (sharding && sharding->block_submesh() >= 0 && fromSharding &&
      fromSharding->block_submesh() < 0) {
    if (fromSharding->dim() != sharding->dim() ||
        static_cast<int64_t>(fromSharding->submesh()) !=
            sharding->block_submesh() ||
        toShape(fromSharding->full_shape()) != toShape(sharding->full_shape()))
      fail(where, ": copies '", source,
           "', which is not the tensor-parallel block its pieces split");
    return;
  }
  if (!sharding) {
    if (fromSharding)
      fail(where, ": copies '", source,
           "', which is sharded, but is not sharded itself");
  } else if (!fromSharding) {
    if (sharding->dim() >= 0)
      fail(where, ": copies '", source,
           "', which is not sharded, but is a block of a sharded tensor");
    if (toShape(from.shape()) != toShape(sharding->full_shape()))
      fail(where, ": copies '", source, "' of shape ",
           formatShape(toShape(from.shape())),
           " but is sharded with full shape ",
           formatShape(toShape(sharding->full_shape())));
    return;
  } else if (fromSharding->submesh() != sharding->submesh() ||
             fromSharding->dim() != sharding->dim() ||
             fromSharding->block_submesh() != sharding->block_submesh() ||
             toShape(fromSharding->full_shape()) !=
                 toShape(sharding->full_shape())) {
    auto layout = [](const fb::Sharding &shards) {
      return concat(
          "sharded over submesh ", shards.submesh(), " with full shape ",
          formatShape(toShape(shards.full_shape())),
          shards.dim() >= 0 ? concat(" in blocks along dim ", shards.dim())
                            : std::string());
    };
    fail(where, ": copies '", source, "', ", layout(*fromSharding), ", but is ",
         layout(*sharding));
  }
  if (toShape(from.shape()) != toShape(param.shape()))
    fail(where, ": copies '", source, "' of shape ",
         formatShape(toShape(from.shape())), " but has shape ",
         formatShape(toShape(param.shape())));
}

/// A copy names another parameter of its layout that is not a copy itself;
/// no other kind names a source.
void verifyCopySource(const fb::Program &program, const fb::Parameter &param) {
  std::string where = concat("parameter '", param.name()->str(), "'");
  std::string source = toString(param.init_source());
  if (param.init_kind() != fb::InitKind::copy) {
    if (!source.empty())
      fail(where, ": init '", fb::EnumNameInitKind(param.init_kind()),
           "' names a source parameter '", source, "'");
    return;
  }
  if (!isFloatingPoint(toDType(param.dtype())))
    fail(where, ": a copy needs a floating-point dtype, found ",
         dtypeName(toDType(param.dtype())));
  for (uint32_t i = 0; i < sizeOf(program.parameters()); ++i) {
    const fb::Parameter *from = program.parameters()->Get(i);
    if (toString(from->name()) != source)
      continue;
    verifyCopyLayout(param, *from, where);
    if (from->init_kind() == fb::InitKind::copy)
      fail(where, ": copies '", source, "', which is itself a copy");
    if (!isFloatingPoint(toDType(from->dtype())))
      fail(where, ": copies '", source, "' of dtype ",
           dtypeName(toDType(from->dtype())));
    return;
  }
  fail(where, ": copies '", source, "', which is not a parameter");
}

/// The schedule's rates are finite and ordered, its steps consistent, and
/// it reads and writes f32 scalar training state.
void verifyLrSchedule(const fb::Program &program,
                      const fb::LrSchedule &schedule) {
  if (!isValid(schedule.kind()) || !isValid(schedule.wsd_style()))
    fail("lr_schedule: invalid kind or WSD style value");
  double maxLr = schedule.max_lr(), minLr = schedule.min_lr(),
         initLr = schedule.init_lr();
  if (!(std::isfinite(maxLr) && maxLr > 0) ||
      !(std::isfinite(minLr) && minLr >= 0 && minLr <= maxLr) ||
      !(std::isfinite(initLr) && initLr >= 0 && initLr <= maxLr))
    fail("lr_schedule: expected 0 <= min_lr, init_lr <= max_lr with max_lr > "
         "0, found max_lr ",
         maxLr, ", min_lr ", minLr, ", init_lr ", initLr);
  int64_t warmup = schedule.warmup(), decay = schedule.decay(),
          wsdDecay = schedule.wsd_decay();
  bool constant = schedule.kind() == fb::LrScheduleKind::constant;
  bool wsd = schedule.kind() == fb::LrScheduleKind::wsd;
  if (warmup < 0 || (!constant && decay <= warmup) ||
      (wsd && (wsdDecay < 1 || wsdDecay > decay - warmup)))
    fail("lr_schedule: inconsistent steps: warmup ", warmup, ", decay ", decay,
         ", wsd_decay ", wsdDecay);
  for (auto [index, what] : {std::pair{schedule.lr_parameter(), "lr"},
                             std::pair{schedule.step_parameter(), "step"}}) {
    if (index >= sizeOf(program.parameters()))
      fail("lr_schedule: ", what, " parameter ", index, " of ",
           sizeOf(program.parameters()));
    const fb::Parameter &param = *program.parameters()->Get(index);
    if (!param.state() || param.dtype() != fb::DType::f32 ||
        sizeOf(param.shape()) != 0 || param.sharding())
      fail("lr_schedule: the ", what, " parameter '", param.name()->str(),
           "' must be an unsharded f32 scalar of the training state");
  }
}

void verifyParameter(const fb::Parameter &param, const MeshVerifier &mesh,
                     const std::string &where) {
  checkedTensorBytes(param.dtype(), param.shape(), where);
  if (!isValid(param.init_kind()))
    fail(where, ": invalid init kind value ",
         static_cast<int>(param.init_kind()));
  bool random = param.init_kind() == fb::InitKind::normal ||
                param.init_kind() == fb::InitKind::uniform;
  if (random && !isFloatingPoint(toDType(param.dtype())))
    fail(where, ": init '", fb::EnumNameInitKind(param.init_kind()),
         "' needs a floating-point dtype, found ",
         dtypeName(toDType(param.dtype())));
  if (random && !(std::isfinite(param.init_scale()) && param.init_scale() >= 0))
    fail(where, ": expected a finite non-negative init_scale, found ",
         param.init_scale());
  mesh.verifySharding(param, where);
  if (param.pipeline_submesh() >= 0 || param.pipeline_owner() >= 0) {
    if (param.pipeline_submesh() < 0)
      fail(where, ": a pipeline_owner needs a pipeline_submesh");
    int64_t size =
        mesh.groupSize(static_cast<uint64_t>(param.pipeline_submesh()),
                       concat(where, ": pipeline_submesh"));
    if (param.pipeline_owner() < 0 || param.pipeline_owner() >= size)
      fail(where, ": pipeline_owner ", param.pipeline_owner(),
           " is not a rank of its ", size, "-rank group");
  }
  if (uint32_t parts = sizeOf(param.parts())) {
    // The whole tensor's dim 0 is the count of parts.
    const auto *full =
        param.sharding() ? param.sharding()->full_shape() : param.shape();
    if (param.state())
      fail(where, ": training state has no checkpoint parts");
    if (sizeOf(full) == 0 || full->Get(0) != static_cast<int64_t>(parts))
      fail(where, ": ", parts,
           " parts must be the slices along dim 0 of the whole tensor");
  }
}

/// CUDA's limit on the threads of one block, on every architecture so far.
constexpr uint64_t kMaxThreadsPerBlock = 1024;

/// Returns the product of the dimensions, saturated at UINT64_MAX (three
/// 32-bit factors can exceed 64 bits).
uint64_t checkLaunchDims(const flatbuffers::Vector<uint32_t> *dims,
                         const char *name, const std::string &where) {
  if (sizeOf(dims) < 1 || sizeOf(dims) > 3)
    fail(where, ": ", name, " has ", sizeOf(dims),
         " dimensions, expected 1 to 3");
  uint64_t product = 1;
  for (uint32_t i = 0; i < dims->size(); ++i) {
    if (dims->Get(i) == 0)
      fail(where, ": ", name, " dimension ", i, " is 0");
    if (__builtin_mul_overflow(product, dims->Get(i), &product))
      product = UINT64_MAX;
  }
  return product;
}

/// The most workgroups of one CPU dispatch (its grid is one-dimensional).
constexpr uint64_t kMaxCpuWorkgroups = UINT32_MAX;

void verifyDispatch(const fb::Dispatch &dispatch, const fb::Kernel &kernel,
                    const fb::KernelCode &code, bool cuda,
                    const std::string &where) {
  if (toString(dispatch.entry()).empty())
    fail(where, ": the entry name is empty");
  checkPrintableName(toString(dispatch.entry()), concat(where, ": the entry"));
  uint64_t workgroups = checkLaunchDims(dispatch.grid(), "grid", where);
  if (cuda) {
    uint64_t threads = checkLaunchDims(dispatch.block(), "block", where);
    if (threads > kMaxThreadsPerBlock)
      fail(where, ": block of ", threads, " threads exceeds the CUDA limit of ",
           kMaxThreadsPerBlock);
  } else if (sizeOf(dispatch.grid()) != 1 || workgroups > kMaxCpuWorkgroups) {
    fail(where, ": a CPU grid has one dimension of at most ", kMaxCpuWorkgroups,
         " workgroups");
  }
  // FlatBuffers' verifier checks a vector's length field, not that its
  // 8-byte structs are aligned for reading (found by the artifact fuzzer).
  if (sizeOf(dispatch.args()) &&
      reinterpret_cast<uintptr_t>(dispatch.args()->Data()) %
              alignof(fb::DispatchArg) !=
          0)
    fail(where, ": the argument list is misaligned (a damaged artifact)");
  for (uint32_t i = 0; i < sizeOf(dispatch.args()); ++i) {
    const fb::DispatchArg *arg = dispatch.args()->Get(i);
    if (!arg->scratch() && arg->value() >= kernel.num_args())
      fail(where, ": argument ", i, " refers to kernel argument ", arg->value(),
           ", but the kernel takes ", kernel.num_args());
    if (arg->scratch() && arg->value() >= code.scratch_bytes())
      fail(where, ": argument ", i, " points at scratch byte ", arg->value(),
           ", outside the kernel's ", code.scratch_bytes(), " scratch bytes");
  }
}

/// A kernel has code for each target the program has a module for.
void verifyKernel(const fb::Kernel &kernel, bool hasCpuModule,
                  bool hasCudaModule, const std::string &where) {
  const fb::KernelCode *codes[] = {kernel.cpu(), kernel.cuda()};
  const bool needed[] = {hasCpuModule, hasCudaModule};
  const char *targets[] = {"CPU", "CUDA"};
  for (int target = 0; target < 2; ++target) {
    const fb::KernelCode *code = codes[target];
    uint32_t numDispatches = code ? sizeOf(code->dispatches()) : 0;
    if (needed[target] && numDispatches == 0)
      fail(where, ": the program has a ", targets[target],
           " module, but the kernel has no ", targets[target], " dispatches");
    for (uint32_t i = 0; i < numDispatches; ++i)
      verifyDispatch(*code->dispatches()->Get(i), kernel, *code, target == 1,
                     concat(where, ", ", targets[target], " dispatch ", i));
  }
}

} // namespace

void verifyProgramSemantics(const fb::Program &program) {
  MeshVerifier mesh(program);
  std::set<std::string> names;
  for (uint32_t i = 0; i < sizeOf(program.parameters()); ++i) {
    const fb::Parameter *param = program.parameters()->Get(i);
    checkUniqueName(names, toString(param->name()), concat("parameter ", i));
    verifyParameter(*param, mesh,
                    concat("parameter '", param->name()->str(), "'"));
  }
  // Aliases are checkpoint names too: unique among names and aliases.
  for (uint32_t i = 0; i < sizeOf(program.parameters()); ++i) {
    const fb::Parameter *param = program.parameters()->Get(i);
    for (uint32_t j = 0; j < sizeOf(param->aliases()); ++j)
      checkUniqueName(
          names, toString(param->aliases()->Get(j)),
          concat("alias ", j, " of parameter '", param->name()->str(), "'"));
    for (uint32_t j = 0; j < sizeOf(param->parts()); ++j)
      checkUniqueName(
          names, toString(param->parts()->Get(j)),
          concat("part ", j, " of parameter '", param->name()->str(), "'"));
  }
  for (uint32_t i = 0; i < sizeOf(program.parameters()); ++i)
    verifyCopySource(program, *program.parameters()->Get(i));
  if (const fb::LrSchedule *schedule = program.lr_schedule())
    verifyLrSchedule(program, *schedule);
  if (const fb::PipelineSchedule *pipeline = program.pipeline())
    if (pipeline->ranks() < 1 || pipeline->chunks() < 1 ||
        pipeline->micro_batches() < 1 || !pipeline->kind())
      fail("pipeline: needs a kind and positive ranks, chunks and "
           "micro_batches (has ",
           pipeline->ranks(), ", ", pipeline->chunks(), ", ",
           pipeline->micro_batches(), ")");

  names.clear();
  for (uint32_t i = 0; i < sizeOf(program.kernels()); ++i) {
    const fb::Kernel *kernel = program.kernels()->Get(i);
    checkUniqueName(names, toString(kernel->name()), concat("kernel ", i));
    verifyKernel(*kernel, program.cpu() != nullptr, program.cuda() != nullptr,
                 concat("kernel '", kernel->name()->str(), "'"));
  }

  names.clear();
  // A pipeline's entries share their name, one per rank of its group.
  std::set<std::pair<std::string, int32_t>> stageNames;
  for (uint32_t i = 0; i < sizeOf(program.entries()); ++i) {
    const fb::Entry *entry = program.entries()->Get(i);
    if (entry->stage_submesh() >= 0 || entry->pipeline_rank() >= 0) {
      std::string what =
          concat("entry ", i, " '", toString(entry->name()), "'");
      if (entry->stage_submesh() < 0)
        fail(what, ": a pipeline_rank needs a stage_submesh");
      int64_t size =
          mesh.groupSize(static_cast<uint64_t>(entry->stage_submesh()),
                         concat(what, ": stage_submesh"));
      if (entry->pipeline_rank() < 0 || entry->pipeline_rank() >= size)
        fail(what, ": pipeline_rank ", entry->pipeline_rank(),
             " is not a rank of its ", size, "-rank group");
      std::set<std::string> own;
      checkUniqueName(own, toString(entry->name()), what);
      if (!stageNames.insert({toString(entry->name()), entry->pipeline_rank()})
               .second)
        fail(what, ": pipeline rank ", entry->pipeline_rank(),
             " has two programs of this entry");
      names.insert(toString(entry->name()));
      continue;
    }
    checkUniqueName(names, toString(entry->name()), concat("entry ", i));
    verifyEntry(program, *entry, mesh,
                concat("entry '", entry->name()->str(), "'"));
  }
}

} // namespace megrt
