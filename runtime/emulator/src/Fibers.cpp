// Fibers on ucontext: one stack per emulated thread, mapped once and
// reused for every block.
#include "Fibers.h"

#include <cstdint>
#include <new>
#include <sys/mman.h>

namespace megemu {

Fibers::Fibers(size_t stackBytes) : stackBytes_(stackBytes) {}

Fibers::~Fibers() {
  for (std::unique_ptr<Fiber> &fiber : fibers_)
    if (fiber->stack)
      munmap(fiber->stack, stackBytes_);
}

void Fibers::entry(unsigned high, unsigned low) {
  auto *self = reinterpret_cast<Fibers *>((uintptr_t(high) << 32) | low);
  unsigned index = self->current_;
  self->body_(self->arguments_[index]);
  // Returning resumes uc_link: the scheduler.
}

void Fibers::start(unsigned index, void (*body)(void *), void *argument) {
  while (index >= fibers_.size()) {
    fibers_.push_back(std::make_unique<Fiber>());
    arguments_.push_back(nullptr);
  }
  Fiber &fiber = *fibers_[index];
  if (!fiber.stack) {
    // Touched lazily: a block of 1024 threads reserves 256 MiB of address
    // space but uses a few pages of each stack.
    void *stack = mmap(nullptr, stackBytes_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stack == MAP_FAILED)
      throw std::bad_alloc();
    fiber.stack = stack;
  }
  body_ = body;
  arguments_[index] = argument;
  getcontext(&fiber.context);
  fiber.context.uc_stack.ss_sp = fiber.stack;
  fiber.context.uc_stack.ss_size = stackBytes_;
  fiber.context.uc_link = &scheduler_;
  auto self = reinterpret_cast<uintptr_t>(this);
  makecontext(&fiber.context, reinterpret_cast<void (*)()>(&Fibers::entry), 2,
              static_cast<unsigned>(self >> 32),
              static_cast<unsigned>(self & 0xffffffffu));
}

void Fibers::resume(unsigned index) {
  current_ = index;
  swapcontext(&scheduler_, &fibers_[index]->context);
}

void Fibers::yield() {
  swapcontext(&fibers_[current_]->context, &scheduler_);
}

} // namespace megemu
