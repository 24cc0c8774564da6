// A small JSON reader and string quoting for the safetensors header.
#include "Json.h"

#include "TextCursor.h"

#include "Fail.h"

#include <cerrno>
#include <cstdlib>

namespace megrt {

const char *JsonValue::kindName() const {
  switch (kind) {
  case Kind::Null:
    return "null";
  case Kind::Bool:
    return "a boolean";
  case Kind::Number:
    return "a number";
  case Kind::String:
    return "a string";
  case Kind::Array:
    return "an array";
  case Kind::Object:
    return "an object";
  }
  return "?";
}

namespace {
// Untrusted files must not overflow the stack through deep nesting.
constexpr int kMaxDepth = 64;

class Parser : public TextCursor<Parser> {
public:
  explicit Parser(std::string_view text) : TextCursor(text) {}

  JsonValue parseDocument() {
    JsonValue value = parseValue(0);
    skipSpace();
    if (pos_ != text_.size())
      error("unexpected text after the value");
    return value;
  }

private:
  friend class TextCursor<Parser>;

  [[noreturn]] void error(const std::string &what) const {
    fail("invalid JSON at byte ", pos_, ": ", what);
  }

  JsonValue parseValue(int depth) {
    if (depth > kMaxDepth)
      error(concat("nesting deeper than ", kMaxDepth, " levels"));
    skipSpace();
    if (pos_ >= text_.size())
      error("unexpected end of text");
    JsonValue value;
    char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      value.kind = JsonValue::Kind::Object;
      parseMembers(value, depth);
    } else if (c == '[') {
      ++pos_;
      value.kind = JsonValue::Kind::Array;
      if (!consume(']')) {
        do
          value.elements.push_back(parseValue(depth + 1));
        while (consume(','));
        expect(']');
      }
    } else if (c == '"') {
      value.kind = JsonValue::Kind::String;
      value.text = parseString();
    } else if (consumeWord("true") || consumeWord("false")) {
      value.kind = JsonValue::Kind::Bool;
      value.boolean = c == 't';
    } else if (consumeWord("null")) {
      value.kind = JsonValue::Kind::Null;
    } else {
      value.kind = JsonValue::Kind::Number;
      value.text = parseNumber();
    }
    return value;
  }

  void parseMembers(JsonValue &object, int depth) {
    if (consume('}'))
      return;
    do {
      skipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"')
        error("expected a string key");
      size_t keyPos = pos_;
      std::string key = parseString();
      for (const auto &member : object.members)
        if (member.first == key) {
          pos_ = keyPos;
          error(concat("duplicate key ", quoteJson(key)));
        }
      expect(':');
      object.members.emplace_back(std::move(key), parseValue(depth + 1));
    } while (consume(','));
    expect('}');
  }

  unsigned parseHex4() {
    if (pos_ + 4 > text_.size())
      error("truncated \\u escape");
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_++];
      code <<= 4;
      if (c >= '0' && c <= '9')
        code |= c - '0';
      else if (c >= 'a' && c <= 'f')
        code |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        code |= c - 'A' + 10;
      else
        error("invalid hex digit in \\u escape");
    }
    return code;
  }

  static void appendUtf8(std::string &out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xc0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xe0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    }
  }

  unsigned parseEscapedCodePoint() {
    unsigned code = parseHex4();
    if (code >= 0xdc00 && code <= 0xdfff)
      error("unpaired low surrogate in \\u escape");
    if (code < 0xd800 || code > 0xdbff)
      return code;
    if (!consumeWord("\\u"))
      error("unpaired high surrogate in \\u escape");
    unsigned low = parseHex4();
    if (low < 0xdc00 || low > 0xdfff)
      error("high surrogate not followed by a low surrogate");
    return 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
  }

  std::string parseString() {
    ++pos_; // the opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size())
        error("unterminated string");
      char c = text_[pos_++];
      if (c == '"')
        return out;
      if (static_cast<unsigned char>(c) < 0x20)
        error("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size())
        error("unterminated escape");
      char escaped = text_[pos_++];
      switch (escaped) {
      case '"':
      case '\\':
      case '/':
        out += escaped;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u':
        appendUtf8(out, parseEscapedCodePoint());
        break;
      default:
        --pos_;
        error(concat("invalid escape '\\", escaped, "'"));
      }
    }
  }

  bool digitAt(size_t pos) const {
    return pos < text_.size() && text_[pos] >= '0' && text_[pos] <= '9';
  }

  std::string parseNumber() {
    size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-')
      ++pos_;
    if (!digitAt(pos_))
      error("expected a value");
    if (text_[pos_] == '0' && digitAt(pos_ + 1))
      error("leading zero in number");
    while (digitAt(pos_))
      ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (!digitAt(pos_))
        error("expected a digit after '.'");
      while (digitAt(pos_))
        ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-'))
        ++pos_;
      if (!digitAt(pos_))
        error("expected a digit in the exponent");
      while (digitAt(pos_))
        ++pos_;
    }
    return std::string(text_.substr(start, pos_ - start));
  }

};
} // namespace

JsonValue parseJson(std::string_view text) {
  return Parser(text).parseDocument();
}

int64_t jsonToInt64(const JsonValue &value, const std::string &what) {
  if (value.kind != JsonValue::Kind::Number)
    fail(what, ": expected an integer, found ", value.kindName());
  if (value.text.find_first_of(".eE") != std::string::npos)
    fail(what, ": expected an integer, found ", value.text);
  errno = 0;
  char *end = nullptr;
  long long parsed = std::strtoll(value.text.c_str(), &end, 10);
  if (errno == ERANGE || *end != '\0')
    fail(what, ": integer ", value.text, " is out of range");
  return parsed;
}

std::string quoteJson(std::string_view text) {
  static const char *const kHex = "0123456789abcdef";
  std::string out = "\"";
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20) {
      out += "\\u00";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

} // namespace megrt
