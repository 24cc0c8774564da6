// The C API (megrt_c.h) over the C++ API: handles own the C++ objects, and
// every exception becomes a status and the thread's last error.
#include "megrt/megrt_c.h"

#include "megrt/Error.h"
#include "megrt/Program.h"
#include "megrt/Session.h"
#include "megrt/Tensor.h"

#include <algorithm>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

struct megrt_program {
  megrt::Program program;
};

struct megrt_session {
  megrt::Session session;
};

struct megrt_outputs {
  std::map<std::string, megrt::Tensor> tensors;
  /// The entries of `tensors` by index, for megrt_outputs_get.
  std::vector<const std::pair<const std::string, megrt::Tensor> *> byIndex;
};

namespace {

thread_local std::string lastError;

/// A caller's mistake that C++ cannot catch at compile time: a null
/// pointer, a dtype outside the enum.
class InvalidArgument : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

megrt_status fail(megrt_status status, std::string message) {
  lastError = std::move(message);
  return status;
}

/// Runs `body`, turning what it throws into a status and the last error.
template <typename Body> megrt_status guarded(Body body) {
  try {
    body();
    return MEGRT_OK;
  } catch (const InvalidArgument &e) {
    return fail(MEGRT_INVALID_ARGUMENT, e.what());
  } catch (const megrt::Error &e) {
    return fail(MEGRT_RUNTIME_ERROR, e.what());
  } catch (const std::bad_alloc &) {
    return fail(MEGRT_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception &e) {
    return fail(MEGRT_INTERNAL_ERROR, e.what());
  } catch (...) {
    return fail(MEGRT_INTERNAL_ERROR, "unknown exception");
  }
}

/// Throws InvalidArgument naming `function`'s null `argument`.
template <typename T>
T *require(T *pointer, const char *function, const char *argument) {
  if (!pointer)
    throw InvalidArgument(std::string(function) + ": " + argument + " is NULL");
  return pointer;
}

const megrt::EntrySpec &findEntry(const megrt::Program &program,
                                  const char *name) {
  if (const megrt::EntrySpec *entry = program.findEntry(name))
    return *entry;
  std::string names;
  for (const megrt::EntrySpec &entry : program.entries())
    names += (names.empty() ? "" : ", ") + entry.name;
  throw megrt::Error(std::string("unknown entry '") + name +
                     "'; the program has entries: " + names);
}

/// Points `out` at `spec` (data NULL).
void describe(const megrt::TensorSpec &spec, megrt_tensor *out) {
  out->name = spec.name.c_str();
  out->dtype = static_cast<megrt_dtype>(spec.dtype);
  out->rank = spec.shape.size();
  out->shape = spec.shape.data();
  out->data = nullptr;
  out->size_bytes = megrt::byteSize(spec.dtype, spec.shape, spec.name);
}

/// A copy of the caller's tensor; `what` names it in errors.
megrt::Tensor toTensor(const megrt_tensor &tensor, const std::string &what) {
  if (tensor.dtype < MEGRT_F32 || tensor.dtype > MEGRT_I64)
    throw InvalidArgument(what + ": dtype " + std::to_string(tensor.dtype) +
                          " is not a megrt_dtype");
  if (tensor.rank > 0 && !tensor.shape)
    throw InvalidArgument(what + ": shape is NULL with rank " +
                          std::to_string(tensor.rank));
  if (tensor.size_bytes > 0 && !tensor.data)
    throw InvalidArgument(what + ": data is NULL");
  megrt::Shape shape(tensor.shape, tensor.shape + tensor.rank);
  return megrt::Tensor::fromBytes(static_cast<megrt::DType>(tensor.dtype),
                                  std::move(shape), tensor.data,
                                  tensor.size_bytes);
}

void view(const std::pair<const std::string, megrt::Tensor> &output,
          megrt_tensor *out) {
  const megrt::Tensor &tensor = output.second;
  out->name = output.first.c_str();
  out->dtype = static_cast<megrt_dtype>(tensor.dtype());
  out->rank = tensor.shape().size();
  out->shape = tensor.shape().data();
  out->data = tensor.data();
  out->size_bytes = tensor.sizeBytes();
}

megrt_status entryTensor(const megrt_program *program, const char *entry,
                         size_t index, bool output, megrt_tensor *spec) {
  return guarded([&] {
    const char *function =
        output ? "megrt_program_entry_output" : "megrt_program_entry_input";
    const megrt::EntrySpec &found =
        findEntry(require(program, function, "program")->program,
                  require(entry, function, "entry"));
    const std::vector<megrt::TensorSpec> &tensors =
        output ? found.outputs : found.inputs;
    if (index >= tensors.size())
      throw megrt::Error("entry '" + found.name + "' has " +
                         std::to_string(tensors.size()) +
                         (output ? " outputs" : " inputs") + ", asked for " +
                         std::to_string(index));
    describe(tensors[index], require(spec, function, "spec"));
  });
}

} // namespace

extern "C" {

const char *megrt_last_error(void) { return lastError.c_str(); }

megrt_status megrt_program_load(const char *path, megrt_program **program) {
  return guarded([&] {
    require(program, "megrt_program_load", "program");
    *program = new megrt_program{
        megrt::Program::load(require(path, "megrt_program_load", "path"))};
  });
}

megrt_status megrt_program_from_bytes(const void *data, size_t size,
                                      megrt_program **program) {
  return guarded([&] {
    require(program, "megrt_program_from_bytes", "program");
    require(data, "megrt_program_from_bytes", "data");
    *program = new megrt_program{megrt::Program::fromBytes(data, size)};
  });
}

void megrt_program_destroy(megrt_program *program) { delete program; }

size_t megrt_program_entry_count(const megrt_program *program) {
  return program ? program->program.entries().size() : 0;
}

const char *megrt_program_entry_name(const megrt_program *program,
                                     size_t index) {
  if (!program || index >= program->program.entries().size())
    return nullptr;
  return program->program.entries()[index].name.c_str();
}

megrt_status megrt_program_entry_arity(const megrt_program *program,
                                       const char *entry, size_t *num_inputs,
                                       size_t *num_outputs) {
  return guarded([&] {
    const char *function = "megrt_program_entry_arity";
    const megrt::EntrySpec &spec =
        findEntry(require(program, function, "program")->program,
                  require(entry, function, "entry"));
    *require(num_inputs, function, "num_inputs") = spec.inputs.size();
    *require(num_outputs, function, "num_outputs") = spec.outputs.size();
  });
}

megrt_status megrt_program_entry_input(const megrt_program *program,
                                       const char *entry, size_t index,
                                       megrt_tensor *spec) {
  return entryTensor(program, entry, index, /*output=*/false, spec);
}

megrt_status megrt_program_entry_output(const megrt_program *program,
                                        const char *entry, size_t index,
                                        megrt_tensor *spec) {
  return entryTensor(program, entry, index, /*output=*/true, spec);
}

namespace {
/// The options of the session-creating calls, checked as `function`'s.
megrt::SessionOptions sessionOptions(const char *function, const char *device,
                                     uint64_t seed, int cudaGraphs,
                                     const char *trace, unsigned threads) {
  megrt::SessionOptions options;
  options.device = require(device, function, "device");
  options.seed = seed;
  options.cudaGraphs = cudaGraphs != 0;
  options.traceFile = trace ? trace : "";
  options.threads = threads;
  return options;
}
} // namespace

megrt_status megrt_session_create_with_options(const megrt_program *program,
                                               const char *device,
                                               uint64_t seed, int cuda_graphs,
                                               const char *trace,
                                               unsigned threads,
                                               megrt_session **session) {
  return guarded([&] {
    const char *function = "megrt_session_create";
    require(session, function, "session");
    megrt::SessionOptions options =
        sessionOptions(function, device, seed, cuda_graphs, trace, threads);
    *session = new megrt_session{megrt::Session(
        require(program, function, "program")->program, options)};
  });
}

megrt_status megrt_session_create_from_checkpoint(
    const megrt_program *program, const char *device, uint64_t seed,
    int cuda_graphs, const char *trace, unsigned threads,
    const char *checkpoint, int allow_extra, megrt_session **session) {
  return guarded([&] {
    const char *function = "megrt_session_create_from_checkpoint";
    require(session, function, "session");
    const char *path = require(checkpoint, function, "checkpoint");
    megrt::SessionOptions options =
        sessionOptions(function, device, seed, cuda_graphs, trace, threads);
    options.initializeWeights = false;
    auto created = std::make_unique<megrt_session>(megrt_session{megrt::Session(
        require(program, function, "program")->program, options)});
    created->session.loadParameters(path, allow_extra != 0);
    *session = created.release();
  });
}

megrt_status megrt_session_create(const megrt_program *program,
                                  const char *device, uint64_t seed,
                                  megrt_session **session) {
  return megrt_session_create_with_options(program, device, seed, 1, nullptr, 0,
                                           session);
}

megrt_status megrt_session_write_trace(megrt_session *session) {
  return guarded([&] {
    require(session, "megrt_session_write_trace", "session")
        ->session.writeTrace();
  });
}

megrt_status megrt_session_clear_trace(megrt_session *session) {
  return guarded([&] {
    require(session, "megrt_session_clear_trace", "session")
        ->session.clearTrace();
  });
}

void megrt_session_destroy(megrt_session *session) { delete session; }

int megrt_session_rank(const megrt_session *session) {
  return session ? session->session.rank() : -1;
}

int megrt_session_world_size(const megrt_session *session) {
  return session ? session->session.worldSize() : -1;
}

megrt_status megrt_session_init_parameters(megrt_session *session,
                                           uint64_t seed) {
  return guarded([&] {
    require(session, "megrt_session_init_parameters", "session")
        ->session.initParameters(seed);
  });
}

megrt_status megrt_session_load_parameters(megrt_session *session,
                                           const char *path, int allow_extra) {
  return guarded([&] {
    const char *function = "megrt_session_load_parameters";
    require(session, function, "session")
        ->session.loadParameters(require(path, function, "path"),
                                 allow_extra != 0);
  });
}

megrt_status megrt_session_save_parameters(megrt_session *session,
                                           const char *path) {
  return guarded([&] {
    const char *function = "megrt_session_save_parameters";
    require(session, function, "session")
        ->session.saveParameters(require(path, function, "path"));
  });
}

megrt_status megrt_session_load_state(megrt_session *session,
                                      const char *path) {
  return guarded([&] {
    const char *function = "megrt_session_load_state";
    require(session, function, "session")
        ->session.loadState(require(path, function, "path"));
  });
}

megrt_status megrt_session_save_state(megrt_session *session,
                                      const char *path) {
  return guarded([&] {
    const char *function = "megrt_session_save_state";
    require(session, function, "session")
        ->session.saveState(require(path, function, "path"));
  });
}

megrt_status megrt_session_start_save_state(megrt_session *session,
                                            const char *path) {
  return guarded([&] {
    const char *function = "megrt_session_start_save_state";
    require(session, function, "session")
        ->session.startSaveState(require(path, function, "path"));
  });
}

megrt_status megrt_session_finish_save(megrt_session *session) {
  return guarded([&] {
    require(session, "megrt_session_finish_save", "session")
        ->session.finishSave();
  });
}

megrt_status megrt_session_read_parameter(megrt_session *session,
                                          const char *name, void *buffer,
                                          size_t size_bytes) {
  return guarded([&] {
    const char *function = "megrt_session_read_parameter";
    const megrt::Tensor &value =
        require(session, function, "session")
            ->session.parameter(require(name, function, "name"));
    if (size_bytes != value.sizeBytes())
      throw megrt::Error(std::string("parameter '") + name + "' (" +
                         megrt::formatType(value.dtype(), value.shape()) +
                         ") has " + std::to_string(value.sizeBytes()) +
                         " bytes, the buffer " + std::to_string(size_bytes));
    std::copy(value.data(), value.data() + size_bytes,
              static_cast<uint8_t *>(require(buffer, function, "buffer")));
  });
}

megrt_status megrt_session_write_parameter(megrt_session *session,
                                           const char *name,
                                           const megrt_tensor *value) {
  return guarded([&] {
    const char *function = "megrt_session_write_parameter";
    require(session, function, "session");
    require(name, function, "name");
    megrt::Tensor tensor = toTensor(*require(value, function, "value"),
                                    std::string("parameter '") + name + "'");
    session->session.setParameter(name, tensor);
  });
}

megrt_status megrt_session_run(megrt_session *session, const char *entry,
                               const megrt_tensor *inputs, size_t num_inputs,
                               megrt_outputs **outputs) {
  return guarded([&] {
    const char *function = "megrt_session_run";
    require(session, function, "session");
    require(entry, function, "entry");
    require(outputs, function, "outputs");
    if (num_inputs > 0)
      require(inputs, function, "inputs");
    std::map<std::string, megrt::Tensor> tensors;
    for (size_t i = 0; i < num_inputs; ++i) {
      std::string what = "input " + std::to_string(i);
      const char *name = inputs[i].name;
      if (!name)
        throw InvalidArgument(std::string(function) + ": " + what +
                              " has a NULL name");
      tensors[name] = toTensor(inputs[i], what + " ('" + name + "')");
    }
    auto result = std::make_unique<megrt_outputs>();
    result->tensors = session->session.run(entry, tensors);
    for (const auto &output : result->tensors)
      result->byIndex.push_back(&output);
    *outputs = result.release();
  });
}

size_t megrt_outputs_count(const megrt_outputs *outputs) {
  return outputs ? outputs->byIndex.size() : 0;
}

megrt_status megrt_outputs_get(const megrt_outputs *outputs, size_t index,
                               megrt_tensor *tensor) {
  return guarded([&] {
    const char *function = "megrt_outputs_get";
    require(outputs, function, "outputs");
    if (index >= outputs->byIndex.size())
      throw megrt::Error("output index " + std::to_string(index) +
                         " is out of range (" +
                         std::to_string(outputs->byIndex.size()) + " outputs)");
    view(*outputs->byIndex[index], require(tensor, function, "tensor"));
  });
}

megrt_status megrt_outputs_find(const megrt_outputs *outputs, const char *name,
                                megrt_tensor *tensor) {
  return guarded([&] {
    const char *function = "megrt_outputs_find";
    require(outputs, function, "outputs");
    auto found = outputs->tensors.find(require(name, function, "name"));
    if (found == outputs->tensors.end())
      throw megrt::Error(std::string("no output named '") + name + "'");
    view(*found, require(tensor, function, "tensor"));
  });
}

void megrt_outputs_destroy(megrt_outputs *outputs) { delete outputs; }

} // extern "C"
