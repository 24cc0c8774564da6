// Executes the entries of a program on a device, owning its parameters.
#include "megrt/Session.h"

#include "Device.h"
#include "Fail.h"
#include "ParameterInit.h"
#include "Trace.h"
#include "megrt/Safetensors.h"

#include <cstring>
#include <iostream>
#include <optional>

namespace megrt {
namespace {

std::string joinNames(const std::vector<std::string> &names) {
  if (names.empty())
    return "(none)";
  std::string text;
  for (const std::string &name : names)
    text += (text.empty() ? "" : ", ") + name;
  return text;
}

template <typename Specs> std::string joinSpecNames(const Specs &specs) {
  std::vector<std::string> names;
  for (const auto &spec : specs)
    names.push_back(spec.name);
  return joinNames(names);
}

/// `what` must have `spec`'s dtype and shape.
void checkTensorMatches(const Tensor &tensor, DType dtype, const Shape &shape,
                        const std::string &what) {
  if (tensor.dtype() != dtype)
    fail(what, " has dtype ", dtypeName(tensor.dtype()), ", expected ",
         dtypeName(dtype));
  if (tensor.shape() != shape)
    fail(what, " has shape ", formatShape(tensor.shape()), ", expected ",
         formatShape(shape));
}

} // namespace

struct Session::Impl {
  Impl(Program program, SessionOptions options)
      : program(std::move(program)), options(std::move(options)) {
    if (!this->options.traceFile.empty())
      trace = std::make_unique<Trace>();
  }

  ~Impl() {
    // Nothing ran in a Session whose device could not be created, and a
    // writeTrace() after the last event already reported its outcome.
    if (!trace || !device || eventsAtLastWrite == trace->numEvents())
      return;
    // A destructor cannot throw, and a lost trace must not go unnoticed.
    try {
      trace->write(options.traceFile);
    } catch (const std::exception &error) {
      std::cerr << "megrt: the trace was not written: " << error.what() << "\n";
    }
  }

  const ParameterSpec &parameterSpec(std::string_view name,
                                     size_t &index) const {
    std::optional<size_t> found = program.findParameter(name);
    if (!found)
      fail("unknown parameter '", name, "'");
    index = *found;
    return program.parameters()[index];
  }

  /// Every write of a host parameter goes through here, so that the device
  /// can mirror it.
  void write(size_t index, const void *data) {
    std::memcpy(parameters[index].data(), data, parameters[index].sizeBytes());
    device->parameterWritten(index);
  }

  const Tensor &read(size_t index) const {
    device->parameterRead(index);
    return parameters[index];
  }

  /// Re-derives the copies (master weights) of `source`, or of every
  /// parameter when it is not given, from the current weights.
  void refreshCopies(std::optional<size_t> source = std::nullopt) {
    const std::vector<ParameterSpec> &specs = program.parameters();
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].initKind != InitKind::Copy)
        continue;
      size_t from = *program.findParameter(specs[i].initSource);
      if (source && from != *source)
        continue;
      copyParameter(parameters[i], read(from));
      device->parameterWritten(i);
    }
  }

  Program program;
  SessionOptions options;
  // Declared before the device, which adds to it, so that it outlives it.
  std::unique_ptr<Trace> trace;
  /// How many events the trace held when writeTrace() last tried to write.
  std::optional<size_t> eventsAtLastWrite;
  // Sized once: devices hold pointers into these tensors, so they are only
  // ever written in place.
  std::vector<Tensor> parameters;
  std::unique_ptr<Device> device;
};

Session::Session(Program program, SessionOptions options)
    : impl_(std::make_unique<Impl>(std::move(program), std::move(options))) {
  for (const ParameterSpec &spec : impl_->program.parameters())
    impl_->parameters.emplace_back(spec.dtype, spec.shape);
  impl_->device =
      createDevice(impl_->options.device, impl_->program, impl_->parameters,
                   {impl_->options.cudaGraphs, impl_->trace.get()});
  initParameters(impl_->options.seed);
}

Session::~Session() = default;
Session::Session(Session &&) noexcept = default;
Session &Session::operator=(Session &&) noexcept = default;

const Program &Session::program() const { return impl_->program; }

void Session::initParameters(uint64_t seed) {
  const std::vector<ParameterSpec> &specs = impl_->program.parameters();
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].initKind == InitKind::Copy)
      continue;
    initializeParameter(impl_->parameters[i], specs[i], seed);
    impl_->device->parameterWritten(i);
  }
  impl_->refreshCopies();
}

void Session::loadParameters(const std::string &path, bool allowExtra) {
  load(path, allowExtra, /*withState=*/false);
}

void Session::loadState(const std::string &path) {
  load(path, /*allowExtra=*/false, /*withState=*/true);
}

void Session::load(const std::string &path, bool allowExtra, bool withState) {
  std::map<std::string, Tensor> tensors = readSafetensors(path);
  const std::vector<ParameterSpec> &specs = impl_->program.parameters();
  auto wanted = [&](const ParameterSpec &spec) {
    return withState || !spec.state;
  };
  // Check everything before writing anything, so that a bad file leaves the
  // parameters as they were.
  for (const ParameterSpec &spec : specs) {
    if (!wanted(spec))
      continue;
    auto found = tensors.find(spec.name);
    if (found == tensors.end())
      fail("'", path, "': missing parameter '", spec.name, "' (expected ",
           formatType(spec.dtype, spec.shape), ")");
    checkTensorMatches(found->second, spec.dtype, spec.shape,
                       concat("'", path, "': parameter '", spec.name, "'"));
  }
  if (!allowExtra)
    for (const auto &[name, tensor] : tensors)
      if (!impl_->program.findParameter(name))
        fail("'", path, "': tensor '", name,
             "' is not a parameter of the program (pass allowExtra to "
             "ignore it)");
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!wanted(specs[i]))
      continue;
    impl_->write(i, tensors.at(specs[i].name).data());
  }
  // Master weights follow newly loaded weights; a full state brings its own.
  if (!withState)
    impl_->refreshCopies();
}

void Session::saveParameters(const std::string &path) const {
  save(path, /*withState=*/false);
}

void Session::saveState(const std::string &path) const {
  save(path, /*withState=*/true);
}

void Session::save(const std::string &path, bool withState) const {
  std::map<std::string, Tensor> tensors;
  const std::vector<ParameterSpec> &specs = impl_->program.parameters();
  for (size_t i = 0; i < specs.size(); ++i)
    if (withState || !specs[i].state)
      tensors.emplace(specs[i].name, impl_->read(i));
  writeSafetensors(path, tensors);
}

const Tensor &Session::parameter(std::string_view name) const {
  size_t index;
  impl_->parameterSpec(name, index);
  return impl_->read(index);
}

void Session::setParameter(std::string_view name, const Tensor &value) {
  size_t index;
  const ParameterSpec &spec = impl_->parameterSpec(name, index);
  checkTensorMatches(value, spec.dtype, spec.shape,
                     concat("value for parameter '", name, "'"));
  impl_->write(index, value.data());
  impl_->refreshCopies(index);
}

std::map<std::string, Tensor>
Session::run(std::string_view entryName,
             const std::map<std::string, Tensor> &inputs) {
  const Program &program = impl_->program;
  const EntrySpec *spec = program.findEntry(entryName);
  if (!spec)
    fail("unknown entry '", entryName,
         "'; the program has entries: ", joinSpecNames(program.entries()));
  std::string where = concat("entry '", spec->name, "'");
  for (const TensorSpec &input : spec->inputs) {
    auto found = inputs.find(input.name);
    if (found == inputs.end())
      fail(where, ": missing input '", input.name, "' (expected ",
           formatType(input.dtype, input.shape), ")");
    checkTensorMatches(found->second, input.dtype, input.shape,
                       concat(where, ": input '", input.name, "'"));
  }
  for (const auto &[name, tensor] : inputs) {
    bool known = false;
    for (const TensorSpec &input : spec->inputs)
      known |= input.name == name;
    if (!known)
      fail(where, ": unexpected input '", name,
           "'; expected inputs: ", joinSpecNames(spec->inputs));
  }

  std::vector<const Tensor *> ordered;
  for (const TensorSpec &input : spec->inputs)
    ordered.push_back(&inputs.at(input.name));
  std::vector<Tensor> outputs =
      impl_->device->run(spec - program.entries().data(), ordered);

  std::map<std::string, Tensor> results;
  for (size_t i = 0; i < spec->outputs.size(); ++i)
    results.emplace(spec->outputs[i].name, std::move(outputs[i]));
  return results;
}

void Session::writeTrace() {
  if (!impl_->trace)
    fail("writeTrace: tracing is off (set SessionOptions::traceFile)");
  impl_->eventsAtLastWrite = impl_->trace->numEvents();
  impl_->trace->write(impl_->options.traceFile);
}

} // namespace megrt
