// The _megc extension module: the exception type and the bound parts.
#include "Bindings.h"

#include "megrt/Error.h"

namespace nb = nanobind;

NB_MODULE(_megc, m) {
  m.doc() = "Native part of the megc package; import megc instead.";
  // One Python exception for the compiler, the generator and the runtime:
  // a caller handles "megc failed" in one place, with the full message.
  nb::exception<megrt::Error> error(m, "Error");
  nb::register_exception_translator(
      [](const std::exception_ptr &exception, void *type) {
        try {
          std::rethrow_exception(exception);
        } catch (const megc::python::CompilerError &e) {
          PyErr_SetString(static_cast<PyObject *>(type), e.what());
        }
      },
      error.ptr());
  megc::python::bindCompiler(m);
  megc::python::bindRuntime(m);
}
