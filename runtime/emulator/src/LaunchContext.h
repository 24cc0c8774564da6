// The launch running on this OS thread, which the hooks of its kernel and
// the host API of a host build reach.
#ifndef MEGEMU_SRC_LAUNCHCONTEXT_H
#define MEGEMU_SRC_LAUNCHCONTEXT_H

#include "AccessChecker.h"
#include "BlockRunner.h"
#include "megemu/Emulator.h"

namespace megemu {

struct LaunchContext {
  /// The library whose kernel runs (null for a host build).
  const KernelLibrary *library = nullptr;
  AccessChecker checker;
  BlockRunner *runner = nullptr;
  /// The running block's dynamic shared memory.
  void *dynamicShared = nullptr;

  static LaunchContext *&current();
};

/// The address of hook `hook` (megemu/Abi.h) for a library's table.
void *hookAddress(Hook hook);

} // namespace megemu

#endif // MEGEMU_SRC_LAUNCHCONTEXT_H
