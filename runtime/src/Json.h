// JSON values as the runtime reads them (safetensors headers, traces,
// Hugging Face indexes and configs), and string quoting.
#ifndef MEGRT_SRC_JSON_H
#define MEGRT_SRC_JSON_H

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace megrt {

struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Kind kind = Kind::Null;
  bool boolean = false;
  /// Numbers keep their text so that integers convert without passing
  /// through double (offsets above 2^53 stay exact).
  std::string text;
  std::vector<JsonValue> elements;
  /// Keys in file order; the parser rejects duplicates.
  std::vector<std::pair<std::string, JsonValue>> members;

  const char *kindName() const;
};

/// Throws megrt::Error "invalid JSON at byte N: ..." on malformed input,
/// nesting deeper than 64 levels or duplicate object keys.
JsonValue parseJson(std::string_view text);

/// The integer a Number holds. Throws megrt::Error naming `what` if the value
/// is not a number, not an integer, or out of int64 range.
int64_t jsonToInt64(const JsonValue &value, const std::string &what);

/// The member `key` of `object`, or null (not an object, or no such key).
const JsonValue *findJsonMember(const JsonValue &object, const char *key);
/// The member `key` of `object`, which must be of `kind`; errors name
/// `what`.
const JsonValue &requireJsonMember(const JsonValue &object, const char *key,
                                   JsonValue::Kind kind,
                                   const std::string &what);

/// `text` as a JSON string literal, quotes included.
std::string quoteJson(std::string_view text);

} // namespace megrt

#endif // MEGRT_SRC_JSON_H
