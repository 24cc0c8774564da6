// A launch: its configuration and arguments checked, then its blocks run
// in order, each with fresh shared memory.
#include "LaunchContext.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>

namespace megemu {
namespace {

/// Bytes shared memory is filled with before a block runs: f32 and bf16
/// NaN, so that a read of what the block did not write shows.
constexpr uint8_t kSharedPattern = 0xff;

std::string dimText(Dim3 d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " +
         std::to_string(d.z) + ")";
}

/// `kernel` names the kernel ("kernel 'k'", or the caller's label).
[[noreturn]] void refuse(const std::string &kernel, const std::string &what) {
  throw EmulationError(kernel + ": " + what);
}

void checkConfig(const std::string &name, const LaunchConfig &config,
                 uint64_t staticShared, const DeviceLimits &limits) {
  const Dim3 &b = config.block, &g = config.grid;
  if (b.x == 0 || b.y == 0 || b.z == 0 || g.x == 0 || g.y == 0 || g.z == 0)
    refuse(name, "launch with grid " + dimText(g) + " and block " +
                     dimText(b) + ": every dimension must be at least 1");
  if (b.count() > limits.maxThreadsPerBlock || b.x > limits.maxBlock.x ||
      b.y > limits.maxBlock.y || b.z > limits.maxBlock.z)
    refuse(name, "block " + dimText(b) + " exceeds the device's " +
                     std::to_string(limits.maxThreadsPerBlock) +
                     " threads per block or its block dimensions " +
                     dimText(limits.maxBlock));
  if (g.x > limits.maxGrid.x || g.y > limits.maxGrid.y ||
      g.z > limits.maxGrid.z)
    refuse(name, "grid " + dimText(g) + " exceeds the device's " +
                     dimText(limits.maxGrid));
  if (staticShared + config.dynamicSharedBytes > limits.maxSharedPerBlock)
    refuse(name, std::to_string(staticShared) + " bytes of static and " +
                     std::to_string(config.dynamicSharedBytes) +
                     " of dynamic shared memory exceed the device's " +
                     std::to_string(limits.maxSharedPerBlock) + " per block");
}

/// Memory for each block's shared buffers: each at an offset aligned to
/// what it declares and no more (so that an access needing more alignment
/// than the buffer promises fails here as on a GPU), refilled per block.
class SharedMemory {
public:
  SharedMemory(const std::vector<KernelInfo::Workgroup> &buffers,
               uint64_t dynamicBytes) {
    uint64_t offset = 0;
    for (const KernelInfo::Workgroup &buffer : buffers) {
      uint64_t align = buffer.align ? buffer.align : 1;
      offset = (offset + align - 1) / align * align;
      if (offset % (2 * align) == 0)
        offset += align;
      offsets_.push_back(offset);
      offset += buffer.bytes;
    }
    // Dynamic shared memory starts 16-byte aligned, as CUDA's does.
    dynamicOffset_ = (offset + 15) / 16 * 16;
    bytes_ = dynamicOffset_ + dynamicBytes;
    memory_.reset(static_cast<uint8_t *>(
        std::aligned_alloc(4096, (bytes_ + 4096) / 4096 * 4096)));
  }
  /// Fills the memory with the pattern; returns each buffer's address.
  std::vector<uint8_t *> refill() {
    std::memset(memory_.get(), kSharedPattern, bytes_);
    std::vector<uint8_t *> bases;
    for (uint64_t offset : offsets_)
      bases.push_back(memory_.get() + offset);
    return bases;
  }
  void *dynamic() { return memory_.get() + dynamicOffset_; }

private:
  struct Free {
    void operator()(uint8_t *p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> memory_;
  std::vector<uint64_t> offsets_;
  uint64_t dynamicOffset_ = 0, bytes_ = 0;
};

/// Runs every block of `config` in order with `body` as each thread.
void runBlocks(const std::string &name, const LaunchConfig &config,
               LaunchContext &context, SharedMemory &shared,
               const std::function<std::string(int32_t)> &describeSite,
               const std::function<void(const std::vector<uint8_t *> &,
                                        unsigned)> &body) {
  BlockRunner runner(describeSite);
  context.runner = &runner;
  LaunchContext *outer = LaunchContext::current();
  LaunchContext::current() = &context;
  struct Restore {
    LaunchContext *outer;
    ~Restore() { LaunchContext::current() = outer; }
  } restore{outer};
  const Dim3 &g = config.grid;
  for (uint32_t z = 0; z < g.z; ++z)
    for (uint32_t y = 0; y < g.y; ++y)
      for (uint32_t x = 0; x < g.x; ++x) {
        std::vector<uint8_t *> bases = shared.refill();
        context.dynamicShared = shared.dynamic();
        uint32_t linear = (z * g.y + y) * g.x + x;
        context.checker.beginBlock(linear, bases);
        std::string error = runner.run(config, {x, y, z}, [&](unsigned t) {
          body(bases, t);
        });
        if (!error.empty())
          refuse(name, "block " + dimText({x, y, z}) + ", " + error);
      }
}

} // namespace

void launch(const KernelLibrary &library, const KernelInfo &kernel,
            const LaunchConfig &config, const std::vector<Argument> &args,
            const std::string &label, const DeviceLimits &limits) {
  std::string name = label.empty() ? "kernel '" + kernel.name + "'" : label;
  uint64_t staticShared = 0;
  for (const KernelInfo::Workgroup &buffer : kernel.workgroup)
    staticShared += buffer.bytes;
  checkConfig(name, config, staticShared, limits);
  if (args.size() != kernel.args)
    refuse(name, "launched with " + std::to_string(args.size()) +
                     " arguments; the kernel takes " +
                     std::to_string(kernel.args));
  std::vector<AccessChecker::Buffer> buffers;
  for (unsigned i = 0; i < kernel.args; ++i) {
    const Argument &arg = args[i];
    int64_t extent = kernel.extents[i];
    if (!arg.pointer)
      refuse(name, "argument " + std::to_string(i) + " is a null pointer");
    if (extent >= 0 && arg.bytes != UINT64_MAX &&
        static_cast<uint64_t>(extent) > arg.bytes)
      refuse(name, "argument " + std::to_string(i) + ": the kernel's view of "
                   "it spans " + std::to_string(extent) +
                   " bytes from its pointer, but the buffer there holds " +
                   std::to_string(arg.bytes));
    uint64_t bytes = arg.bytes != UINT64_MAX ? arg.bytes
                     : extent >= 0           ? static_cast<uint64_t>(extent)
                                             : UINT64_MAX;
    buffers.push_back({static_cast<uint8_t *>(arg.pointer), bytes, false,
                       "argument " + std::to_string(i)});
  }
  for (size_t j = 0; j < kernel.workgroup.size(); ++j)
    buffers.push_back({nullptr, kernel.workgroup[j].bytes, true,
                       "workgroup buffer " + std::to_string(j)});

  LaunchContext context;
  context.library = &library;
  context.checker.beginLaunch(std::move(buffers));
  SharedMemory shared(kernel.workgroup, config.dynamicSharedBytes);
  std::vector<void *> argv(kernel.args + kernel.workgroup.size());
  for (unsigned i = 0; i < kernel.args; ++i)
    argv[i] = args[i].pointer;
  runBlocks(
      name, config, context, shared,
      [&](int32_t site) { return library.site(site); },
      [&](const std::vector<uint8_t *> &bases, unsigned) {
        // The same for every thread of the block: set by each before use.
        for (size_t j = 0; j < bases.size(); ++j)
          argv[kernel.args + j] = bases[j];
        kernel.entry(argv.data());
      });
}

void launchHost(const std::string &kernel, const LaunchConfig &config,
                const std::function<void()> &thread,
                const DeviceLimits &limits) {
  std::string name = "kernel '" + kernel + "'";
  checkConfig(name, config, 0, limits);
  LaunchContext context;
  SharedMemory shared({}, config.dynamicSharedBytes);
  runBlocks(
      name, config, context, shared,
      [](int32_t) { return std::string("a __syncthreads() or shuffle"); },
      [&](const std::vector<uint8_t *> &, unsigned) { thread(); });
}

} // namespace megemu
