// The safetensors header and trace reader: nlohmann-json's SAX parser builds
// a JsonValue; its errors are reworded into the runtime's own messages.
#include "Json.h"

#include "Fail.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdlib>
#include <iterator>

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

/// A pointer into the text that records how far the parser has read, so
/// that errors raised from the SAX callbacks can say where they are.
class TrackedIterator {
public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char *;
  using reference = const char &;

  TrackedIterator(const char *at, size_t *read, const char *begin)
      : at_(at), read_(read), begin_(begin) {}
  reference operator*() const { return *at_; }
  TrackedIterator &operator++() {
    ++at_;
    *read_ = static_cast<size_t>(at_ - begin_);
    return *this;
  }
  bool operator==(const TrackedIterator &other) const {
    return at_ == other.at_;
  }
  bool operator!=(const TrackedIterator &other) const {
    return at_ != other.at_;
  }

private:
  const char *at_;
  size_t *read_;
  const char *begin_;
};

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

/// Builds the JsonValue tree; on failure records the runtime's message and
/// the byte it names.
class Builder : public nlohmann::json_sax<nlohmann::json> {
public:
  Builder(std::string_view text, const size_t *read)
      : text_(text), read_(read) {}

  bool null() override { return add(JsonValue{}); }
  bool boolean(bool value) override {
    JsonValue v;
    v.kind = JsonValue::Kind::Bool;
    v.boolean = value;
    return add(std::move(v));
  }
  bool number_integer(number_integer_t value) override {
    return addNumber(std::to_string(value));
  }
  bool number_unsigned(number_unsigned_t value) override {
    return addNumber(std::to_string(value));
  }
  // Integers beyond 64 bits arrive here too, with their text.
  bool number_float(number_float_t, const string_t &text) override {
    return addNumber(text);
  }
  bool string(string_t &value) override {
    JsonValue v;
    v.kind = JsonValue::Kind::String;
    v.text = std::move(value);
    return add(std::move(v));
  }
  bool binary(binary_t &) override { return refuse("binary value"); }
  bool start_object(std::size_t) override {
    return open(JsonValue::Kind::Object);
  }
  bool key(string_t &key) override {
    for (const auto &member : stack_.back().members)
      if (member.first == key)
        return refuse(concat("duplicate key ", quoteJson(key)));
    key_ = std::move(key);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override {
    return open(JsonValue::Kind::Array);
  }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string &lastToken,
                   const nlohmann::detail::exception &error) override {
    // nlohmann counts the byte it failed on (or the end) as read.
    errorAt_ = position > 0 ? position - 1 : 0;
    message_ = reword(error.what(), lastToken);
    return false;
  }

  JsonValue take() { return std::move(result_); }
  size_t errorAt() const { return errorAt_; }
  const std::string &message() const { return message_; }

private:
  bool refuse(std::string message) {
    errorAt_ = *read_ > 0 ? *read_ - 1 : 0;
    message_ = std::move(message);
    return false;
  }

  bool addNumber(std::string text) {
    JsonValue v;
    v.kind = JsonValue::Kind::Number;
    v.text = std::move(text);
    return add(std::move(v));
  }

  bool add(JsonValue value) {
    if (stack_.empty())
      result_ = std::move(value);
    else if (stack_.back().kind == JsonValue::Kind::Array)
      stack_.back().elements.push_back(std::move(value));
    else
      stack_.back().members.emplace_back(std::move(key_), std::move(value));
    return true;
  }

  bool open(JsonValue::Kind kind) {
    if (stack_.size() > static_cast<size_t>(kMaxDepth))
      return refuse(concat("nesting deeper than ", kMaxDepth, " levels"));
    // A container's key is taken now: its members bring their own.
    keys_.push_back(std::move(key_));
    stack_.emplace_back();
    stack_.back().kind = kind;
    return true;
  }

  bool close() {
    JsonValue done = std::move(stack_.back());
    stack_.pop_back();
    key_ = std::move(keys_.back());
    keys_.pop_back();
    return add(std::move(done));
  }

  /// The byte before `at` starts a number with a zero ("01", "[-01]").
  bool afterLeadingZero(size_t at) const {
    if (at == 0 || at > text_.size() || text_[at - 1] != '0')
      return false;
    if (at == 1)
      return true;
    char before = text_[at - 2];
    return !(before >= '0' && before <= '9') && before != '.' &&
           before != 'e' && before != 'E' && before != '+';
  }

  /// nlohmann's explanation in the words the runtime has always used.
  std::string reword(std::string_view what,
                     const std::string &lastToken) const {
    if (contains(what, "unexpected number literal") &&
        afterLeadingZero(errorAt_ + 1 - lastToken.size()))
      return "leading zero in number";
    if (contains(what, "; expected end of input"))
      return "unexpected text after the value";
    if (contains(what, "missing closing quote"))
      return "unterminated string";
    if (contains(what, "control character"))
      return "control character in string";
    if (contains(what, "U+D800..U+DBFF must be followed"))
      return "unpaired high surrogate in \\u escape";
    if (contains(what, "U+DC00..U+DFFF must follow"))
      return "unpaired low surrogate in \\u escape";
    if (contains(what, "must be followed by 4 hex digits"))
      return "invalid hex digit in \\u escape";
    if (contains(what, "forbidden character after backslash"))
      return concat("invalid escape '\\",
                    lastToken.empty() ? '?' : lastToken.back(), "'");
    if (contains(what, "ill-formed UTF-8"))
      return "invalid UTF-8 in string";
    if (contains(what, "expected digit after '.'"))
      return "expected a digit after '.'";
    if (contains(what, "expected digit after exponent"))
      return "expected a digit in the exponent";
    if (contains(what, "unexpected end of input"))
      return "unexpected end of text";
    if (contains(what, "parsing object key"))
      return "expected a string key";
    if (contains(what, "parsing object separator"))
      return "expected ':'";
    if (contains(what, "parsing object"))
      return "expected ',' or '}'";
    if (contains(what, "parsing array"))
      return "expected ',' or ']'";
    if (contains(what, "parsing value"))
      return "expected a value";
    // Anything else: nlohmann's own words, without its location prefix.
    size_t colon = what.find(": ");
    return std::string(colon == std::string_view::npos ? what
                                                        : what.substr(colon + 2));
  }

  std::string_view text_;
  const size_t *read_;
  JsonValue result_;
  std::vector<JsonValue> stack_;
  std::vector<std::string> keys_;
  std::string key_;
  size_t errorAt_ = 0;
  std::string message_;
};
} // namespace

JsonValue parseJson(std::string_view text) {
  size_t read = 0;
  const char *begin = text.data();
  Builder builder(text, &read);
  bool parsed = nlohmann::json::sax_parse(
      TrackedIterator(begin, &read, begin),
      TrackedIterator(begin + text.size(), &read, begin), &builder);
  if (!parsed)
    fail("invalid JSON at byte ", builder.errorAt(), ": ", builder.message());
  return builder.take();
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

// Bytes pass through as they are: the names quoted in messages are shown as
// the file spells them.
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

const JsonValue *findJsonMember(const JsonValue &object, const char *key) {
  for (const auto &[name, value] : object.members)
    if (name == key)
      return &value;
  return nullptr;
}

const JsonValue &requireJsonMember(const JsonValue &object, const char *key,
                                   JsonValue::Kind kind,
                                   const std::string &what) {
  if (object.kind != JsonValue::Kind::Object)
    fail(what, " is ", object.kindName(), ", expected an object");
  const JsonValue *value = findJsonMember(object, key);
  if (!value)
    fail(what, ": missing \"", key, "\"");
  if (value->kind != kind) {
    JsonValue expected;
    expected.kind = kind;
    fail(what, ": \"", key, "\" is ", value->kindName(), ", expected ",
         expected.kindName());
  }
  return *value;
}

} // namespace megrt
