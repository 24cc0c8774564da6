// A Chrome trace-event timeline of what a Session executed.
#include "Trace.h"

#include "FileIO.h"
#include "Json.h"

#include <cstdio>

namespace megrt {
namespace {

/// Microseconds with nanosecond digits: enough for both clocks.
std::string micros(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.3f", value);
  return text;
}

} // namespace

TraceArgs &TraceArgs::addRaw(std::string_view key, const std::string &json) {
  members_ += (members_.empty() ? "" : ",") + quoteJson(key) + ":" + json;
  return *this;
}

TraceArgs &TraceArgs::number(std::string_view key, int64_t value) {
  return addRaw(key, std::to_string(value));
}

TraceArgs &TraceArgs::text(std::string_view key, std::string_view value) {
  return addRaw(key, quoteJson(value));
}

TraceArgs &TraceArgs::flag(std::string_view key, bool value) {
  return addRaw(key, value ? "true" : "false");
}

void Trace::add(const TraceLabel &label, double startMicros,
                double durationMicros) {
  // One process and thread: a Session executes its commands in order, so
  // the events nest (entries hold commands and graphs).
  events_ += numEvents_ ? ",\n" : "\n";
  events_ += "{\"name\":" + quoteJson(label.name) +
             ",\"cat\":" + quoteJson(label.category) +
             ",\"ph\":\"X\",\"ts\":" + micros(startMicros) +
             ",\"dur\":" + micros(durationMicros) +
             ",\"pid\":1,\"tid\":1,\"args\":" + label.args + "}";
  ++numEvents_;
}

double Trace::hostMicros(std::chrono::steady_clock::time_point time) {
  if (!hostOrigin_)
    hostOrigin_ = time;
  return std::chrono::duration<double, std::micro>(time - *hostOrigin_).count();
}

void Trace::write(const std::string &path) const {
  std::string text = "{\"traceEvents\":[" + events_ + "\n]}\n";
  writeFile(path, {{text.data(), text.size()}});
}

} // namespace megrt
