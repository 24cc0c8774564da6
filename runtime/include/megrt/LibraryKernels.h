// The signatures of the runtime's library kernels (megrt/LibraryKernels.def),
// parsed once: shared by the compiler, which emits LibraryCall commands, and
// the runtime, which verifies and runs them. Header-only so that the compiler
// needs no runtime library.
#ifndef MEGRT_LIBRARYKERNELS_H
#define MEGRT_LIBRARYKERNELS_H

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace megrt {

/// One buffer operand of a library kernel.
struct LibraryOperand {
  std::string name;
  /// Written by the kernel (else only read).
  bool writes = false;
  /// A call may leave it out (operand -1).
  bool optional = false;
};

/// What a LibraryCall of the kernel `name` passes: its operands and integer
/// parameters, in order.
struct LibraryKernelSignature {
  std::string name;
  std::vector<LibraryOperand> operands;
  std::vector<std::string> params;

  /// The index of operand or parameter `which`; a name the kernel does not
  /// have is a programming error (size() is returned).
  size_t operand(std::string_view which) const {
    for (size_t i = 0; i < operands.size(); ++i)
      if (operands[i].name == which)
        return i;
    return operands.size();
  }
  size_t param(std::string_view which) const {
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i] == which)
        return i;
    return params.size();
  }
};

namespace detail {
inline std::vector<std::string> splitWords(std::string_view text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ')
      ++i;
    size_t end = text.find(' ', i);
    if (end == std::string_view::npos)
      end = text.size();
    if (end > i)
      words.emplace_back(text.substr(i, end - i));
    i = end;
  }
  return words;
}

inline LibraryKernelSignature parseSignature(const char *name,
                                             const char *reads,
                                             const char *writes,
                                             const char *params) {
  LibraryKernelSignature signature{name, {}, splitWords(params)};
  for (bool written : {false, true})
    for (std::string word : splitWords(written ? writes : reads)) {
      bool optional = !word.empty() && word[0] == '?';
      if (optional)
        word.erase(0, 1);
      signature.operands.push_back({word, written, optional});
    }
  return signature;
}
} // namespace detail

/// Every library kernel, in the order of LibraryKernels.def.
inline const std::vector<LibraryKernelSignature> &libraryKernels() {
  static const std::vector<LibraryKernelSignature> kernels = [] {
    std::vector<LibraryKernelSignature> list;
#define MEGRT_LIBRARY_KERNEL(symbol, reads, writes, params)                    \
  list.push_back(detail::parseSignature(#symbol, reads, writes, params));
#include "megrt/LibraryKernels.def"
#undef MEGRT_LIBRARY_KERNEL
    return list;
  }();
  return kernels;
}

/// The kernel called `name`, or null.
inline const LibraryKernelSignature *findLibraryKernel(std::string_view name) {
  for (const LibraryKernelSignature &kernel : libraryKernels())
    if (kernel.name == name)
      return &kernel;
  return nullptr;
}

} // namespace megrt

#endif // MEGRT_LIBRARYKERNELS_H
