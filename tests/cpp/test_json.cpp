#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "formats/json.h"

using gpt2::json_parse_bytes;
using gpt2::JsonValue;
using gpt2::parse_json;

namespace {

bool parse(const std::string& text, JsonValue* v, std::string* error) {
    return parse_json(text.data(), text.size(), v, error);
}

std::string parse_error(const std::string& text) {
    JsonValue v;
    std::string error;
    EXPECT_FALSE(parse(text, &v, &error)) << text;
    return error;
}

}  // namespace

TEST(Json, CountsItsValuesAgainstALimit) {
    JsonValue v;
    std::string error;
    const std::string text = "{\"a\": [1, \"x\", null, {\"b\": true}]}";  // 7 values
    EXPECT_TRUE(parse_json(text.data(), text.size(), &v, &error, 7)) << error;
    EXPECT_FALSE(parse_json(text.data(), text.size(), &v, &error, 6));
    EXPECT_EQ(error, "more than 6 values at byte 27");
    // the bound of what a parse holds covers every value's text at one byte a value, and grows with both
    EXPECT_GE(json_parse_bytes(1000, 100), 100 * sizeof(JsonValue) + 1000);
    EXPECT_LT(json_parse_bytes(1000, 100), json_parse_bytes(1000, 200));
    EXPECT_EQ(json_parse_bytes(50, 100), json_parse_bytes(50, 1000)) << "no more values than bytes";
}

TEST(Json, ParsesAllValueTypes) {
    JsonValue v;
    std::string error;
    ASSERT_TRUE(
        parse(" {\"a\": [1, -2.5e1, true, false, null], \"b\": {\"c\": \"x\\n\\u00e9\\ud83d\\ude00\"}} ", &v, &error))
        << error;
    ASSERT_EQ(v.type, JsonValue::Type::Object);
    const JsonValue* a = v.find("a");
    ASSERT_TRUE(a);
    ASSERT_EQ(a->array.size(), 5u);
    EXPECT_TRUE(a->array[0].is_integer);
    EXPECT_EQ(a->array[0].integer, 1);
    EXPECT_FALSE(a->array[1].is_integer);
    EXPECT_EQ(a->array[1].number, -25.0);
    EXPECT_TRUE(a->array[2].boolean);
    EXPECT_EQ(a->array[3].type, JsonValue::Type::Bool);
    EXPECT_EQ(a->array[4].type, JsonValue::Type::Null);
    EXPECT_EQ(v.find("b")->find("c")->string, "x\n\xC3\xA9\xF0\x9F\x98\x80");
    EXPECT_EQ(v.find("missing"), nullptr);
}

TEST(Json, LargeIntegersAreExact) {
    JsonValue v;
    std::string error;
    ASSERT_TRUE(parse("[9007199254740993, 9223372036854775807, 9223372036854775808]", &v, &error));
    EXPECT_EQ(v.array[0].integer, 9007199254740993LL);
    EXPECT_EQ(v.array[1].integer, INT64_MAX);
    EXPECT_FALSE(v.array[2].is_integer);  // does not fit in int64
}

TEST(Json, RejectsMalformedInput) {
    EXPECT_NE(parse_error("").find("unexpected end of input"), std::string::npos);
    EXPECT_NE(parse_error("{\"a\": 1,}").find("expected a string key"), std::string::npos);
    EXPECT_NE(parse_error("[1 2]").find("expected ',' or ']'"), std::string::npos);
    EXPECT_NE(parse_error("{\"a\" 1}").find("expected ':'"), std::string::npos);
    EXPECT_NE(parse_error("\"abc").find("unterminated string"), std::string::npos);
    EXPECT_NE(parse_error("\"a\\x\"").find("invalid escape"), std::string::npos);
    EXPECT_NE(parse_error("\"\\ud800\"").find("unpaired surrogate"), std::string::npos);
    EXPECT_NE(parse_error("01").find("trailing"), std::string::npos);
    EXPECT_NE(parse_error("1.").find("invalid number"), std::string::npos);
    EXPECT_NE(parse_error("-").find("invalid number"), std::string::npos);
    EXPECT_NE(parse_error("tru").find("unexpected character"), std::string::npos);
    EXPECT_NE(parse_error("{} {}").find("trailing"), std::string::npos);
    EXPECT_NE(parse_error(std::string("\"a\x01\"")).find("control character"), std::string::npos);
    EXPECT_NE(parse_error("{\"k\": 1, \"k\": 2}").find("duplicate key \"k\""), std::string::npos);
    EXPECT_NE(parse_error("[1, 2").find("at byte 5"), std::string::npos);
}

TEST(Json, NestingDepthIsBounded) {
    EXPECT_NE(parse_error(std::string(100000, '[')).find("nesting deeper than 64"), std::string::npos);
    JsonValue v;
    std::string error;
    const std::string ok = std::string(63, '[') + std::string(63, ']');
    EXPECT_TRUE(parse(ok, &v, &error)) << error;
}

TEST(Json, DoesNotReadPastTheGivenLength) {
    const char text[] = "[1, 2]garbage";
    JsonValue v;
    std::string error;
    EXPECT_TRUE(parse_json(text, 6, &v, &error)) << error;
    EXPECT_FALSE(parse_json(text, 5, &v, &error));
}
