// Builds a megrt::Error message from pieces and throws it.
#ifndef MEGRT_SRC_FAIL_H
#define MEGRT_SRC_FAIL_H

#include "megrt/Error.h"

#include <sstream>
#include <string>

namespace megrt {

template <typename... Pieces> std::string concat(const Pieces &...pieces) {
  std::ostringstream os;
  (os << ... << pieces);
  return os.str();
}

template <typename... Pieces> [[noreturn]] void fail(const Pieces &...pieces) {
  throw Error(concat(pieces...));
}

} // namespace megrt

#endif // MEGRT_SRC_FAIL_H
