// The JSON reader behind the safetensors header.
#include "Json.h"
#include "megrt/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megrt::test {
namespace {

using ::testing::HasSubstr;

std::string parseError(std::string_view text) {
  try {
    parseJson(text);
  } catch (const Error &error) {
    return error.what();
  }
  return "(parsed)";
}

TEST(Json, ParsesNestedValues) {
  JsonValue value = parseJson(
      " {\"a\": [1, -2, 3.5e2, true, false, null], \"b\": {\"c\": \"d\"}} ");
  ASSERT_EQ(value.kind, JsonValue::Kind::Object);
  ASSERT_EQ(value.members.size(), 2u);
  EXPECT_EQ(value.members[0].first, "a");
  const JsonValue &array = value.members[0].second;
  ASSERT_EQ(array.elements.size(), 6u);
  EXPECT_EQ(jsonToInt64(array.elements[1], "x"), -2);
  EXPECT_EQ(array.elements[2].text, "3.5e2");
  EXPECT_TRUE(array.elements[3].boolean);
  EXPECT_EQ(array.elements[5].kind, JsonValue::Kind::Null);
  EXPECT_EQ(value.members[1].second.members[0].second.text, "d");
}

TEST(Json, DecodesEscapes) {
  JsonValue value = parseJson(R"("q\"b\\s\/n\nt\tu\u00e9\ud83d\ude00")");
  EXPECT_EQ(value.text, "q\"b\\s/n\nt\tu\xc3\xa9\xf0\x9f\x98\x80");
}

TEST(Json, QuoteRoundTrips) {
  std::string text = "a\"b\\c\n\x01z\xc3\xa9";
  EXPECT_EQ(parseJson(quoteJson(text)).text, text);
}

TEST(Json, IntegersStayExact) {
  EXPECT_EQ(jsonToInt64(parseJson("9007199254740993"), "x"),
            9007199254740993ll);
  EXPECT_EQ(jsonToInt64(parseJson("-9223372036854775808"), "x"), INT64_MIN);
  EXPECT_THAT(
      [] {
        try {
          jsonToInt64(parseJson("9223372036854775808"), "offset");
        } catch (const Error &error) {
          return std::string(error.what());
        }
        return std::string();
      }(),
      HasSubstr("offset: integer 9223372036854775808 is out of range"));
}

TEST(Json, RejectsMalformedText) {
  EXPECT_EQ(parseError("{\"a\": 1,}"), "invalid JSON at byte 8: expected a "
                                       "string key");
  EXPECT_EQ(parseError("{\"a\": 1} x"),
            "invalid JSON at byte 9: unexpected text after the value");
  EXPECT_THAT(parseError("{\"a\": 1, \"a\": 2}"),
              HasSubstr("duplicate key \"a\""));
  EXPECT_THAT(parseError("\"abc"), HasSubstr("unterminated string"));
  EXPECT_THAT(parseError("\"a\x01\""), HasSubstr("control character"));
  EXPECT_THAT(parseError("\"\\ud800\""), HasSubstr("unpaired high surrogate"));
  EXPECT_THAT(parseError("\"\\x\""), HasSubstr("invalid escape"));
  EXPECT_THAT(parseError("01"), HasSubstr("leading zero"));
  EXPECT_THAT(parseError("-"), HasSubstr("expected a value"));
  EXPECT_THAT(parseError(""), HasSubstr("unexpected end of text"));
  EXPECT_THAT(parseError(std::string(100, '[') + std::string(100, ']')),
              HasSubstr("nesting deeper than 64 levels"));
}

} // namespace
} // namespace megrt::test
