// Fibers for the emulated threads of a block: each runs on its own stack
// and gives control back to the scheduler when it waits (at a barrier or a
// shuffle), fails, or ends. On x86-64 a switch saves and restores the
// callee-saved registers and the floating-point control words only (no
// system call: emulated kernels switch at every barrier and shuffle);
// elsewhere, and under AddressSanitizer, which must see stack switches,
// ucontext does it.
#ifndef MEGEMU_SRC_FIBERS_H
#define MEGEMU_SRC_FIBERS_H

#include <cstddef>
#include <memory>
#include <ucontext.h>
#include <vector>

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#if defined(__has_feature)
#if !__has_feature(address_sanitizer)
#define MEGEMU_FAST_SWITCH 1
#endif
#else
#define MEGEMU_FAST_SWITCH 1
#endif
#endif

namespace megemu {

class Fibers {
public:
  explicit Fibers(size_t stackBytes = 256 * 1024);
  ~Fibers();
  Fibers(const Fibers &) = delete;
  Fibers &operator=(const Fibers &) = delete;

  /// Makes fiber `index` (stacks are made as needed) run `body(argument)`
  /// from its start at its next resume, whatever it was doing before.
  void start(unsigned index, void (*body)(void *), void *argument);
  /// From the scheduler: runs fiber `index` until it yields or its body
  /// returns.
  void resume(unsigned index);
  /// From inside a fiber: back to the scheduler.
  void yield();

private:
  struct Fiber {
#ifdef MEGEMU_FAST_SWITCH
    void *sp = nullptr;
#else
    ucontext_t context;
#endif
    void *stack = nullptr;
  };
  static void entry(unsigned high, unsigned low);
  static void run(Fibers *self);

  size_t stackBytes_;
  /// Never moved: a ucontext_t points into itself.
  std::vector<std::unique_ptr<Fiber>> fibers_;
#ifdef MEGEMU_FAST_SWITCH
  void *schedulerSp_ = nullptr;
#else
  ucontext_t scheduler_;
#endif
  unsigned current_ = 0;
  void (*body_)(void *) = nullptr;
  std::vector<void *> arguments_;
};

} // namespace megemu

#endif // MEGEMU_SRC_FIBERS_H
