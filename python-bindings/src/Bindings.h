// What the parts of the _megc extension module share.
#ifndef MEGC_PYTHON_BINDINGS_H
#define MEGC_PYTHON_BINDINGS_H

#include <nanobind/nanobind.h>

#include <stdexcept>
#include <string>

namespace megc::python {

/// A compiler or generator failure, with the diagnostics that explain it;
/// raised in Python as megc.Error, like megrt::Error.
class CompilerError : public std::runtime_error {
public:
  explicit CompilerError(const std::string &message)
      : std::runtime_error(message) {}
};

/// megc.compile and the preset generator.
void bindCompiler(nanobind::module_ &m);

/// Program, Session and the conversions between tensors and NumPy arrays.
void bindRuntime(nanobind::module_ &m);

} // namespace megc::python

#endif // MEGC_PYTHON_BINDINGS_H
