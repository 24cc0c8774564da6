// Reading and writing tensors in the safetensors format.
#include "megrt/Safetensors.h"

#include "Fail.h"
#include "FileIO.h"
#include "Json.h"
#include "TensorSink.h"

#include <algorithm>
#include <cstring>
#include <optional>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian and copied as is");

namespace megrt {
namespace {

constexpr size_t kLengthBytes = 8;
// The reference implementation refuses headers above 100 MB as well.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

const char *safetensorsDType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "F32";
  case DType::BF16:
    return "BF16";
  case DType::F16:
    return "F16";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  }
  return "?";
}

std::optional<DType> parseSafetensorsDType(const std::string &name) {
  for (DType dtype :
       {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64})
    if (name == safetensorsDType(dtype))
      return dtype;
  return std::nullopt;
}

/// Whether `text` is valid UTF-8 (shortest forms, no surrogates) without
/// NUL bytes: what a tensor name may hold.
bool isCleanName(const std::string &text) {
  size_t i = 0;
  while (i < text.size()) {
    auto byte = static_cast<unsigned char>(text[i]);
    if (byte == 0)
      return false;
    size_t length = byte < 0x80 ? 1 : (byte >> 5) == 6 ? 2
                                  : (byte >> 4) == 14  ? 3
                                  : (byte >> 3) == 30  ? 4
                                                       : 0;
    if (length == 0 || i + length > text.size())
      return false;
    uint32_t code = length == 1 ? byte : byte & (0x7f >> length);
    for (size_t k = 1; k < length; ++k) {
      auto next = static_cast<unsigned char>(text[i + k]);
      if ((next >> 6) != 2)
        return false;
      code = (code << 6) | (next & 0x3f);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kMin[length] || code > 0x10ffff ||
        (code >= 0xd800 && code <= 0xdfff))
      return false;
    i += length;
  }
  return true;
}

struct TensorEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin;
  uint64_t end;
};

TensorEntry parseTensorEntry(const std::string &name, const JsonValue &info,
                             uint64_t dataBytes, const std::string &what) {
  if (info.kind != JsonValue::Kind::Object)
    fail(what, " is ", info.kindName(), ", expected an object");
  const std::string &dtypeText =
      requireJsonMember(info, "dtype", JsonValue::Kind::String, what).text;
  std::optional<DType> dtype = parseSafetensorsDType(dtypeText);
  if (!dtype)
    fail(what, " has dtype '", dtypeText,
         "', which megrt does not support (supported: F32, BF16, F16, I32, "
         "I64)");
  Shape shape;
  for (const JsonValue &dim :
       requireJsonMember(info, "shape", JsonValue::Kind::Array, what).elements)
    shape.push_back(jsonToInt64(dim, what + " shape"));
  const JsonValue &offsets =
      requireJsonMember(info, "data_offsets", JsonValue::Kind::Array, what);
  if (offsets.elements.size() != 2)
    fail(what, ": \"data_offsets\" has ", offsets.elements.size(),
         " elements, expected 2");
  int64_t begin = jsonToInt64(offsets.elements[0], what + " data_offsets");
  int64_t end = jsonToInt64(offsets.elements[1], what + " data_offsets");
  if (begin < 0 || end < begin || static_cast<uint64_t>(end) > dataBytes)
    fail(what, ": data_offsets [", begin, ", ", end,
         "] are out of range for a data section of ", dataBytes, " bytes");
  uint64_t expected = byteSize(*dtype, shape, what);
  if (static_cast<uint64_t>(end - begin) != expected)
    fail(what, ": data_offsets [", begin, ", ", end, "] span ", end - begin,
         " bytes, but ", formatType(*dtype, shape), " needs ", expected);
  return {name, *dtype, shape, static_cast<uint64_t>(begin),
          static_cast<uint64_t>(end)};
}

/// Like the reference implementation, require the tensors to tile the data
/// section: no gaps, no overlaps, nothing after the last one.
void checkTiling(std::vector<TensorEntry> entries, uint64_t dataBytes,
                 const std::string &file) {
  std::sort(entries.begin(), entries.end(),
            [](const TensorEntry &a, const TensorEntry &b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t expected = 0;
  for (const TensorEntry &entry : entries) {
    if (entry.begin != expected)
      fail(file, ": tensor '", entry.name, "' starts at data byte ",
           entry.begin, ", expected ", expected,
           " (tensors must not overlap or leave gaps)");
    expected = entry.end;
  }
  if (expected != dataBytes)
    fail(file, ": tensors cover ", expected, " bytes of a data section of ",
         dataBytes, " bytes");
}

} // namespace

namespace {

/// A file's tensors as its header lays them out, checked against its size.
struct Layout {
  std::vector<TensorEntry> entries;
  uint64_t dataStart = 0;
};

Layout readLayout(const InputFile &input, const std::string &path,
                  std::map<std::string, std::string> *metadata) {
  uint64_t fileBytes = input.size();
  std::string file = concat("safetensors file '", path, "'");
  if (fileBytes < kLengthBytes)
    fail(file, " is truncated: ", fileBytes,
         " bytes, expected at least 8 for the header length");
  uint64_t headerBytes;
  input.read(0, &headerBytes, kLengthBytes);
  if (headerBytes > kMaxHeaderBytes)
    fail(file, ": header length ", headerBytes, " exceeds the limit of ",
         kMaxHeaderBytes, " bytes");
  if (headerBytes > fileBytes - kLengthBytes)
    fail(file, " is truncated: header length ", headerBytes, " exceeds the ",
         fileBytes - kLengthBytes, " bytes after the length field");
  uint64_t dataBytes = fileBytes - kLengthBytes - headerBytes;
  Layout layout;
  layout.dataStart = kLengthBytes + headerBytes;
  std::string headerText(headerBytes, '\0');
  input.read(kLengthBytes, headerText.data(), headerBytes);

  JsonValue header;
  try {
    header = parseJson(headerText);
  } catch (const Error &error) {
    fail(file, ": header: ", error.what());
  }
  if (header.kind != JsonValue::Kind::Object)
    fail(file, ": header is ", header.kindName(), ", expected an object");

  for (const auto &[name, info] : header.members) {
    if (name == "__metadata__") {
      if (!metadata)
        continue;
      if (info.kind != JsonValue::Kind::Object)
        fail(file, ": \"__metadata__\" is ", info.kindName(),
             ", expected an object of strings");
      for (const auto &[key, value] : info.members) {
        if (value.kind != JsonValue::Kind::String)
          fail(file, ": \"__metadata__\"[\"", key, "\"] is ",
               value.kindName(), ", expected a string");
        (*metadata)[key] = value.text;
      }
      continue;
    }
    if (name.empty() || !isCleanName(name))
      fail(file, ": a tensor name is ", name.empty() ? "empty" : "not valid "
           "UTF-8 or holds a NUL byte", " (", quoteJson(name), ")");
    layout.entries.push_back(parseTensorEntry(
        name, info, dataBytes, concat(file, ": tensor '", name, "'")));
  }
  checkTiling(layout.entries, dataBytes, file);
  return layout;
}

} // namespace

std::map<std::string, Tensor>
readSafetensors(const std::string &path,
                std::map<std::string, std::string> *metadata) {
  // The header first, then each tensor read straight into its storage: a
  // checkpoint is never held twice.
  InputFile input(path);
  Layout layout = readLayout(input, path, metadata);
  std::map<std::string, Tensor> tensors;
  for (const TensorEntry &entry : layout.entries) {
    Tensor tensor(entry.dtype, entry.shape);
    input.read(layout.dataStart + entry.begin, tensor.data(),
               entry.end - entry.begin);
    tensors.emplace(entry.name, std::move(tensor));
  }
  return tensors;
}

void checkSafetensors(const std::string &path) {
  InputFile input(path);
  readLayout(input, path, nullptr);
}

void writeSafetensors(const std::string &path,
                      const std::map<std::string, Tensor> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  std::vector<std::pair<std::string, const Tensor *>> views;
  for (const auto &[name, tensor] : tensors)
    views.emplace_back(name, &tensor);
  writeSafetensors(path, views, metadata);
}

void writeSafetensors(
    const std::string &path,
    const std::vector<std::pair<std::string, const Tensor *>> &tensors,
    const std::map<std::string, std::string> &metadata) {
  std::vector<SafetensorsEntry> entries;
  entries.reserve(tensors.size());
  for (const auto &[name, tensor] : tensors)
    entries.push_back({name, tensor->dtype(), tensor->shape(), tensor->data()});
  writeSafetensors(path, entries, metadata);
}

uint64_t TensorInfo::bytes() const { return byteSize(dtype, shape, name); }

std::vector<size_t> safetensorsOrder(const std::vector<TensorInfo> &tensors) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tensors[a].name < tensors[b].name;
  });
  return order;
}

namespace {

class SafetensorsSink : public TensorSink {
public:
  SafetensorsSink(const std::string &path,
                  const std::vector<TensorInfo> &tensors,
                  const std::map<std::string, std::string> &metadata,
                  std::vector<std::pair<uint64_t, uint64_t>> *ranges)
      : path_(path), ranges_(ranges) {
    std::vector<size_t> order = safetensorsOrder(tensors);
    for (size_t i = 1; i < order.size(); ++i)
      if (tensors[order[i]].name == tensors[order[i - 1]].name)
        fail("cannot write '", path, "': tensor '", tensors[order[i]].name,
             "' is given twice");
    std::string header = "{";
    if (!metadata.empty()) {
      header += "\"__metadata__\":{";
      bool first = true;
      for (const auto &[key, value] : metadata) {
        header += (first ? "" : ",") + quoteJson(key) + ":" + quoteJson(value);
        first = false;
      }
      header += "}";
    }
    std::vector<std::pair<uint64_t, uint64_t>> spans(tensors.size());
    uint64_t offset = 0;
    for (size_t i : order) {
      const TensorInfo &tensor = tensors[i];
      if (tensor.name == "__metadata__")
        fail("cannot write '", path,
             "': \"__metadata__\" is reserved and cannot name a tensor");
      if (header.size() > 1)
        header += ",";
      std::string shape;
      for (int64_t dim : tensor.shape)
        shape += (shape.empty() ? "" : ",") + std::to_string(dim);
      uint64_t bytes = tensor.bytes();
      header +=
          concat(quoteJson(tensor.name), ":{\"dtype\":\"",
                 safetensorsDType(tensor.dtype), "\",\"shape\":[", shape,
                 "],\"data_offsets\":[", offset, ",", offset + bytes, "]}");
      spans[i] = {offset, offset + bytes};
      sizes_.push_back(bytes);
      offset += bytes;
    }
    header += "}";
    // Pad with spaces so that the data section starts 8-byte aligned, as
    // the reference writer does.
    header.append((kLengthBytes - header.size() % kLengthBytes) % kLengthBytes,
                  ' ');
    uint64_t headerBytes = header.size();
    for (auto &[begin, end] : spans) {
      begin += kLengthBytes + headerBytes;
      end += kLengthBytes + headerBytes;
    }
    spans_ = std::move(spans);
    file_ = std::make_unique<OutputFile>(path);
    file_->write(&headerBytes, kLengthBytes);
    file_->write(header.data(), header.size());
  }

  void add(const void *data) override {
    if (next_ >= sizes_.size())
      fail("cannot write '", path_, "': more tensors than its header lists");
    file_->write(data, sizes_[next_++]);
  }

  void finish() override {
    if (next_ != sizes_.size())
      fail("cannot write '", path_, "': ", sizes_.size() - next_,
           " of its tensors were not given");
    file_->commit();
    if (ranges_)
      *ranges_ = spans_;
  }

private:
  std::string path_;
  std::vector<std::pair<uint64_t, uint64_t>> *ranges_;
  std::vector<std::pair<uint64_t, uint64_t>> spans_;
  /// The data sizes in the file's order.
  std::vector<uint64_t> sizes_;
  size_t next_ = 0;
  std::unique_ptr<OutputFile> file_;
};

} // namespace

std::unique_ptr<TensorSink>
openSafetensors(const std::string &path, const std::vector<TensorInfo> &tensors,
                const std::map<std::string, std::string> &metadata,
                std::vector<std::pair<uint64_t, uint64_t>> *ranges) {
  return std::make_unique<SafetensorsSink>(path, tensors, metadata, ranges);
}

std::vector<std::pair<uint64_t, uint64_t>>
writeSafetensors(const std::string &path,
                 const std::vector<SafetensorsEntry> &entries,
                 const std::map<std::string, std::string> &metadata) {
  std::vector<TensorInfo> tensors;
  tensors.reserve(entries.size());
  for (const SafetensorsEntry &entry : entries)
    tensors.push_back({entry.name, entry.dtype, entry.shape});
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  std::unique_ptr<TensorSink> sink =
      openSafetensors(path, tensors, metadata, &ranges);
  for (size_t i : safetensorsOrder(tensors))
    sink->add(entries[i].data);
  sink->finish();
  return ranges;
}

} // namespace megrt
