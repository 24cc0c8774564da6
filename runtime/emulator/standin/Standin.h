// The state of the stand-in CUDA libraries (libcuda, cuBLASLt, NCCL), one
// shared object loaded under each of their names: device memory (host
// memory, every allocation recorded), streams that run work at once or
// record it while captured, graphs, the GPU emulator's kernel library, and
// the calls' log and errors. Every call is checked as a GPU would check it
// and, where a GPU would not, as the runtime's contract says it must hold.
#ifndef MEGEMU_STANDIN_STANDIN_H
#define MEGEMU_STANDIN_STANDIN_H

#include "megemu/Emulator.h"

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace megemu::standin {

/// Work on a stream: run now, or recorded into a graph and run at each
/// launch of it. Returns CUDA_SUCCESS or the error it reported.
using Work = std::function<CUresult()>;

struct Stream {
  /// The graph a capture records into, or null.
  struct Graph *capture = nullptr;
};

struct Graph {
  std::vector<std::pair<std::string, Work>> work;
};

struct GraphExec {
  std::vector<std::pair<std::string, Work>> work;
};

struct Event {
  bool recorded = false;
  double milliseconds = 0;
};

class State {
public:
  static State &get();

  std::recursive_mutex mutex;

  /// Device memory: host memory aligned to 256 bytes (what cuMemAlloc
  /// guarantees), filled with a NaN pattern as fresh memory is garbage.
  CUdeviceptr allocate(size_t bytes);
  /// False when `address` starts no allocation.
  bool release(CUdeviceptr address);
  /// The bytes from `address` to the end of its allocation, or 0 when no
  /// allocation holds it.
  uint64_t bytesFrom(uint64_t address) const;
  /// Whether [address, address + bytes) lies in one allocation.
  bool holds(uint64_t address, uint64_t bytes) const;
  uint64_t largestAllocation() const { return largest_; }

  /// Runs `work` now, or records it when `stream` is being captured.
  CUresult enqueue(CUstream stream, const std::string &what, Work work);
  Stream *stream(CUstream handle);

  /// The emulator's kernel library (MEGEMU_KERNELS), loaded on first use;
  /// null, with `error` set, when it is not given or does not load.
  const KernelLibrary *kernels(std::string &error);

  /// Remembers `message` as what `code` means now (cuGetErrorString), and
  /// prints it; a launch that failed makes the context unusable, as on a
  /// GPU, and every later call returns its error.
  CUresult fail(CUresult code, const std::string &message);
  CUresult sticky() const { return sticky_; }
  const std::string &message() const { return message_; }

  /// A line in the log (MEGEMU_LOG names its file), for the tests.
  void log(const std::string &line);

private:
  State();
  std::map<uint64_t, uint64_t> allocations_;
  uint64_t largest_ = 0;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::unique_ptr<KernelLibrary> kernels_;
  std::string kernelsError_;
  bool kernelsLoaded_ = false;
  CUresult sticky_ = CUDA_SUCCESS;
  std::string message_;
  std::FILE *log_ = nullptr;
};

/// The stand-in's report of what it runs on, for messages.
constexpr const char *kDeviceName =
    "megemu stand-in (NVIDIA H100 limits, sm_90, kernels on the GPU "
    "emulator)";

} // namespace megemu::standin

#endif // MEGEMU_STANDIN_STANDIN_H
