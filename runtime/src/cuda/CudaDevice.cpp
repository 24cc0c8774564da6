// A CUDA device: entries run on a GPU, with the parameters mirrored in
// device memory.
#include "cuda/CudaDevice.h"

#include "AttentionCommand.h"
#include "Fail.h"
#include "FbTypes.h"
#include "MeshLayout.h"
#include "cuda/CudaDriver.h"

#include <algorithm>
#include <iostream>

namespace megrt {
namespace {

/// Calls `visit` with every command of every entry.
template <typename Visit>
void forEachCommand(const fb::Program &program, Visit visit) {
  for (uint32_t i = 0; i < sizeOf(program.entries()); ++i) {
    const fb::Entry &entry = *program.entries()->Get(i);
    for (uint32_t j = 0; j < sizeOf(entry.commands()); ++j)
      visit(*entry.commands()->Get(j));
  }
}

/// Whether any entry has a command of one of `types`.
bool hasCommand(const fb::Program &program,
                std::initializer_list<fb::CommandOp> types) {
  bool any = false;
  forEachCommand(program, [&](const fb::Command &command) {
    for (fb::CommandOp type : types)
      any = any || command.op_type() == type;
  });
  return any;
}

/// Calls `visit` with every attention command of every entry.
template <typename Visit>
void forEachAttention(const fb::Program &program, Visit visit) {
  forEachCommand(program, [&](const fb::Command &command) {
    if (std::optional<AttentionOperands> a = attentionOperands(command))
      visit(*a);
  });
}

/// Whether an attention command could run through cuDNN: one of the
/// dtypes it serves, on a device it serves.
bool hasCudnnAttention(const fb::Program &program, int computeMajor) {
  bool any = false;
  forEachAttention(program, [&](const AttentionOperands &a) {
    any = any || cudnnAttentionRefusal(a.shape, computeMajor).empty();
  });
  return any;
}

uint64_t scratchBytes(const fb::Program &program) {
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < sizeOf(program.kernels()); ++i)
    if (const fb::KernelCode *code = program.kernels()->Get(i)->cuda())
      bytes = std::max(bytes, code->scratch_bytes());
  return bytes;
}

} // namespace

CudaDevice::CudaDevice(const Program &program, int ordinal,
                       std::vector<Tensor> &parameters,
                       const DeviceOptions &options)
    : program_(program), parameters_(parameters), context_(ordinal),
      module_(flatbufferOf(program), context_),
      newer_(parameters.size(), Newer::Host),
      scratch_(scratchBytes(flatbufferOf(program)),
               concat("the CUDA kernels' scratch on ", context_.description())),
      options_(options) {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    parameterMemory_.emplace_back(
        parameters_[i].sizeBytes(),
        concat(parameterName(i), " on ", context_.description()));
    parameterAddresses_.push_back(parameterMemory_.back().get());
  }
  if (hasCommand(flatbufferOf(program), {fb::CommandOp::Gemm}))
    cublas_ = std::make_unique<CublasLtContext>(context_.description());
  if (hasCommand(flatbufferOf(program),
                 {fb::CommandOp::Attention, fb::CommandOp::AttentionGrad}))
    attention_ = std::make_unique<CudaAttention>(context_);
  library_ = std::make_unique<CudaLibrary>(flatbufferOf(program), context_);
  openCudnn();
  if (options_.trace)
    traceOrigin_ = std::make_unique<CudaEvent>(
        concat("the trace's origin on ", context_.description()));
  entries_.resize(program.entries().size());
  if (options_.world) {
    // NCCL creates its communicators on the current device.
    context_.makeCurrent();
    groups_ = connectGroups(program, *options_.world, comm::MemorySpace::Cuda);
  }
}

CudaDevice::~CudaDevice() {
  // The members' destructors free device memory and unload the module: they
  // need the context current and the stream idle.
  context_.makeCurrentQuietly();
  context_.synchronizeQuietly();
}

void CudaDevice::openCudnn() {
  if (!hasCudnnAttention(flatbufferOf(program_), context_.computeMajor())) {
    cudnnUnavailable_ = "no command of this program could use cuDNN";
    return;
  }
  const CudnnLibraryStatus &library = cudnnLibrary();
  if (library.loaded) {
    try {
      cudnn_ = std::make_unique<CudnnAttention>(context_);
      report(concat("attention through ", library.description));
      // Every shape's plans are built as the session loads, not in the
      // first run of each entry.
      forEachAttention(flatbufferOf(program_), [&](const AttentionOperands &a) {
        if (cudnnAttentionRefusal(a.shape, context_.computeMajor()).empty())
          cudnn_->prepare(a.shape, a.backward, a.stats >= 0);
      });
      return;
    } catch (const Error &error) {
      cudnnUnavailable_ = error.what();
    }
  } else {
    cudnnUnavailable_ = library.description;
  }
  // The one line saying why, however many commands it concerns.
  report(concat("cuDNN is not available (", cudnnUnavailable_,
                "); attention runs on megrt's own kernels"));
  cudnnUnavailable_ = "cuDNN is not available";
}

void CudaDevice::report(const std::string &line) {
  if (reported_.insert(line).second)
    std::cerr << "megrt: " << context_.description() << ": " << line << "\n";
}

std::string CudaDevice::parameterName(size_t index) const {
  return concat("parameter '", program_.parameters()[index].name, "'");
}

void CudaDevice::parameterWritten(size_t index) { newer_[index] = Newer::Host; }

void CudaDevice::parameterRead(size_t index) {
  if (newer_[index] != Newer::Device)
    return;
  Tensor &host = parameters_[index];
  if (host.sizeBytes() > 0) {
    context_.makeCurrent();
    std::string what =
        concat(parameterName(index), ", copied from ", context_.description());
    checkCuda(
        cudaDriver().cuMemcpyDtoHAsync(host.data(), parameterAddresses_[index],
                                       host.sizeBytes(), context_.stream()),
        "cuMemcpyDtoHAsync", what);
    context_.synchronize(what);
  }
  newer_[index] = Newer::Neither;
}

void CudaDevice::uploadParameters() {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (newer_[i] != Newer::Host)
      continue;
    const Tensor &host = parameters_[i];
    if (host.sizeBytes() > 0)
      checkCuda(
          cudaDriver().cuMemcpyHtoDAsync(parameterAddresses_[i], host.data(),
                                         host.sizeBytes(), context_.stream()),
          "cuMemcpyHtoDAsync",
          concat(parameterName(i), ", copied to ", context_.description()));
    newer_[i] = Newer::Neither;
  }
}

CudaEntry &CudaDevice::prepare(size_t index) {
  std::unique_ptr<CudaEntry> &entry = entries_[index];
  if (!entry) {
    const fb::Program &program = flatbufferOf(program_);
    entry = std::make_unique<CudaEntry>(
        *program.entries()->Get(static_cast<uint32_t>(index)),
        concat("entry '", program_.entries()[index].name, "'"),
        CudaEntryResources{
            program, module_, parameterAddresses_, scratch_.get(),
            cublas_.get(), attention_.get(), *library_, cudnn_.get(),
            cudnnUnavailable_, context_.computeMajor(),
            [this](const std::string &line) { report(line); }, groups_},
        options_);
  }
  return *entry;
}

void CudaDevice::run(size_t index, const std::vector<const Tensor *> &inputs,
                     std::vector<Tensor> &outputs) {
  context_.makeCurrent();
  const EntrySpec &spec = program_.entries()[index];
  std::string where =
      concat("entry '", spec.name, "' on ", context_.description());
  const CudaDriver &driver = cudaDriver();
  CUstream stream = context_.stream();
  CudaEntry &entry = prepare(index);
  prepareOutputs(spec.outputs, outputs);
  try {
    uploadParameters();
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i]->sizeBytes() > 0)
        checkCuda(driver.cuMemcpyHtoDAsync(entry.inputs()[i].get(),
                                           inputs[i]->data(),
                                           inputs[i]->sizeBytes(), stream),
                  "cuMemcpyHtoDAsync",
                  concat(where, ": input '", spec.inputs[i].name, "'"));
    // Outputs start from zero on every run, so a result never depends on a
    // previous call.
    for (size_t i = 0; i < entry.outputs().size(); ++i)
      if (entry.outputs()[i].size() > 0)
        checkCuda(driver.cuMemsetD8Async(entry.outputs()[i].get(), 0,
                                         entry.outputs()[i].size(), stream),
                  "cuMemsetD8Async",
                  concat(where, ": output '", spec.outputs[i].name, "'"));
    // From here on the device holds what the entry may have written, even
    // if a command fails part way.
    for (uint32_t parameter : entry.parametersUsed())
      newer_[parameter] = Newer::Device;
    if (traceOrigin_ && !traceOriginRecorded_) {
      traceOrigin_->record(stream, concat(where, ": the trace's origin"));
      traceOriginRecorded_ = true;
    }
    entry.execute(stream);
    // Faults of the commands, which run asynchronously, surface here.
    context_.synchronize(concat(where, ": running its commands"));
    if (options_.trace)
      entry.collectTrace(*options_.trace, *traceOrigin_);

    for (size_t i = 0; i < spec.outputs.size(); ++i) {
      Tensor &output = outputs[i];
      if (output.sizeBytes() > 0)
        checkCuda(driver.cuMemcpyDtoHAsync(output.data(),
                                           entry.outputs()[i].get(),
                                           output.sizeBytes(), stream),
                  "cuMemcpyDtoHAsync",
                  concat(where, ": output '", spec.outputs[i].name, "'"));
    }
    context_.synchronize(concat(where, ": copying its outputs"));
  } catch (...) {
    // Leave no copy in flight into or out of host memory that is about to
    // be released.
    context_.synchronizeQuietly();
    throw;
  }
}

} // namespace megrt
