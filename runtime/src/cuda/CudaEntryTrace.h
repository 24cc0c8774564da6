// Device timings of an entry's runs on a CUDA stream, for the trace.
#ifndef MEGRT_SRC_CUDA_CUDAENTRYTRACE_H
#define MEGRT_SRC_CUDA_CUDAENTRYTRACE_H

#include "GraphRegions.h"
#include "Trace.h"
#include "cuda/CudaEvent.h"
#include "megrt/megc_generated.h"

#include <cuda.h>

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace megrt {

/// A pair of events per command, per graph region and for the entry,
/// created once and recorded around that work on every run, so that the
/// trace shows device time rather than launch time. Nothing is recorded
/// while a graph is being captured: a region is timed around its launch.
class CudaEntryTrace {
public:
  /// `where` ("entry 'NAME'") prefixes errors.
  CudaEntryTrace(const fb::Program &program, const fb::Entry &entry,
                 const std::vector<GraphRegion> &regions,
                 const std::string &where);

  /// Adds `key`: `value` to command `index`'s args (which kernels ran it,
  /// say).
  void annotateCommand(uint32_t index, std::string_view key,
                       std::string_view value);

  /// Forgets what the previous run recorded and marks the run's start.
  void beginRun(CUstream stream);
  void endRun(CUstream stream);
  void beginCommand(uint32_t index, CUstream stream);
  void endCommand(uint32_t index, CUstream stream);
  void beginGraph(size_t region, CUstream stream);
  /// `capture`: the launch followed the region's capture.
  void endGraph(size_t region, bool capture, CUstream stream);

  /// Once the stream has finished the run: adds its events to `trace`, in
  /// microseconds from `origin`, recorded before the Session's first traced
  /// run.
  void collect(Trace &trace, const CudaEvent &origin) const;

private:
  /// Events around one piece of work and what the trace calls it.
  struct Span {
    CudaEvent start;
    CudaEvent end;
    std::string where;
  };
  struct Recorded {
    const Span *span;
    const TraceLabel *label;
  };

  Span makeSpan(const std::string &where) const;

  std::vector<Span> commands_;
  std::vector<TraceLabel> commandLabels_;
  std::vector<Span> graphs_;
  /// Per region: the labels of a replay and of a capture.
  std::vector<std::array<TraceLabel, 2>> graphLabels_;
  Span entry_;
  TraceLabel entryLabel_;
  /// What the current run recorded, in order.
  std::vector<Recorded> run_;
};

} // namespace megrt

#endif // MEGRT_SRC_CUDA_CUDAENTRYTRACE_H
