// Reading and writing single tensors in NumPy's .npy format.
#include "megrt/Npy.h"

#include "TextCursor.h"

#include "Fail.h"
#include "FileIO.h"

#include <cstring>
#include <map>
#include <optional>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "npy data is read and written as little-endian bytes");

namespace megrt {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
// NumPy aligns the data to 64 bytes since 1.14 (and accepts any alignment).
constexpr size_t kDataAlignment = 64;

struct DescrInfo {
  const char *descr;
  DType dtype;
};
// bf16 has no NumPy dtype: its raw bits are stored as '<u2'.
constexpr DescrInfo kDescrs[] = {{"<f4", DType::F32},
                                 {"<f2", DType::F16},
                                 {"<i4", DType::I32},
                                 {"<i8", DType::I64},
                                 {"<u2", DType::BF16}};

/// A value of the header: the Python literal of a dict with str keys and
/// str, bool or tuple-of-int values, which is all NumPy writes.
struct HeaderValue {
  enum class Kind { String, Bool, Tuple } kind;
  std::string text;
  bool boolean = false;
  Shape tuple;
};

class HeaderParser : public TextCursor<HeaderParser> {
public:
  HeaderParser(std::string_view text, std::string file)
      : TextCursor(text), file_(std::move(file)) {}

  std::map<std::string, HeaderValue> parseDict() {
    std::map<std::string, HeaderValue> dict;
    expect('{');
    while (!consume('}')) {
      std::string key = parseString();
      expect(':');
      if (!dict.emplace(key, parseValue()).second)
        error(concat("duplicate key '", key, "'"));
      if (!consume(',')) {
        expect('}');
        break;
      }
    }
    skipSpace();
    if (pos_ != text_.size())
      error("unexpected text after the dictionary");
    return dict;
  }

private:
  friend class TextCursor<HeaderParser>;

  [[noreturn]] void error(const std::string &what) const {
    fail(file_, ": malformed header at character ", pos_, ": ", what);
  }

  std::string parseString() {
    skipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      error("expected a string");
    char quote = text_[pos_++];
    size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos)
      error("unterminated string");
    std::string value(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return value;
  }

  int64_t parseInteger() {
    skipSpace();
    size_t start = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (__builtin_mul_overflow(value, 10, &value) ||
          __builtin_add_overflow(value, text_[pos_] - '0', &value))
        error("dimension out of range");
      ++pos_;
    }
    if (pos_ == start)
      error("expected a non-negative integer");
    // Python 2 wrote long integers with an L suffix.
    if (pos_ < text_.size() && text_[pos_] == 'L')
      ++pos_;
    return value;
  }

  HeaderValue parseValue() {
    skipSpace();
    HeaderValue value{HeaderValue::Kind::String, {}, false, {}};
    if (consumeWord("True")) {
      value.kind = HeaderValue::Kind::Bool;
      value.boolean = true;
    } else if (consumeWord("False")) {
      value.kind = HeaderValue::Kind::Bool;
    } else if (consume('(')) {
      value.kind = HeaderValue::Kind::Tuple;
      while (!consume(')')) {
        value.tuple.push_back(parseInteger());
        if (!consume(',')) {
          expect(')');
          break;
        }
      }
    } else if (pos_ < text_.size() &&
               (text_[pos_] == '\'' || text_[pos_] == '"')) {
      value.text = parseString();
    } else {
      error("expected a string, True, False or a tuple (structured dtypes "
            "are not supported)");
    }
    return value;
  }

  std::string file_;
};

const HeaderValue &headerField(const std::map<std::string, HeaderValue> &dict,
                               const char *key, HeaderValue::Kind kind,
                               const std::string &file) {
  auto found = dict.find(key);
  if (found == dict.end())
    fail(file, ": header has no '", key, "'");
  if (found->second.kind != kind)
    fail(file, ": header field '", key, "' has the wrong type");
  return found->second;
}

DType dtypeOfDescr(const std::string &descr, const std::string &file) {
  for (const DescrInfo &info : kDescrs)
    if (descr == info.descr)
      return info.dtype;
  if (!descr.empty() && descr[0] == '>')
    fail(file, ": big-endian data ('", descr, "') is not supported");
  fail(file, ": dtype '", descr,
       "' is not supported (supported: '<f4', '<f2', '<i4', '<i8', and '<u2' "
       "read as bf16 bits)");
}

const char *descrOf(DType dtype) {
  for (const DescrInfo &info : kDescrs)
    if (info.dtype == dtype)
      return info.descr;
  return "?";
}

uint32_t readLittleEndian(const uint8_t *bytes, size_t count) {
  uint32_t value = 0;
  for (size_t i = 0; i < count; ++i)
    value |= static_cast<uint32_t>(bytes[i]) << (8 * i);
  return value;
}

} // namespace

Tensor readNpy(const std::string &path) {
  std::vector<uint8_t> bytes = readFile(path);
  std::string file = concat("npy file '", path, "'");
  if (bytes.size() < kMagicBytes + 2 ||
      std::memcmp(bytes.data(), kMagic, kMagicBytes) != 0)
    fail(file, " is not a .npy file (no \\x93NUMPY magic)");
  uint8_t major = bytes[6], minor = bytes[7];
  if ((major != 1 && major != 2) || minor != 0)
    fail(file, ": format version ", int(major), ".", int(minor),
         " is not supported (supported: 1.0, 2.0)");
  size_t lengthBytes = major == 1 ? 2 : 4;
  size_t headerStart = kMagicBytes + 2 + lengthBytes;
  if (bytes.size() < headerStart)
    fail(file, " is truncated: ", bytes.size(), " bytes");
  size_t headerBytes = readLittleEndian(bytes.data() + 8, lengthBytes);
  if (headerBytes > bytes.size() - headerStart)
    fail(file, " is truncated: header length ", headerBytes, " exceeds the ",
         bytes.size() - headerStart, " bytes after it");

  std::string_view headerText(
      reinterpret_cast<const char *>(bytes.data() + headerStart), headerBytes);
  std::map<std::string, HeaderValue> header =
      HeaderParser(headerText, file).parseDict();
  DType dtype = dtypeOfDescr(
      headerField(header, "descr", HeaderValue::Kind::String, file).text, file);
  if (headerField(header, "fortran_order", HeaderValue::Kind::Bool, file)
          .boolean)
    fail(file, ": Fortran-order arrays are not supported (save a C-contiguous "
               "array, e.g. np.ascontiguousarray)");
  const Shape &shape =
      headerField(header, "shape", HeaderValue::Kind::Tuple, file).tuple;

  uint64_t expected = byteSize(dtype, shape, file);
  size_t dataStart = headerStart + headerBytes;
  uint64_t found = bytes.size() - dataStart;
  if (found < expected)
    fail(file, " is truncated: ", formatType(dtype, shape), " needs ", expected,
         " bytes of data, found ", found);
  if (found > expected)
    fail(file, ": ", found - expected, " unexpected bytes after the ",
         formatType(dtype, shape), " data");
  return Tensor::fromBytes(dtype, shape, bytes.data() + dataStart, expected);
}

void writeNpy(const std::string &path, const Tensor &tensor) {
  // Python's tuple syntax, as NumPy writes it: (), (3,), (2, 3).
  std::string shape = "(";
  for (size_t i = 0; i < tensor.shape().size(); ++i)
    shape += (i ? ", " : "") + std::to_string(tensor.shape()[i]);
  shape += tensor.shape().size() == 1 ? ",)" : ")";
  std::string header =
      concat("{'descr': '", descrOf(tensor.dtype()),
             "', 'fortran_order': False, 'shape': ", shape, ", }");

  size_t lengthBytes = 2;
  auto padded = [&] {
    size_t unpadded = kMagicBytes + 2 + lengthBytes + header.size() + 1;
    return header.size() + 1 +
           (kDataAlignment - unpadded % kDataAlignment) % kDataAlignment;
  };
  if (padded() > 0xffff)
    lengthBytes = 4;
  size_t headerBytes = padded();
  header.append(headerBytes - header.size() - 1, ' ');
  header += '\n';

  std::string preamble(kMagic, kMagicBytes);
  preamble += static_cast<char>(lengthBytes == 2 ? 1 : 2);
  preamble += '\0';
  for (size_t i = 0; i < lengthBytes; ++i)
    preamble += static_cast<char>((headerBytes >> (8 * i)) & 0xff);
  writeFile(path, {{preamble.data(), preamble.size()},
                   {header.data(), header.size()},
                   {tensor.data(), tensor.sizeBytes()}});
}

} // namespace megrt
