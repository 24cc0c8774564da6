//===- LaunchComparator.h - each CPU launch replayed on the emulator ----===//
//
// A kernel observer on the CPU device: before each launch it keeps the
// launch's buffers; after it, it runs the same kernel's CUDA dispatches
// on the GPU emulator on a copy of those buffers (with the launch table
// the CUDA device would use, scratch and pure outputs filled with NaN
// first) and compares every buffer with what the CPU kernel left:
// bitwise where both compute in the same order, within a bound per dtype
// elsewhere (see LaunchComparator.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_TEST_TOOLS_GPUCHECK_LAUNCHCOMPARATOR_H
#define MEGC_TEST_TOOLS_GPUCHECK_LAUNCHCOMPARATOR_H

#include "megc/Compiler/Program.h"

#include "megemu/Emulator.h"
#include "megrt/KernelObserver.h"

#include <map>
#include <string>
#include <vector>

namespace megc::gpucheck {

/// What the check knows of one kernel besides its launch table.
struct KernelFacts {
  std::string name;
  /// The element type of each argument (inputs, then outputs): "f32",
  /// "bf16", "f16", "i32", "i64", "i1".
  std::vector<std::string> argTypes;
  unsigned inputs = 0;
  /// The CUDA strategy's kind and whether its code calls a function the
  /// CPU code approximates differently (exp, log, tanh, erf, ...): when
  /// the kind is pointwise and it calls none, the results must be bitwise
  /// equal.
  std::string strategy;
  bool approximatedMath = false;
  /// The reduction length of the strategy (1 for pointwise), for the
  /// report.
  int64_t reductionLength = 1;
};

/// How one kernel fared over its launches.
struct KernelResult {
  unsigned launches = 0;
  bool bitwise = true;
  /// The largest error relative to its output's largest magnitude, and
  /// the bound it was held to.
  double error = 0, bound = 0;
  std::string failure;
};

class LaunchComparator : public megrt::KernelObserver {
public:
  LaunchComparator(const megemu::KernelLibrary &library,
                   std::vector<KernelCodeDesc> codes,
                   std::vector<KernelFacts> facts, unsigned maxLaunches);

  void beforeLaunch(uint32_t kernel,
                    const std::vector<megrt::KernelArgument> &args) override;
  void afterLaunch(uint32_t kernel,
                   const std::vector<megrt::KernelArgument> &args) override;

  const std::map<uint32_t, KernelResult> &results() const { return results_; }
  const std::vector<KernelFacts> &facts() const { return facts_; }

  /// The bound on |gpu - cpu| / max |cpu| over one output for `dtype`.
  static double boundFor(const std::string &dtype);

private:
  /// Compares one argument; returns the failure or "".
  std::string compare(uint32_t kernel, unsigned arg, const uint8_t *cpu,
                      const uint8_t *gpu, uint64_t bytes, bool mustBeBitwise,
                      KernelResult &result);

  const megemu::KernelLibrary &library_;
  std::vector<KernelCodeDesc> codes_;
  std::vector<KernelFacts> facts_;
  unsigned maxLaunches_;
  std::map<uint32_t, KernelResult> results_;
  /// The launch's buffers as they were before it ran.
  std::vector<std::vector<uint8_t>> before_;
};

} // namespace megc::gpucheck

#endif // MEGC_TEST_TOOLS_GPUCHECK_LAUNCHCOMPARATOR_H
