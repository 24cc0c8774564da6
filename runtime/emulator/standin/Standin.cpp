// The stand-in's state: device memory, streams, the kernel library, errors.
#include "Standin.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace megemu::standin {

namespace {
/// Fresh device memory reads as NaN in f32, bf16 and f16, and -1 as an
/// integer: what a kernel reads before anything wrote it shows.
constexpr uint8_t kFreshPattern = 0xff;
constexpr uint64_t kAllocationAlignment = 256;
} // namespace

State &State::get() {
  static State *state = new State();
  return *state;
}

State::State() {
  if (const char *path = std::getenv("MEGEMU_LOG"))
    log_ = std::fopen(path, "a");
}

CUdeviceptr State::allocate(size_t bytes) {
  size_t rounded = (bytes + kAllocationAlignment - 1) / kAllocationAlignment *
                   kAllocationAlignment;
  void *memory = std::aligned_alloc(kAllocationAlignment, rounded ? rounded : kAllocationAlignment);
  if (!memory)
    return 0;
  std::memset(memory, kFreshPattern, rounded);
  auto address = reinterpret_cast<uint64_t>(memory);
  allocations_[address] = bytes;
  largest_ = std::max<uint64_t>(largest_, bytes);
  log("cuMemAlloc " + std::to_string(bytes));
  return address;
}

bool State::release(CUdeviceptr address) {
  auto found = allocations_.find(address);
  if (found == allocations_.end())
    return false;
  allocations_.erase(found);
  std::free(reinterpret_cast<void *>(address));
  return true;
}

uint64_t State::bytesFrom(uint64_t address) const {
  auto next = allocations_.upper_bound(address);
  if (next == allocations_.begin())
    return 0;
  --next;
  uint64_t end = next->first + next->second;
  return address < end ? end - address : 0;
}

bool State::holds(uint64_t address, uint64_t bytes) const {
  return bytes == 0 || bytesFrom(address) >= bytes;
}

Stream *State::stream(CUstream handle) {
  return reinterpret_cast<Stream *>(handle);
}

CUresult State::enqueue(CUstream handle, const std::string &what, Work work) {
  if (sticky_ != CUDA_SUCCESS)
    return sticky_;
  Stream *target = stream(handle);
  if (target && target->capture) {
    target->capture->work.emplace_back(what, std::move(work));
    return CUDA_SUCCESS;
  }
  return work();
}

const KernelLibrary *State::kernels(std::string &error) {
  if (!kernelsLoaded_) {
    kernelsLoaded_ = true;
    const char *path = std::getenv("MEGEMU_KERNELS");
    if (!path) {
      kernelsError_ = "MEGEMU_KERNELS is not set: the stand-in runs "
                      "generated kernels from the library `megc "
                      "--emit=cuda-emulation` writes for the same model";
    } else {
      try {
        kernels_ = std::make_unique<KernelLibrary>(path);
      } catch (const EmulationError &e) {
        kernelsError_ = e.what();
      }
    }
  }
  error = kernelsError_;
  return kernels_.get();
}

CUresult State::fail(CUresult code, const std::string &message) {
  message_ = message;
  std::fprintf(stderr, "megemu: %s\n", message.c_str());
  log("error " + std::to_string(code) + " " + message);
  if (code == CUDA_ERROR_LAUNCH_FAILED || code == CUDA_ERROR_ILLEGAL_ADDRESS)
    sticky_ = code;
  return code;
}

void State::log(const std::string &line) {
  if (!log_)
    return;
  std::fprintf(log_, "%s\n", line.c_str());
  std::fflush(log_);
}

} // namespace megemu::standin
