//===- Calibrate.h - a cluster's efficiencies from a measured run -*- C++
//-*-===//
//
// Fits the efficiencies of a cluster file to a trace that `megc-run
// --trace` wrote for the same compiled entry: each command's measured time
// (its mean over the runs in the trace) against what the simulator costs
// it, class by class.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_PLAN_CALIBRATE_H
#define MEGC_PLAN_CALIBRATE_H

#include "megc/Compiler/Program.h"
#include "megc/Plan/Cluster.h"

#include <string>
#include <vector>

namespace megc::plan {

struct Calibration {
  Cluster cluster;
  /// What was fitted from how many commands, and what could not be (no
  /// command of the class in the trace), one line each.
  std::vector<std::string> notes;
};

/// `cluster` with the efficiencies (and, where the measured speed exceeds
/// the file's peak, the peak) that make the simulation of `entry` match the
/// trace `traceText` of a run of it.
llvm::Expected<Calibration> calibrate(const Cluster &cluster,
                                      const ProgramDesc &program,
                                      const EntryDesc &entry,
                                      llvm::StringRef traceText,
                                      llvm::StringRef traceName);

} // namespace megc::plan

#endif // MEGC_PLAN_CALIBRATE_H
