//===- Cluster.h - a cluster described as data -------------------*- C++
//-*-===//
//
// What `megc plan` knows of the machines a model trains on: the device
// (peak dense FLOP/s per dtype, memory and its bandwidth), the node
// (devices per node, the link between them), the network between nodes,
// and the efficiencies the simulator applies to those peaks. A cluster is a
// JSON file (clusters/*.json); every field is required, in SI units
// (FLOP/s, bytes, bytes/s, seconds), and a file with an unknown field, a
// missing one or a value that is not physical is refused naming the field.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_PLAN_CLUSTER_H
#define MEGC_PLAN_CLUSTER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>

namespace megc::plan {

struct Cluster {
  std::string name;
  struct Device {
    std::string name;
    /// Peak dense FLOP/s of matrix products per element type ("bf16",
    /// "f16", "f32").
    std::map<std::string, double> peakFlops;
    double memoryBytes = 0, memoryBandwidth = 0;
    /// Streaming multiprocessors (GPUs) or cores (CPUs).
    int64_t units = 0;
  } device;
  struct Node {
    int64_t devices = 0;
    /// Per device, each way, bytes/s; and the latency of one transfer.
    double linkBandwidth = 0, linkLatency = 0;
  } node;
  struct Network {
    /// Per device, each way, bytes/s; and the latency of one transfer.
    double bandwidth = 0, latency = 0;
  } network;
  /// Fractions of the peaks reached, in (0, 1], and the fixed cost of
  /// issuing one command.
  struct Efficiency {
    /// Matrix products reach `gemm` of the peak when large; one of
    /// `gemmHalfFlops` operations reaches half of that.
    double gemm = 0, gemmHalfFlops = 0;
    double attention = 0;
    /// Of the memory bandwidth, for kernels, copies and library kernels.
    double memory = 0;
    /// Of the link or network bandwidth, for a collective's bus bandwidth.
    double intraNode = 0, interNode = 0;
    double launchSeconds = 0;
    /// The fixed cost of a command replayed in a captured CUDA graph (the
    /// graph's own launch costs launchSeconds); launchSeconds where the
    /// device runs no graphs.
    double graphLaunchSeconds = 0;

    /// Whether captured graphs issue commands more cheaply than launches.
    bool graphsPay() const { return graphLaunchSeconds < launchSeconds; }
  } efficiency;

  /// The peak for element type `dtype`, or the f32 one when the device has
  /// no entry for it.
  double peakFor(llvm::StringRef dtype) const;
};

/// Reads and checks a cluster file's text; `fileName` names it in errors.
llvm::Expected<Cluster> parseCluster(llvm::StringRef text,
                                     llvm::StringRef fileName);

/// Reads the cluster file `path`, or a cluster shipped with megc by its
/// name (`h100-sxm`, `h200`, `a100-80gb`, `cpu`).
llvm::Expected<Cluster> loadCluster(llvm::StringRef pathOrName);

/// The cluster as a file that parseCluster reads back.
std::string printCluster(const Cluster &cluster);

} // namespace megc::plan

#endif // MEGC_PLAN_CLUSTER_H
