// Fibers: one stack per emulated thread, mapped once and reused for every
// block.
#include "Fibers.h"

#include <cstdint>
#include <new>
#include <sys/mman.h>

#ifdef MEGEMU_FAST_SWITCH
// megemu_switch(void **save, void *next): saves the callee-saved registers,
// MXCSR and the x87 control word on the current stack, stores its pointer
// in *save, and continues on `next`, a stack that a switch saved (or that
// start() laid out the same way). megemu_fiber_entry is where a fresh
// stack first returns to: it calls its r13 with its r12.
asm(R"(
  .text
  .globl megemu_switch
  .type megemu_switch,@function
megemu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw (%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  fldcw (%rsp)
  ldmxcsr 8(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size megemu_switch, .-megemu_switch

  .globl megemu_fiber_entry
  .type megemu_fiber_entry,@function
megemu_fiber_entry:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size megemu_fiber_entry, .-megemu_fiber_entry
)");
extern "C" void megemu_switch(void **save, void *next);
extern "C" void megemu_fiber_entry();
#endif

namespace megemu {

Fibers::Fibers(size_t stackBytes) : stackBytes_(stackBytes) {}

Fibers::~Fibers() {
  for (std::unique_ptr<Fiber> &fiber : fibers_)
    if (fiber->stack)
      munmap(fiber->stack, stackBytes_);
}

void Fibers::run(Fibers *self) {
  unsigned index = self->current_;
  self->body_(self->arguments_[index]);
#ifdef MEGEMU_FAST_SWITCH
  // Done: back to the scheduler for good (start() lays the stack out
  // afresh before the fiber runs again).
  megemu_switch(&self->fibers_[index]->sp, self->schedulerSp_);
  __builtin_unreachable();
#endif
  // With ucontext, returning resumes uc_link: the scheduler.
}

void Fibers::entry(unsigned high, unsigned low) {
  run(reinterpret_cast<Fibers *>((uintptr_t(high) << 32) | low));
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
#ifdef MEGEMU_FAST_SWITCH
  // The frame megemu_switch pops: control words, r15, r14, r13 (the
  // function), r12 (its argument), rbx, rbp, then the return address. After
  // the return the stack is 16-byte aligned, as the entry's call needs.
  auto *top = reinterpret_cast<uint64_t *>(
      (reinterpret_cast<uintptr_t>(fiber.stack) + stackBytes_) & ~uintptr_t(15));
  uint64_t *sp = top - 9;
  uint32_t mxcsr;
  uint16_t fpucw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  sp[0] = fpucw;
  sp[1] = mxcsr;
  sp[2] = 0;                                          // r15
  sp[3] = 0;                                          // r14
  sp[4] = reinterpret_cast<uint64_t>(&Fibers::run);   // r13
  sp[5] = reinterpret_cast<uint64_t>(this);           // r12
  sp[6] = 0;                                          // rbx
  sp[7] = 0;                                          // rbp
  sp[8] = reinterpret_cast<uint64_t>(&megemu_fiber_entry);
  fiber.sp = sp;
#else
  getcontext(&fiber.context);
  fiber.context.uc_stack.ss_sp = fiber.stack;
  fiber.context.uc_stack.ss_size = stackBytes_;
  fiber.context.uc_link = &scheduler_;
  auto self = reinterpret_cast<uintptr_t>(this);
  makecontext(&fiber.context, reinterpret_cast<void (*)()>(&Fibers::entry), 2,
              static_cast<unsigned>(self >> 32),
              static_cast<unsigned>(self & 0xffffffffu));
#endif
}

void Fibers::resume(unsigned index) {
  current_ = index;
#ifdef MEGEMU_FAST_SWITCH
  megemu_switch(&schedulerSp_, fibers_[index]->sp);
#else
  swapcontext(&scheduler_, &fibers_[index]->context);
#endif
}

void Fibers::yield() {
#ifdef MEGEMU_FAST_SWITCH
  megemu_switch(&fibers_[current_]->sp, schedulerSp_);
#else
  swapcontext(&fibers_[current_]->context, &scheduler_);
#endif
}

} // namespace megemu
