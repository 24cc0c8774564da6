// megrt's Program and Session in Python, with tensors as NumPy arrays:
// inputs are copied in, outputs handed over without a copy.
#include "Bindings.h"

#include "megrt/Error.h"
#include "megrt/Program.h"
#include "megrt/Session.h"
#include "megrt/TokenDataset.h"
#include "megrt/Tensor.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <iterator>
#include <map>
#include <mutex>

namespace nb = nanobind;

namespace megc::python {
namespace {

using ArrayIn = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

constexpr nb::dlpack::dtype kFloat16{
    static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
constexpr nb::dlpack::dtype kBfloat16{
    static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};

/// NumPy has no bfloat16: bf16 travels as uint16 arrays of its bits, and a
/// DLPack producer's bfloat16 is taken as it is.
megrt::DType tensorDType(nb::dlpack::dtype dtype, const std::string &what) {
  if (dtype == nb::dtype<float>())
    return megrt::DType::F32;
  if (dtype == kFloat16)
    return megrt::DType::F16;
  if (dtype == nb::dtype<uint16_t>() || dtype == kBfloat16)
    return megrt::DType::BF16;
  if (dtype == nb::dtype<int32_t>())
    return megrt::DType::I32;
  if (dtype == nb::dtype<int64_t>())
    return megrt::DType::I64;
  static const char *const codes[] = {"int",    "uint",    "float", "?",
                                      "bfloat", "complex", "bool"};
  std::string name = dtype.code < std::size(codes) ? codes[dtype.code] : "?";
  throw megrt::Error(what + " has element type " + name +
                     std::to_string(dtype.bits) +
                     ", expected float32, float16, int32, int64 or uint16 "
                     "(the bits of bf16)");
}

nb::dlpack::dtype arrayDType(megrt::DType dtype) {
  switch (dtype) {
  case megrt::DType::F32:
    return nb::dtype<float>();
  case megrt::DType::F16:
    return kFloat16;
  case megrt::DType::BF16:
    return nb::dtype<uint16_t>();
  case megrt::DType::I32:
    return nb::dtype<int32_t>();
  case megrt::DType::I64:
    return nb::dtype<int64_t>();
  }
  throw megrt::Error("unknown dtype " +
                     std::to_string(static_cast<int>(dtype)));
}

/// A copy of `value` (a C-contiguous CPU array) as a tensor; `what` names
/// it in errors.
megrt::Tensor toTensor(nb::handle value, const std::string &what) {
  ArrayIn array;
  if (!nb::try_cast(value, array, /*convert=*/false))
    throw megrt::Error(what + " is a " + nb::type_name(value.type()).c_str() +
                       ", expected a C-contiguous CPU array");
  megrt::DType dtype = tensorDType(array.dtype(), what);
  megrt::Shape shape;
  for (size_t i = 0; i < array.ndim(); ++i)
    shape.push_back(static_cast<int64_t>(array.shape(i)));
  return megrt::Tensor::fromBytes(dtype, std::move(shape), array.data(),
                                  array.nbytes());
}

/// Hands `tensor` to a NumPy array that owns it.
nb::object toArray(megrt::Tensor tensor) {
  auto *owned = new megrt::Tensor(std::move(tensor));
  nb::capsule owner(owned, [](void *pointer) noexcept {
    delete static_cast<megrt::Tensor *>(pointer);
  });
  std::vector<size_t> shape(owned->shape().begin(), owned->shape().end());
  return nb::ndarray<nb::numpy>(owned->data(), shape.size(), shape.data(),
                                owner, nullptr, arrayDType(owned->dtype()))
      .cast();
}

nb::tuple shapeTuple(const megrt::Shape &shape) {
  nb::list dims;
  for (int64_t dim : shape)
    dims.append(dim);
  return nb::tuple(dims);
}

/// A Session with the lock that its runs take: they release the GIL, and a
/// Session must not run twice at once.
struct SessionHandle {
  SessionHandle(megrt::Program program, megrt::SessionOptions options)
      : session(std::move(program), std::move(options)) {}

  /// Reads parameters from a dict as Session::loadParameters (withState
  /// false) and loadState (true) read a file: everything is checked before
  /// anything is written.
  void load(nb::dict values, bool allowExtra, bool withState) {
    const megrt::Program &program = session.program();
    std::map<std::string, megrt::Tensor> tensors;
    for (auto [key, value] : values) {
      std::string name = nb::cast<std::string>(key);
      tensors.emplace(name, toTensor(value, "parameters dict: '" + name + "'"));
    }
    for (const megrt::ParameterSpec &spec : program.parameters()) {
      if (spec.state && !withState)
        continue;
      auto found = tensors.find(spec.name);
      if (found == tensors.end())
        throw megrt::Error("parameters dict: missing parameter '" + spec.name +
                           "' (expected " +
                           megrt::formatType(spec.dtype, spec.shape) + ")");
      const megrt::Tensor &tensor = found->second;
      if (tensor.dtype() != spec.dtype || tensor.shape() != spec.shape)
        throw megrt::Error(
            "parameters dict: parameter '" + spec.name + "' is " +
            megrt::formatType(tensor.dtype(), tensor.shape()) + ", expected " +
            megrt::formatType(spec.dtype, spec.shape));
    }
    if (!allowExtra)
      for (const auto &[name, tensor] : tensors)
        if (!program.findParameter(name))
          throw megrt::Error("parameters dict: '" + name +
                             "' is not a parameter of the program (pass "
                             "allow_extra=True to ignore it)");
    std::lock_guard<std::mutex> lock(mutex);
    for (const megrt::ParameterSpec &spec : program.parameters())
      if (!spec.state || withState)
        session.setParameter(spec.name, tensors.at(spec.name));
  }

  nb::dict parameters(bool withState) {
    nb::dict result;
    std::lock_guard<std::mutex> lock(mutex);
    for (const megrt::ParameterSpec &spec : session.program().parameters())
      if (!spec.state || withState)
        result[spec.name.c_str()] = toArray(session.parameter(spec.name));
    return result;
  }

  nb::dict run(const std::string &entry, nb::dict inputs) {
    std::map<std::string, megrt::Tensor> tensors;
    for (auto [key, value] : inputs) {
      std::string name = nb::cast<std::string>(key);
      tensors.emplace(name, toTensor(value, "input '" + name + "'"));
    }
    std::map<std::string, megrt::Tensor> outputs;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex);
      outputs = session.run(entry, tensors);
    }
    nb::dict result;
    for (auto &[name, tensor] : outputs)
      result[name.c_str()] = toArray(std::move(tensor));
    return result;
  }

  /// Runs `method` on the session without the GIL, under the lock.
  template <typename Method> void locked(Method method) {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex);
    method(session);
  }

  megrt::Session session;
  std::mutex mutex;
};

void bindSpecs(nb::module_ &m) {
  nb::class_<megrt::TensorSpec>(m, "TensorSpec",
                                "An input or output of an entry.")
      .def_ro("name", &megrt::TensorSpec::name)
      .def_prop_ro("dtype",
                   [](const megrt::TensorSpec &spec) {
                     return megrt::dtypeName(spec.dtype);
                   })
      .def_prop_ro(
          "shape",
          [](const megrt::TensorSpec &spec) { return shapeTuple(spec.shape); },
          nb::sig("def shape(self) -> tuple[int, ...]"))
      .def("__repr__", [](const megrt::TensorSpec &spec) {
        return "TensorSpec('" + spec.name + "', " +
               megrt::formatType(spec.dtype, spec.shape) + ")";
      });

  nb::class_<megrt::EntrySpec>(m, "EntrySpec",
                               "An entry point: its name and signature.")
      .def_ro("name", &megrt::EntrySpec::name)
      .def_ro("inputs", &megrt::EntrySpec::inputs)
      .def_ro("outputs", &megrt::EntrySpec::outputs)
      .def_prop_ro(
          "arena_bytes",
          [](const megrt::EntrySpec &spec) { return spec.plan.arenaBytes; })
      .def("__repr__", [](const megrt::EntrySpec &spec) {
        return "EntrySpec('" + spec.name + "', " +
               std::to_string(spec.inputs.size()) + " inputs, " +
               std::to_string(spec.outputs.size()) + " outputs)";
      });

  nb::class_<megrt::ParameterSpec>(
      m, "ParameterSpec",
      "A parameter: a model weight, or training state (optimizer moments, "
      "step count) when `state` is true.")
      .def_ro("name", &megrt::ParameterSpec::name)
      .def_prop_ro("dtype",
                   [](const megrt::ParameterSpec &spec) {
                     return megrt::dtypeName(spec.dtype);
                   })
      .def_prop_ro(
          "shape",
          [](const megrt::ParameterSpec &spec) {
            return shapeTuple(spec.shape);
          },
          nb::sig("def shape(self) -> tuple[int, ...]"))
      .def_ro("trainable", &megrt::ParameterSpec::trainable)
      .def_ro("state", &megrt::ParameterSpec::state)
      .def("__repr__", [](const megrt::ParameterSpec &spec) {
        return "ParameterSpec('" + spec.name + "', " +
               megrt::formatType(spec.dtype, spec.shape) + ")";
      });
}

void bindProgram(nb::module_ &m) {
  nb::class_<megrt::Program>(
      m, "Program",
      "A loaded and fully verified artifact; cheap to share between "
      "Sessions.")
      .def_static(
          "load",
          [](const std::filesystem::path &path) {
            return megrt::Program::load(path.string());
          },
          nb::arg("path"), "Reads and verifies a .megc file.")
      .def_static(
          "from_bytes",
          [](nb::bytes bytes) {
            return megrt::Program::fromBytes(bytes.c_str(), bytes.size());
          },
          nb::arg("data"),
          "Verifies artifact bytes (what megc.compile returns).")
      .def("to_bytes",
           [](const megrt::Program &program) {
             return nb::bytes(program.bytes(), program.size());
           })
      .def_prop_ro("format_version", &megrt::Program::formatVersion)
      .def_prop_ro("producer", &megrt::Program::producer)
      .def_prop_ro("entries", &megrt::Program::entries)
      .def_prop_ro("parameters", &megrt::Program::parameters)
      .def_prop_ro("has_cpu_module", &megrt::Program::hasCpuModule)
      .def_prop_ro("has_cuda_module", &megrt::Program::hasCudaModule);
}

void bindSession(nb::module_ &m) {
  using Path = std::filesystem::path;
  nb::class_<SessionHandle>(m, "Session",
                            "megrt::Session; megc.Session wraps it.")
      .def(
          "__init__",
          [](SessionHandle *self, const megrt::Program &program,
             const std::string &device, uint64_t seed, bool cudaGraphs,
             const std::string &trace, unsigned threads,
             bool initializeWeights) {
            megrt::SessionOptions options;
            options.device = device;
            options.seed = seed;
            options.cudaGraphs = cudaGraphs;
            options.traceFile = trace;
            options.threads = threads;
            options.initializeWeights = initializeWeights;
            nb::gil_scoped_release release;
            new (self) SessionHandle(program, std::move(options));
          },
          nb::arg("program"), nb::arg("device"), nb::arg("seed"),
          nb::arg("cuda_graphs") = true, nb::arg("trace") = "",
          nb::arg("threads") = 0, nb::arg("initialize_weights") = true)
      .def("write_trace",
           [](SessionHandle &self) {
             self.locked([&](megrt::Session &s) { s.writeTrace(); });
           })
      .def("clear_trace",
           [](SessionHandle &self) {
             self.locked([&](megrt::Session &s) { s.clearTrace(); });
           })
      .def_prop_ro(
          "program",
          [](const SessionHandle &self) { return self.session.program(); })
      .def("run", &SessionHandle::run, nb::arg("entry"), nb::arg("inputs"))
      .def(
          "init_parameters",
          [](SessionHandle &self, uint64_t seed) {
            self.locked([&](megrt::Session &s) { s.initParameters(seed); });
          },
          nb::arg("seed"))
      .def(
          "load_parameters",
          [](SessionHandle &self, const Path &path, bool allowExtra) {
            self.locked([&](megrt::Session &s) {
              s.loadParameters(path.string(), allowExtra);
            });
          },
          nb::arg("path"), nb::arg("allow_extra"))
      .def(
          "save_parameters",
          [](SessionHandle &self, const std::string &path,
             uint64_t maxShardBytes) {
            self.locked([&](megrt::Session &s) {
              s.saveParameters(path, maxShardBytes);
            });
          },
          nb::arg("path"), nb::arg("max_shard_bytes"))
      .def(
          "load_state",
          [](SessionHandle &self, const Path &path) {
            self.locked([&](megrt::Session &s) { s.loadState(path.string()); });
          },
          nb::arg("path"))
      .def(
          "save_state",
          [](SessionHandle &self, const Path &path) {
            self.locked([&](megrt::Session &s) { s.saveState(path.string()); });
          },
          nb::arg("path"))
      .def(
          "start_save_state",
          [](SessionHandle &self, const Path &path) {
            self.locked(
                [&](megrt::Session &s) { s.startSaveState(path.string()); });
          },
          nb::arg("path"))
      .def("finish_save",
           [](SessionHandle &self) {
             std::string path;
             self.locked([&](megrt::Session &s) { path = s.finishSave(); });
             return path;
           })
      .def("load_dict", &SessionHandle::load, nb::arg("values"),
           nb::arg("allow_extra"), nb::arg("with_state"))
      .def("parameters", &SessionHandle::parameters, nb::arg("with_state"))
      .def(
          "parameter",
          [](SessionHandle &self, const std::string &name) {
            std::lock_guard<std::mutex> lock(self.mutex);
            return toArray(self.session.parameter(name));
          },
          nb::arg("name"))
      .def("learning_rate",
           [](SessionHandle &self) {
             std::lock_guard<std::mutex> lock(self.mutex);
             return self.session.learningRate();
           })
      .def(
          "set_parameter",
          [](SessionHandle &self, const std::string &name, nb::handle value) {
            megrt::Tensor tensor = toTensor(value, "parameter '" + name + "'");
            std::lock_guard<std::mutex> lock(self.mutex);
            self.session.setParameter(name, tensor);
          },
          nb::arg("name"), nb::arg("value"));
}

} // namespace

/// megrt::TokenDataset sized for an entry of a program: its windows feed
/// that entry's input_ids and labels, its ids are checked against the
/// program's vocabulary.
struct TokenDatasetHandle {
  TokenDatasetHandle(const megrt::Program &program, const std::string &entry,
                     const std::string &path,
                     const std::optional<std::string> &dtype,
                     std::optional<uint64_t> seed)
      : shape(megrt::tokenBatchShape(program, entry, "data")),
        dataset(path, shape.seq, options(program, dtype, seed)) {}

  static megrt::TokenDatasetOptions options(const megrt::Program &program,
                                            const std::optional<std::string> &dtype,
                                            std::optional<uint64_t> seed) {
    megrt::TokenDatasetOptions options;
    if (dtype)
      options.dtype = megrt::parseTokenDType(*dtype);
    options.shuffleSeed = seed;
    options.vocab = megrt::vocabSizeOf(program).value_or(0);
    return options;
  }

  nb::dict batch(megrt::Tensor ids, megrt::Tensor labels) {
    nb::dict inputs;
    inputs["input_ids"] = toArray(std::move(ids));
    inputs["labels"] = toArray(std::move(labels));
    return inputs;
  }

  megrt::TokenBatchShape shape;
  megrt::TokenDataset dataset;
};

void bindTokenDataset(nb::module_ &m) {
  nb::class_<TokenDatasetHandle>(m, "TokenDataset",
                                 "Windows of a token file for an entry")
      .def(nb::init<const megrt::Program &, const std::string &,
                    const std::string &, const std::optional<std::string> &,
                    std::optional<uint64_t>>(),
           nb::arg("program"), nb::arg("entry"), nb::arg("path"),
           nb::arg("dtype").none(), nb::arg("seed").none())
      .def("next",
           [](TokenDatasetHandle &self) {
             megrt::Tensor ids, labels;
             self.dataset.next(self.shape.rows, ids, labels);
             return self.batch(std::move(ids), std::move(labels));
           })
      .def(
          "windows",
          [](TokenDatasetHandle &self, uint64_t first) {
            megrt::Tensor ids, labels;
            self.dataset.windows(first, self.shape.rows, ids, labels);
            return self.batch(std::move(ids), std::move(labels));
          },
          nb::arg("first"))
      .def_prop_rw(
          "position",
          [](const TokenDatasetHandle &self) { return self.dataset.position(); },
          [](TokenDatasetHandle &self, uint64_t position) {
            self.dataset.setPosition(position);
          })
      .def_prop_ro("rows",
                   [](const TokenDatasetHandle &self) { return self.shape.rows; })
      .def_prop_ro("seq",
                   [](const TokenDatasetHandle &self) { return self.shape.seq; })
      .def_prop_ro("num_tokens", [](const TokenDatasetHandle &self) {
        return self.dataset.numTokens();
      })
      .def_prop_ro("num_windows",
                   [](const TokenDatasetHandle &self) {
                     return self.dataset.numWindows();
                   })
      .def_prop_ro("dtype",
                   [](const TokenDatasetHandle &self) {
                     return megrt::tokenDTypeName(self.dataset.dtype());
                   })
      .def_prop_ro("indexed", [](const TokenDatasetHandle &self) {
        return self.dataset.indexed();
      });
}

void bindRuntime(nb::module_ &m) {
  bindSpecs(m);
  bindProgram(m);
  bindSession(m);
  bindTokenDataset(m);
  m.def("supported_devices", &megrt::supportedDevices,
        "The devices a Session accepts in this build.");
}

} // namespace megc::python
