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

// Every message names the byte it stopped at, counted from 0.
TEST(Json, ErrorsNameTheByte) {
  EXPECT_EQ(parseError(""), "invalid JSON at byte 0: unexpected end of text");
  EXPECT_EQ(parseError("[1, 2"),
            "invalid JSON at byte 5: unexpected end of text");
  EXPECT_EQ(parseError("-01"), "invalid JSON at byte 2: leading zero in number");
  EXPECT_EQ(parseError("[0,01]"),
            "invalid JSON at byte 4: leading zero in number");
  EXPECT_EQ(parseError("[1 2]"), "invalid JSON at byte 3: expected ',' or ']'");
  EXPECT_EQ(parseError("[0 1]"), "invalid JSON at byte 3: expected ',' or ']'");
  EXPECT_EQ(parseError("{\"a\" 1}"), "invalid JSON at byte 5: expected ':'");
  EXPECT_EQ(parseError("{\"a\":1 \"b\"}"),
            "invalid JSON at byte 9: expected ',' or '}'");
  EXPECT_EQ(parseError("1."),
            "invalid JSON at byte 2: expected a digit after '.'");
  EXPECT_EQ(parseError("1e+"),
            "invalid JSON at byte 3: expected a digit in the exponent");
  EXPECT_EQ(parseError("[tru]"), "invalid JSON at byte 4: expected a value");
  EXPECT_EQ(parseError("\"\\x\""),
            "invalid JSON at byte 2: invalid escape '\\x'");
  EXPECT_EQ(parseError("\"\\udc00\""),
            "invalid JSON at byte 6: unpaired low surrogate in \\u escape");
  EXPECT_EQ(parseError("\"\\u12g4\""),
            "invalid JSON at byte 5: invalid hex digit in \\u escape");
  EXPECT_EQ(parseError("\"a\xff\""),
            "invalid JSON at byte 2: invalid UTF-8 in string");
  EXPECT_EQ(parseError("{\"k\": 1, \"k\": 2}"),
            "invalid JSON at byte 11: duplicate key \"k\"");
  EXPECT_EQ(parseError(std::string(65, '[') + std::string(65, ']')), "(parsed)");
  EXPECT_EQ(parseError(std::string(66, '[') + std::string(66, ']')),
            "invalid JSON at byte 65: nesting deeper than 64 levels");
}

TEST(Json, KeepsMembersInFileOrderInsideArrays) {
  JsonValue value = parseJson("[{\"z\": [], \"a\": {\"q\": 1}}, {}]");
  ASSERT_EQ(value.elements.size(), 2u);
  const JsonValue &first = value.elements[0];
  ASSERT_EQ(first.members.size(), 2u);
  EXPECT_EQ(first.members[0].first, "z");
  EXPECT_EQ(first.members[0].second.kind, JsonValue::Kind::Array);
  EXPECT_EQ(first.members[1].first, "a");
  EXPECT_EQ(first.members[1].second.members[0].first, "q");
  EXPECT_EQ(value.elements[1].kind, JsonValue::Kind::Object);
  EXPECT_TRUE(value.elements[1].members.empty());
}

TEST(Json, IntegersBeyond64BitsKeepTheirText) {
  JsonValue value = parseJson("[18446744073709551615, 18446744073709551616]");
  EXPECT_EQ(value.elements[0].text, "18446744073709551615");
  EXPECT_EQ(value.elements[1].text, "18446744073709551616");
}

} // namespace
} // namespace megrt::test
