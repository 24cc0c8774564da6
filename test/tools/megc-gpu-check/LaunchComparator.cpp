//===- LaunchComparator.cpp - each CPU launch replayed on the emulator --===//
//
// The bound. Both kernels compute the same function of the same inputs;
// they may differ in the order of a reduction's additions and in how a
// transcendental function is evaluated (MLIR's polynomials on the CPU,
// libm in the emulation, each within a few ulp of f32). Every kernel
// computes in f32 (16-bit values are widened), with unit roundoff
// u = 2^-24. A sum of n terms in another order differs by about
// sqrt(n) u sum|x_i| (Higham's statistical estimate), and for terms of
// mixed signs sum|x_i| is about sqrt(n) |sum x_i|: a difference of about
// n u of the result's magnitude. Over an output of many elements the
// largest difference is a few times that, and a 16-bit output adds the
// one ulp that a rounding boundary crossed costs (2^-7 for bf16, 2^-10
// for f16, relative). So each output is held to
//   max |gpu - cpu| <= (8 max(n, 16) u + ulp(dtype)) max |cpu|,
// n being the kernel's reduction length (its largest input's elements per
// element of its strategy's domain; 1 for a pointwise kernel, where the
// 16 covers the approximations). A pointwise kernel that calls none of the
// approximated functions computes every element in the same order on
// both: its outputs must be bitwise equal. Integer outputs always must.
//
//===----------------------------------------------------------------------===//

#include "LaunchComparator.h"

#include "megrt/HalfFloat.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>

namespace megc::gpucheck {

namespace {

/// What scratch and pure outputs are filled with before the emulated
/// launch: NaN as f32, bf16 and f16, -1 as an integer.
constexpr uint8_t kPoison = 0xff;

/// The CUDA device allocates its arena and buffers at multiples of this;
/// the emulated copies keep each address's remainder modulo it, so that a
/// vector access is aligned exactly when it would be on the GPU.
constexpr uintptr_t kDeviceAlignment = 256;

struct AlignedFree {
  void operator()(uint8_t *p) const { std::free(p); }
};
using Memory = std::unique_ptr<uint8_t, AlignedFree>;

Memory allocate(uint64_t bytes) {
  return Memory(static_cast<uint8_t *>(std::aligned_alloc(
      kDeviceAlignment,
      (bytes + kDeviceAlignment) / kDeviceAlignment * kDeviceAlignment)));
}

size_t elementBytes(const std::string &dtype) {
  if (dtype == "f32" || dtype == "i32")
    return 4;
  if (dtype == "bf16" || dtype == "f16")
    return 2;
  if (dtype == "i64")
    return 8;
  return 1;
}

double valueAt(const std::string &dtype, const uint8_t *data, uint64_t i) {
  if (dtype == "f32") {
    float v;
    std::memcpy(&v, data + 4 * i, 4);
    return v;
  }
  uint16_t half;
  std::memcpy(&half, data + 2 * i, 2);
  return dtype == "bf16" ? megrt::bf16ToFloat(half) : megrt::f16ToFloat(half);
}

std::string numberText(double value) {
  std::ostringstream os;
  os.precision(9);
  os << value;
  return os.str();
}

} // namespace

double LaunchComparator::boundFor(const std::string &dtype) {
  if (dtype == "bf16")
    return std::ldexp(1.0, -7);
  if (dtype == "f16")
    return std::ldexp(1.0, -10);
  return std::ldexp(1.0, -23);
}

LaunchComparator::LaunchComparator(const megemu::KernelLibrary &library,
                                   std::vector<KernelCodeDesc> codes,
                                   std::vector<KernelFacts> facts,
                                   unsigned maxLaunches)
    : library_(library), codes_(std::move(codes)), facts_(std::move(facts)),
      maxLaunches_(maxLaunches) {}

void LaunchComparator::beforeLaunch(
    uint32_t kernel, const std::vector<megrt::KernelArgument> &args) {
  before_.clear();
  const KernelResult &result = results_[kernel];
  if (!result.failure.empty() || result.launches >= maxLaunches_)
    return;
  for (const megrt::KernelArgument &arg : args)
    before_.emplace_back(arg.data, arg.data + arg.bytes);
}

void LaunchComparator::afterLaunch(
    uint32_t kernel, const std::vector<megrt::KernelArgument> &args) {
  if (before_.empty() && !args.empty())
    return;
  KernelResult &result = results_[kernel];
  const KernelFacts &facts = facts_[kernel];
  ++result.launches;

  // The launch's buffers in regions of overlapping storage (an output
  // updated in place is an input's storage), each copied as it was before
  // the launch.
  struct Region {
    uintptr_t start, end;
    Memory memory;
    uint8_t *base;
    bool holdsOutput = false;
  };
  std::vector<unsigned> order(args.size());
  for (unsigned i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
    return args[a].data < args[b].data;
  });
  std::vector<Region> regions;
  std::vector<size_t> regionOf(args.size());
  for (unsigned i : order) {
    auto start = reinterpret_cast<uintptr_t>(args[i].data);
    uintptr_t end = start + args[i].bytes;
    if (regions.empty() || start >= regions.back().end)
      regions.push_back({start, end, nullptr, nullptr});
    else
      regions.back().end = std::max(regions.back().end, end);
    regionOf[i] = regions.size() - 1;
    regions.back().holdsOutput |= i >= facts.inputs;
  }
  for (Region &region : regions) {
    uintptr_t offset = region.start % kDeviceAlignment;
    region.memory = allocate(offset + (region.end - region.start));
    region.base = region.memory.get() + offset;
  }
  std::vector<uint8_t *> emulated(args.size());
  std::vector<bool> pureOutput(args.size());
  for (unsigned i = 0; i < args.size(); ++i) {
    Region &region = regions[regionOf[i]];
    emulated[i] =
        region.base + (reinterpret_cast<uintptr_t>(args[i].data) - region.start);
    bool sharesInput = false;
    for (unsigned j = 0; j < facts.inputs; ++j)
      sharesInput |= regionOf[j] == regionOf[i];
    pureOutput[i] = i >= facts.inputs && !sharesInput;
  }
  for (unsigned i = 0; i < args.size(); ++i)
    if (!pureOutput[i])
      std::memcpy(emulated[i], before_[i].data(), args[i].bytes);
  for (unsigned i = 0; i < args.size(); ++i)
    if (pureOutput[i])
      std::memset(emulated[i], kPoison, args[i].bytes);
  const KernelCodeDesc &code = codes_[kernel];
  Memory scratch = allocate(code.scratchBytes);
  std::memset(scratch.get(), kPoison, code.scratchBytes);

  for (size_t j = 0; j < code.dispatches.size(); ++j) {
    const DispatchDesc &dispatch = code.dispatches[j];
    std::string label = "kernel '" + facts.name + "' (CUDA dispatch " +
                        std::to_string(j) + ", '" + dispatch.entry + "')";
    const megemu::KernelInfo *info = library_.find(dispatch.entry);
    if (!info) {
      result.failure =
          label + ": the emulated kernel library has no such kernel";
      return;
    }
    std::vector<megemu::Argument> launchArgs;
    for (const DispatchArgDesc &arg : dispatch.args) {
      if (arg.scratch)
        launchArgs.push_back(
            {scratch.get() + arg.value, code.scratchBytes - arg.value});
      else
        launchArgs.push_back({emulated[arg.value], args[arg.value].bytes});
    }
    megemu::LaunchConfig config;
    config.grid = {dispatch.grid[0], dispatch.grid[1], dispatch.grid[2]};
    config.block = {dispatch.block[0], dispatch.block[1], dispatch.block[2]};
    config.dynamicSharedBytes = dispatch.sharedBytes;
    try {
      megemu::launch(library_, *info, config, launchArgs, label);
    } catch (const megemu::EmulationError &e) {
      result.failure = e.what();
      return;
    }
  }

  bool mustBeBitwise =
      facts.strategy == "pointwise" && !facts.approximatedMath;
  for (unsigned i = 0; i < args.size(); ++i) {
    std::string failure =
        compare(kernel, i, args[i].data, emulated[i], args[i].bytes,
                mustBeBitwise, result);
    if (!failure.empty()) {
      result.failure = "kernel '" + facts.name + "': argument " +
                       std::to_string(i) + " (" + facts.argTypes[i] + ", " +
                       std::to_string(args[i].bytes /
                                      elementBytes(facts.argTypes[i])) +
                       " elements): " + failure;
      return;
    }
  }
}

std::string LaunchComparator::compare(uint32_t kernel, unsigned arg,
                                      const uint8_t *cpu, const uint8_t *gpu,
                                      uint64_t bytes, bool mustBeBitwise,
                                      KernelResult &result) {
  if (std::memcmp(cpu, gpu, bytes) == 0)
    return "";
  result.bitwise = false;
  const KernelFacts &facts = facts_[kernel];
  const std::string &dtype = facts.argTypes[arg];
  size_t size = elementBytes(dtype);
  uint64_t count = bytes / size, differing = 0, first = 0;
  for (uint64_t i = 0; i < count; ++i)
    if (std::memcmp(cpu + i * size, gpu + i * size, size) != 0 &&
        differing++ == 0)
      first = i;
  auto describe = [&](uint64_t i) {
    std::string text = "element " + std::to_string(i);
    if (dtype == "f32" || dtype == "bf16" || dtype == "f16")
      text += " is " + numberText(valueAt(dtype, gpu, i)) + " on the GPU, " +
              numberText(valueAt(dtype, cpu, i)) + " on the CPU";
    return text + " (" + std::to_string(differing) + " of " +
           std::to_string(count) + " elements differ)";
  };
  bool isFloat = dtype == "f32" || dtype == "bf16" || dtype == "f16";
  if (!isFloat)
    return "integer results differ: " + describe(first);
  bool output = arg >= facts.inputs;
  if (!output)
    return "an input changed: " + describe(first);
  if (mustBeBitwise)
    return "differs from the CPU kernel, which computes every element in "
           "the same order (a pointwise kernel without approximated "
           "functions): " +
           describe(first);
  double largest = 0, worst = 0;
  uint64_t worstAt = 0;
  for (uint64_t i = 0; i < count; ++i) {
    double c = valueAt(dtype, cpu, i), g = valueAt(dtype, gpu, i);
    if (std::isnan(c) != std::isnan(g) ||
        ((std::isinf(c) || std::isinf(g)) && c != g))
      return "not finite on one side only: " + describe(i);
    if (std::isfinite(c)) {
      largest = std::max(largest, std::fabs(c));
      if (std::fabs(g - c) > worst) {
        worst = std::fabs(g - c);
        worstAt = i;
      }
    }
  }
  double relative = worst / std::max(largest, 1e-30);
  double bound = 8.0 * std::max<double>(facts.reductionLength, 16) *
                     std::ldexp(1.0, -24) +
                 boundFor(dtype);
  result.error = std::max(result.error, relative);
  result.bound = bound;
  if (relative > bound)
    return "the largest difference, at " + describe(worstAt) + ", is " +
           numberText(relative) +
           " of the output's largest magnitude, above the bound " +
           numberText(bound) + " for a reduction of " +
           std::to_string(facts.reductionLength) + " in " + dtype;
  return "";
}

} // namespace megc::gpucheck
