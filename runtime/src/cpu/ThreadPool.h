// The CPU device's persistent worker threads: every dispatch grid, GEMM
// block and attention unit runs on them, so that the cores are never
// oversubscribed (the BLAS is called single-threaded from the workers).
#ifndef MEGRT_SRC_CPU_THREADPOOL_H
#define MEGRT_SRC_CPU_THREADPOOL_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace megrt {

/// The threads a CPU device uses when the session does not say:
/// MEGRT_NUM_THREADS if set (a positive integer, else an error naming it),
/// otherwise the cores this process may run on.
unsigned defaultCpuThreads();

class ThreadPool {
public:
  /// `threads` includes the calling thread: a pool of 1 runs everything on
  /// the caller.
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

  /// Calls work(i) for every i in [0, count) on the pool's threads and the
  /// caller, concurrently, and returns when all have returned; the first
  /// exception one of them threw is rethrown. A call from inside `work`
  /// runs its items on the calling thread.
  ///
  /// Thread p of the pool (the caller is 0) starts with the p-th of
  /// size() contiguous shares of [0, count) and then takes what is left
  /// of the others' shares. Jobs that split their data alike (a GEMM's
  /// blocks of rows, the next kernel's workgroups of the same rows) thus
  /// find it in the cache of the core that wrote it. Which thread runs an
  /// item is still up to timing: results must not depend on it.
  template <typename Work> void parallelFor(uint32_t count, Work &&work) {
    run(
        count,
        [](void *context, uint32_t index) {
          (*static_cast<Work *>(context))(index);
        },
        &work);
  }

private:
  using Task = void (*)(void *context, uint32_t index);
  void run(uint32_t count, Task task, void *context);
  void workerLoop(unsigned self);
  /// Takes items of the current job, from thread `self`'s share first,
  /// until none is left.
  void drain(unsigned self);

  /// One thread's share of the current job: items [next, end) are left.
  struct alignas(64) Share {
    std::atomic<uint32_t> next{0};
    uint32_t end = 0;
  };

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  /// Bumped (under the mutex) for every job handed to the workers.
  std::atomic<uint64_t> generation_{0};
  /// The current job.
  Task task_ = nullptr;
  void *context_ = nullptr;
  /// size() shares of the current job.
  std::unique_ptr<Share[]> shares_;
  /// Workers still busy with the current job.
  std::atomic<uint32_t> busy_{0};
  std::mutex errorMutex_;
  std::exception_ptr error_;
};

} // namespace megrt

#endif // MEGRT_SRC_CPU_THREADPOOL_H
