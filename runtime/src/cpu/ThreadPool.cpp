// The CPU device's persistent worker threads.
#include "cpu/ThreadPool.h"

#include "Fail.h"

#include <chrono>
#include <cstdlib>
#include <sched.h>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace megrt {
namespace {

/// How long an idle worker watches for the next job before it sleeps:
/// dispatches follow each other within microseconds during a step, and
/// waking a sleeping thread costs about as much as a small kernel.
constexpr std::chrono::microseconds kSpinTime(200);

/// Set while a thread runs items of a job: a nested parallelFor runs its
/// items inline.
thread_local bool inJob = false;

void pause() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

} // namespace

unsigned defaultCpuThreads() {
  if (const char *text = std::getenv("MEGRT_NUM_THREADS")) {
    char *end = nullptr;
    long value = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || value < 1 || value > 4096)
      fail("MEGRT_NUM_THREADS is '", text,
           "'; expected a number of threads from 1 to 4096");
    return static_cast<unsigned>(value);
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(unsigned threads) {
  if (threads < 1)
    fail("a CPU device needs at least one thread, got ", threads);
  shares_ = std::make_unique<Share[]>(threads);
  for (unsigned i = 1; i < threads; ++i)
    workers_.emplace_back([this, i] { workerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread &worker : workers_)
    worker.join();
}

void ThreadPool::drain(unsigned self) {
  inJob = true;
  unsigned threads = size();
  for (unsigned k = 0; k < threads; ++k) {
    Share &share = shares_[(self + k) % threads];
    // The load keeps `next` from running far past `end` (and wrapping)
    // when every thread looks at an exhausted share.
    while (share.next.load(std::memory_order_relaxed) < share.end) {
      uint32_t index = share.next.fetch_add(1, std::memory_order_relaxed);
      if (index >= share.end)
        break;
      try {
        task_(context_, index);
      } catch (...) {
        std::lock_guard<std::mutex> lock(errorMutex_);
        if (!error_)
          error_ = std::current_exception();
      }
    }
  }
  inJob = false;
}

void ThreadPool::workerLoop(unsigned self) {
  uint64_t seen = 0;
  for (;;) {
    auto spinUntil = std::chrono::steady_clock::now() + kSpinTime;
    while (generation_.load(std::memory_order_acquire) == seen &&
           std::chrono::steady_clock::now() < spinUntil)
      pause();
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] {
        return generation_.load(std::memory_order_acquire) != seen;
      });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_)
      return;
    drain(self);
    busy_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(uint32_t count, Task task, void *context) {
  if (count == 0)
    return;
  if (workers_.empty() || count == 1 || inJob) {
    for (uint32_t index = 0; index < count; ++index)
      task(context, index);
    return;
  }
  task_ = task;
  context_ = context;
  error_ = nullptr;
  unsigned threads = size();
  for (unsigned p = 0; p < threads; ++p) {
    shares_[p].next.store(static_cast<uint32_t>(uint64_t(count) * p / threads),
                          std::memory_order_relaxed);
    shares_[p].end = static_cast<uint32_t>(uint64_t(count) * (p + 1) / threads);
  }
  busy_.store(static_cast<uint32_t>(workers_.size()),
              std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  drain(0);
  while (busy_.load(std::memory_order_acquire) != 0)
    pause();
  if (error_)
    std::rethrow_exception(error_);
}

} // namespace megrt
