// The one exception type the runtime throws for every user-visible failure.
#ifndef MEGRT_ERROR_H
#define MEGRT_ERROR_H

#include <stdexcept>
#include <string>

namespace megrt {

/// Thrown for every failure the caller can act on: a bad artifact, a bad
/// input, a missing file. The message names the object, what was expected and
/// what was found.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

} // namespace megrt

#endif // MEGRT_ERROR_H
