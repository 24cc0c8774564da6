// A Chrome trace-event timeline of what a Session executed.
#ifndef MEGRT_SRC_TRACE_H
#define MEGRT_SRC_TRACE_H

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace megrt {

/// What an event shows, fixed when an entry is prepared: its name, its
/// category ("entry", "graph", "kernel", "gemm", "copy") and its "args"
/// object, already written as JSON.
struct TraceLabel {
  std::string name;
  std::string category;
  std::string args = "{}";
};

/// Builds the JSON text of a TraceLabel's args.
class TraceArgs {
public:
  TraceArgs &number(std::string_view key, int64_t value);
  TraceArgs &text(std::string_view key, std::string_view value);
  TraceArgs &flag(std::string_view key, bool value);
  std::string str() const { return "{" + members_ + "}"; }

private:
  TraceArgs &addRaw(std::string_view key, const std::string &json);

  std::string members_;
};

/// Complete ("ph": "X") events in the order they are added, written as
/// {"traceEvents": [...]}, which chrome://tracing and Perfetto open. Times
/// are microseconds from the session's first event; each device measures
/// them with its own clock (the host's steady clock, or CUDA events).
class Trace {
public:
  void add(const TraceLabel &label, double startMicros, double durationMicros);

  /// Microseconds from the first time point converted, which the CPU device
  /// takes as each run starts: the session's first event starts at 0.
  double hostMicros(std::chrono::steady_clock::time_point time);

  size_t numEvents() const { return numEvents_; }

  /// Drops the events added so far; later ones keep the same time origin.
  void clear() {
    events_.clear();
    numEvents_ = 0;
  }

  /// Replaces `path` with every event added so far.
  void write(const std::string &path) const;

private:
  std::string events_;
  size_t numEvents_ = 0;
  std::optional<std::chrono::steady_clock::time_point> hostOrigin_;
};

} // namespace megrt

#endif // MEGRT_SRC_TRACE_H
