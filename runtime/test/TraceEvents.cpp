// Reads back the Chrome trace a Session writes, for the trace tests of
// every device.
#include "TraceEvents.h"

#include "TestFiles.h"

#include <gtest/gtest.h>

namespace megrt::test {
namespace {

const JsonValue *member(const JsonValue &object, const std::string &key) {
  for (const auto &[name, value] : object.members)
    if (name == key)
      return &value;
  return nullptr;
}

/// Member `key` of `object`, of kind `kind`; a test failure if not.
const JsonValue &required(const JsonValue &object, const std::string &key,
                          JsonValue::Kind kind, const std::string &where) {
  static const JsonValue missing;
  const JsonValue *value = member(object, key);
  if (!value) {
    ADD_FAILURE() << where << " has no '" << key << "'";
    return missing;
  }
  EXPECT_EQ(value->kind, kind)
      << where << ": '" << key << "' is " << value->kindName();
  return *value;
}

} // namespace

const JsonValue &TraceEvent::arg(const std::string &key) const {
  static const JsonValue missing;
  if (const JsonValue *value = member(args, key))
    return *value;
  ADD_FAILURE() << "event '" << name << "' has no argument '" << key << "'";
  return missing;
}

std::vector<TraceEvent> readTraceEvents(const std::string &path) {
  std::vector<uint8_t> bytes = readBytes(path);
  JsonValue root = parseJson(std::string(bytes.begin(), bytes.end()));
  std::vector<TraceEvent> events;
  const JsonValue &list =
      required(root, "traceEvents", JsonValue::Kind::Array, path);
  for (const JsonValue &value : list.elements) {
    std::string where = "event " + std::to_string(events.size());
    TraceEvent event;
    event.name = required(value, "name", JsonValue::Kind::String, where).text;
    event.category =
        required(value, "cat", JsonValue::Kind::String, where).text;
    EXPECT_EQ(required(value, "ph", JsonValue::Kind::String, where).text, "X")
        << where;
    event.start =
        std::stod(required(value, "ts", JsonValue::Kind::Number, where).text);
    event.duration =
        std::stod(required(value, "dur", JsonValue::Kind::Number, where).text);
    EXPECT_GE(event.start, 0.0) << where;
    EXPECT_GE(event.duration, 0.0) << where;
    required(value, "pid", JsonValue::Kind::Number, where);
    required(value, "tid", JsonValue::Kind::Number, where);
    event.args = required(value, "args", JsonValue::Kind::Object, where);
    events.push_back(std::move(event));
  }
  return events;
}

std::vector<const TraceEvent *> eventsOf(const std::vector<TraceEvent> &events,
                                         const std::string &category) {
  std::vector<const TraceEvent *> found;
  for (const TraceEvent &event : events)
    if (event.category == category)
      found.push_back(&event);
  return found;
}

size_t countEvents(const std::vector<TraceEvent> &events,
                   const std::string &category) {
  return eventsOf(events, category).size();
}

void expectNestedInEntries(const std::vector<TraceEvent> &events,
                           double slack) {
  std::vector<const TraceEvent *> entries = eventsOf(events, "entry");
  for (const TraceEvent &event : events) {
    if (event.category == "entry")
      continue;
    bool inside = false;
    for (const TraceEvent *entry : entries)
      inside |= entry->start <= event.start + slack &&
                event.start + event.duration <=
                    entry->start + entry->duration + slack;
    EXPECT_TRUE(inside) << event.category << " event '" << event.name << "' at "
                        << event.start << " us for " << event.duration
                        << " us is in no entry run";
  }
}

} // namespace megrt::test
