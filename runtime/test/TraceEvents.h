// Reads back the Chrome trace a Session writes, for the trace tests of
// every device.
#ifndef MEGRT_TEST_TRACEEVENTS_H
#define MEGRT_TEST_TRACEEVENTS_H

#include "Json.h"

#include <string>
#include <vector>

namespace megrt::test {

/// One complete ("ph": "X") event.
struct TraceEvent {
  std::string name;
  std::string category;
  double start = 0;
  double duration = 0;
  JsonValue args;

  /// The member `key` of args; a test failure and null if there is none.
  const JsonValue &arg(const std::string &key) const;
};

/// The events of the trace file at `path`, in file order. Checks the file's
/// shape: {"traceEvents": [...]}, every event complete, with a name, a
/// category, non-negative times, a pid and tid and an args object.
std::vector<TraceEvent> readTraceEvents(const std::string &path);

std::vector<const TraceEvent *> eventsOf(const std::vector<TraceEvent> &events,
                                         const std::string &category);
size_t countEvents(const std::vector<TraceEvent> &events,
                   const std::string &category);

/// Every event that is not an entry run lies within one, give or take
/// `slack` microseconds of rounding.
void expectNestedInEntries(const std::vector<TraceEvent> &events,
                           double slack = 0.01);

} // namespace megrt::test

#endif // MEGRT_TEST_TRACEEVENTS_H
