// Device timings of an entry's runs on a CUDA stream, for the trace.
#include "cuda/CudaEntryTrace.h"

#include "Fail.h"
#include "FbTypes.h"
#include "TraceLabels.h"

namespace megrt {

CudaEntryTrace::Span CudaEntryTrace::makeSpan(const std::string &where) const {
  std::string what = where + ", trace event";
  return {CudaEvent(what), CudaEvent(what), what};
}

CudaEntryTrace::CudaEntryTrace(const fb::Program &program,
                               const fb::Entry &entry,
                               const std::vector<GraphRegion> &regions,
                               const std::string &where)
    : entry_(makeSpan(where)), entryLabel_(entryLabel(entry)) {
  for (uint32_t i = 0; i < sizeOf(entry.commands()); ++i) {
    commands_.push_back(makeSpan(concat(where, ", command ", i)));
    commandLabels_.push_back(
        commandLabel(program, *entry.commands()->Get(i), i));
  }
  for (const GraphRegion &region : regions) {
    graphs_.push_back(
        makeSpan(concat(where, ", graph region '", region.name, "'")));
    graphLabels_.push_back(
        {graphLabel(region, /*capture=*/false), graphLabel(region, true)});
  }
}

void CudaEntryTrace::annotateCommand(uint32_t index, std::string_view key,
                                     std::string_view value) {
  std::string &args = commandLabels_.at(index).args;
  std::string member = TraceArgs().text(key, value).str();
  // Both are JSON objects: splice the new member in before the closing
  // brace.
  args = args == "{}"
             ? member
             : concat(args.substr(0, args.size() - 1), ",", member.substr(1));
}

void CudaEntryTrace::beginRun(CUstream stream) {
  run_.clear();
  entry_.start.record(stream, entry_.where);
}

void CudaEntryTrace::endRun(CUstream stream) {
  entry_.end.record(stream, entry_.where);
  run_.push_back({&entry_, &entryLabel_});
}

void CudaEntryTrace::beginCommand(uint32_t index, CUstream stream) {
  commands_[index].start.record(stream, commands_[index].where);
}

void CudaEntryTrace::endCommand(uint32_t index, CUstream stream) {
  commands_[index].end.record(stream, commands_[index].where);
  run_.push_back({&commands_[index], &commandLabels_[index]});
}

void CudaEntryTrace::beginGraph(size_t region, CUstream stream) {
  graphs_[region].start.record(stream, graphs_[region].where);
}

void CudaEntryTrace::endGraph(size_t region, bool capture, CUstream stream) {
  graphs_[region].end.record(stream, graphs_[region].where);
  run_.push_back({&graphs_[region], &graphLabels_[region][capture ? 1 : 0]});
}

void CudaEntryTrace::collect(Trace &trace, const CudaEvent &origin) const {
  // The run's offset can lose precision over a long session (milliseconds
  // as a float); durations and offsets within the run stay exact to the
  // events' resolution.
  double runStart = CudaEvent::elapsedMs(origin, entry_.start, entry_.where);
  for (const Recorded &recorded : run_) {
    const Span &span = *recorded.span;
    double start =
        runStart + CudaEvent::elapsedMs(entry_.start, span.start, span.where);
    double duration = CudaEvent::elapsedMs(span.start, span.end, span.where);
    trace.add(*recorded.label, start * 1e3, duration * 1e3);
  }
}

} // namespace megrt
