//===- Cluster.cpp - reading and writing cluster files -------------------===//
//
// A strict reader over llvm::json: every field of the format is required,
// any other is refused, and each number is checked against what is
// physical, so that a typo never silently becomes a default.
//
//===----------------------------------------------------------------------===//

#include "megc/Plan/Cluster.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstdio>

using namespace llvm;

namespace megc::plan {
namespace {

/// A number as a person would write it (%g).
std::string numberText(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

/// The fields of one JSON object, read by name; `path` names the object in
/// errors ("device.peak_flops").
class Fields {
public:
  Fields(const json::Object &object, std::string path, std::string file)
      : object_(object), path_(std::move(path)), file_(std::move(file)) {}

  /// A required number, > 0 (or >= 0 with `zeroAllowed`), at most `max`.
  Expected<double> number(StringRef key, double max = HUGE_VAL,
                          bool zeroAllowed = false) {
    seen_.insert(key);
    const json::Value *value = object_.get(key);
    if (!value)
      return missing(key);
    std::optional<double> number = value->getAsNumber();
    if (!number)
      return error(key, "expected a number");
    if (!std::isfinite(*number) || *number < 0 ||
        (*number == 0 && !zeroAllowed) || *number > max)
      return error(key,
                   formatv("{0} is not physical (expected {1}{2})",
                           numberText(*number), zeroAllowed ? ">= 0" : "> 0",
                           max == HUGE_VAL ? std::string()
                                           : " and <= " + numberText(max))
                       .str());
    return *number;
  }
  Expected<int64_t> count(StringRef key) {
    Expected<double> value = number(key);
    if (!value)
      return value.takeError();
    if (*value != std::floor(*value) || *value > 1e15)
      return error(key, "expected a whole number");
    return static_cast<int64_t>(*value);
  }
  Expected<std::string> string(StringRef key) {
    seen_.insert(key);
    const json::Value *value = object_.get(key);
    if (!value)
      return missing(key);
    std::optional<StringRef> text = value->getAsString();
    if (!text)
      return error(key, "expected a string");
    return text->str();
  }
  Expected<Fields> object(StringRef key) {
    seen_.insert(key);
    const json::Value *value = object_.get(key);
    if (!value)
      return missing(key);
    const json::Object *inner = value->getAsObject();
    if (!inner)
      return error(key, "expected an object");
    return Fields(*inner, qualified(key), file_);
  }
  /// Every member, for a map such as peak_flops.
  const json::Object &members() {
    for (const auto &member : object_)
      seen_.insert(member.first);
    return object_;
  }
  /// Refuses the fields that were not read.
  Error finish() const {
    for (const auto &member : object_)
      if (!seen_.contains(member.first))
        return createStringError(
            formatv("{0}: unknown field '{1}'", file_, qualified(member.first))
                .str());
    return Error::success();
  }
  std::string qualified(StringRef key) const {
    return path_.empty() ? key.str() : path_ + "." + key.str();
  }
  Error error(StringRef key, const Twine &message) const {
    return createStringError(
        formatv("{0}: {1}: {2}", file_, qualified(key), message.str()).str());
  }

private:
  Error missing(StringRef key) const {
    return createStringError(
        formatv("{0}: missing field '{1}'", file_, qualified(key)).str());
  }

  const json::Object &object_;
  std::string path_, file_;
  StringSet<> seen_;
};

/// Reads `field` of `fields` into `out`, returning on error.
#define READ(out, expr)                                                        \
  do {                                                                         \
    auto value = (expr);                                                       \
    if (!value)                                                                \
      return value.takeError();                                                \
    out = *value;                                                              \
  } while (false)

Error readDevice(Fields device, Cluster::Device &out) {
  READ(out.name, device.string("name"));
  Expected<Fields> peaks = device.object("peak_flops");
  if (!peaks)
    return peaks.takeError();
  for (const auto &member : peaks->members()) {
    StringRef dtype = member.first;
    if (dtype != "bf16" && dtype != "f16" && dtype != "f32")
      return peaks->error(dtype, "unknown element type (expected bf16, f16 "
                                 "or f32)");
    READ(out.peakFlops[dtype.str()], peaks->number(dtype));
  }
  if (!out.peakFlops.count("f32"))
    return peaks->error("f32", "missing (every device computes in f32)");
  READ(out.memoryBytes, device.number("memory_bytes"));
  READ(out.memoryBandwidth, device.number("memory_bandwidth"));
  READ(out.units, device.count("units"));
  return device.finish();
}

Error readCluster(const json::Object &root, StringRef file, Cluster &out) {
  Fields cluster(root, "", file.str());
  READ(out.name, cluster.string("name"));
  Expected<Fields> device = cluster.object("device");
  if (!device)
    return device.takeError();
  if (Error error = readDevice(*device, out.device))
    return error;
  Expected<Fields> node = cluster.object("node");
  if (!node)
    return node.takeError();
  READ(out.node.devices, node->count("devices"));
  READ(out.node.linkBandwidth, node->number("link_bandwidth"));
  READ(out.node.linkLatency, node->number("link_latency", 1.0, true));
  if (Error error = node->finish())
    return error;
  Expected<Fields> network = cluster.object("network");
  if (!network)
    return network.takeError();
  READ(out.network.bandwidth, network->number("bandwidth"));
  READ(out.network.latency, network->number("latency", 1.0, true));
  if (Error error = network->finish())
    return error;
  Expected<Fields> efficiency = cluster.object("efficiency");
  if (!efficiency)
    return efficiency.takeError();
  Cluster::Efficiency &e = out.efficiency;
  READ(e.gemm, efficiency->number("gemm", 1.0));
  READ(e.gemmHalfFlops, efficiency->number("gemm_half_flops", HUGE_VAL, true));
  READ(e.attention, efficiency->number("attention", 1.0));
  READ(e.memory, efficiency->number("memory", 1.0));
  READ(e.intraNode, efficiency->number("intra_node", 1.0));
  READ(e.interNode, efficiency->number("inter_node", 1.0));
  READ(e.launchSeconds, efficiency->number("launch_seconds", 1.0, true));
  READ(e.graphLaunchSeconds,
       efficiency->number("graph_launch_seconds", 1.0, true));
  if (Error error = efficiency->finish())
    return error;
  return cluster.finish();
}

#undef READ

} // namespace

double Cluster::peakFor(StringRef dtype) const {
  auto it = device.peakFlops.find(dtype.str());
  return it != device.peakFlops.end() ? it->second : device.peakFlops.at("f32");
}

Expected<Cluster> parseCluster(StringRef text, StringRef fileName) {
  Expected<json::Value> value = json::parse(text);
  if (!value)
    return createStringError(
        formatv("{0}: not JSON: {1}", fileName, toString(value.takeError()))
            .str());
  const json::Object *root = value->getAsObject();
  if (!root)
    return createStringError(
        formatv("{0}: expected a JSON object", fileName).str());
  Cluster cluster;
  if (Error error = readCluster(*root, fileName, cluster))
    return std::move(error);
  return cluster;
}

Expected<Cluster> loadCluster(StringRef pathOrName) {
  std::string path = pathOrName.str();
  // A shipped cluster by its name.
  if (!pathOrName.contains('/') && !pathOrName.ends_with(".json")) {
    SmallString<256> shipped(MEGC_CLUSTERS_DIR);
    sys::path::append(shipped, pathOrName + ".json");
    if (!sys::fs::exists(shipped))
      return createStringError(
          formatv("no cluster file '{0}' and no shipped cluster of that "
                  "name (in {1}: h100-sxm, h200, h800, a100-80gb, cpu)",
                  pathOrName, MEGC_CLUSTERS_DIR)
              .str());
    path = shipped.str().str();
  }
  ErrorOr<std::unique_ptr<MemoryBuffer>> file = MemoryBuffer::getFile(path);
  if (!file)
    return createStringError(formatv("cannot read cluster file '{0}': {1}",
                                     path, file.getError().message())
                                 .str());
  return parseCluster((*file)->getBuffer(), path);
}

std::string printCluster(const Cluster &c) {
  json::Object peaks;
  for (const auto &[dtype, flops] : c.device.peakFlops)
    peaks[dtype] = flops;
  json::Value root = json::Object{
      {"name", c.name},
      {"device", json::Object{{"name", c.device.name},
                              {"peak_flops", std::move(peaks)},
                              {"memory_bytes", c.device.memoryBytes},
                              {"memory_bandwidth", c.device.memoryBandwidth},
                              {"units", c.device.units}}},
      {"node", json::Object{{"devices", c.node.devices},
                            {"link_bandwidth", c.node.linkBandwidth},
                            {"link_latency", c.node.linkLatency}}},
      {"network", json::Object{{"bandwidth", c.network.bandwidth},
                               {"latency", c.network.latency}}},
      {"efficiency",
       json::Object{
           {"gemm", c.efficiency.gemm},
           {"gemm_half_flops", c.efficiency.gemmHalfFlops},
           {"attention", c.efficiency.attention},
           {"memory", c.efficiency.memory},
           {"intra_node", c.efficiency.intraNode},
           {"inter_node", c.efficiency.interNode},
           {"launch_seconds", c.efficiency.launchSeconds},
           {"graph_launch_seconds", c.efficiency.graphLaunchSeconds}}}};
  std::string text;
  raw_string_ostream os(text);
  os << formatv("{0:2}", root) << "\n";
  return text;
}

} // namespace megc::plan
