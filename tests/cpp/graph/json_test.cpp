// Tests for graph/json.h: parsing, dumping, error positions and float formatting.
#include "coil/graph/json.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

namespace coil::graph {
namespace {

// The message of the JsonError that parsing `text` throws ("" when it parses).
std::string parse_error(const std::string& text) {
  try {
    parse_json(text);
  } catch (const JsonError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonParse, Scalars) {
  EXPECT_TRUE(parse_json("null").is_null());
  EXPECT_EQ(parse_json("true").as_bool(), true);
  EXPECT_EQ(parse_json(" false ").as_bool(), false);
  EXPECT_EQ(parse_json("0").as_int(), 0);
  EXPECT_EQ(parse_json("-12").as_int(), -12);
  EXPECT_TRUE(parse_json("1.5").is_double());
  EXPECT_EQ(parse_json("1.5").as_double(), 1.5);
  EXPECT_TRUE(parse_json("1e3").is_double());
  EXPECT_EQ(parse_json("1E+3").as_double(), 1000.0);
  EXPECT_EQ(parse_json("-0.25e-2").as_double(), -0.0025);
  EXPECT_EQ(parse_json("\"hi\"").as_string(), "hi");
  EXPECT_EQ(parse_json("7").as_double(), 7.0);  // ints read as doubles on request
}

TEST(JsonParse, Int64Limits) {
  EXPECT_EQ(parse_json("9223372036854775807").as_int(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(parse_json("-9223372036854775808").as_int(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(parse_error("9223372036854775808"),
            "1:1: integer 9223372036854775808 does not fit in 64 bits");
  EXPECT_EQ(parse_error("1e999"), "1:1: number 1e999 is out of the range of a double");
}

TEST(JsonParse, StringEscapesAndUnicode) {
  Json s = parse_json(R"("q\" b\\ s\/ \b\f\n\r\t \u00e9 \ud83d\ude00 é")");
  EXPECT_EQ(s.as_string(), "q\" b\\ s/ \b\f\n\r\t \xC3\xA9 \xF0\x9F\x98\x80 \xC3\xA9");
}

TEST(JsonParse, ObjectsKeepInsertionOrder) {
  Json o = parse_json(R"({"z": 1, "a": [true, null], "m": {}})");
  ASSERT_TRUE(o.is_object());
  EXPECT_EQ(o.keys(), (std::vector<std::string>{"z", "a", "m"}));
  EXPECT_EQ(o.find("a")->items().size(), 2u);
  EXPECT_EQ(o.find("nope"), nullptr);
  EXPECT_EQ(dump_json(o), R"({"z":1,"a":[true,null],"m":{}})");
}

TEST(JsonParse, ErrorsGiveLineAndColumn) {
  EXPECT_EQ(parse_error("{\n  \"a\": 1,\n  \"b\" 2\n}"),
            "3:7: expected ':' after object key, found '2'");
  // Columns count characters, not bytes.
  EXPECT_EQ(parse_error("[\"é\", x]"), "1:7: unexpected 'x'; expected a JSON value");
}

TEST(JsonParse, MalformedInputs) {
  struct Case {
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"", "1:1: unexpected end of input; expected a JSON value"},
      {"   ", "1:4: unexpected end of input; expected a JSON value"},
      {"[1, 2", "1:6: unexpected end of input inside an array (missing ']')"},
      {"{\"a\": 1", "1:8: unexpected end of input inside an object (missing '}')"},
      {"{\"a\"", "1:5: unexpected end of input inside an object (missing '}')"},
      {"\"abc", "1:1: unterminated string"},
      {"[1, 2,]", "1:7: trailing ',' before ']' in array"},
      {"{\"a\": 1,}", "1:9: trailing ',' before '}' in object"},
      {"{1: 2}", "1:2: expected a string key in object, found '1'"},
      {"[1 2]", "1:4: expected ',' or ']' in array, found '2'"},
      {"{\"a\": 1 \"b\": 2}", "1:9: expected ',' or '}' in object, found '\"'"},
      {"01", "1:1: numbers cannot have leading zeros"},
      {"1.", "1:3: expected a digit after '.' in number"},
      {"1e", "1:3: expected a digit in number exponent"},
      {"-", "1:2: expected a digit after '-'"},
      {"NaN", "1:1: unexpected 'N'; expected a JSON value"},
      {"tru", "1:1: invalid literal; expected 'true'"},
      {"nul", "1:1: invalid literal; expected 'null'"},
      {"// c\n1", "1:1: unexpected '/'; expected a JSON value"},
      {"1 2", "1:3: unexpected '2' after the end of the JSON value"},
      {"{\"a\": 1, \"a\": 2}", "1:10: duplicate key \"a\" in object"},
      {"\"\\x\"", "1:2: invalid escape sequence in string"},
      {"\"\\ud800\"", "1:2: high surrogate in \\u escape not followed by a low surrogate"},
      {"\"\\udc00\"", "1:2: unpaired low surrogate in \\u escape"},
      {"\"\\u12g4\"", "1:6: expected 4 hex digits after \\u"},
      {"\"a\nb\"", "1:3: control character in string (must be escaped)"},
      {"\"\xff\"", "1:2: invalid UTF-8 in string"},
      {"\"\xc3\"", "1:2: invalid UTF-8 in string"},
      {"\"\xed\xa0\x80\"", "1:2: invalid UTF-8 in string"},  // an encoded surrogate
      {"\xef\xbb\xbf{}", "1:1: unexpected byte 0xEF; expected a JSON value"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(parse_error(c.text), c.error) << "input: " << c.text;
  }
}

TEST(JsonParse, DepthLimit) {
  std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_EQ(parse_error(ok), "");
  std::string deep = std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_EQ(parse_error(deep), "1:257: JSON nested deeper than 256 levels");
  // Far deeper input must fail cleanly, not overflow the stack.
  EXPECT_NE(parse_error(std::string(1000000, '[')), "");
}

TEST(JsonValue, AccessorsCheckTypes) {
  Json v = Json(3);
  EXPECT_THROW(v.as_string(), JsonError);
  EXPECT_THROW(v.push_back(1), JsonError);
  EXPECT_THROW(Json("x").as_int(), JsonError);
  try {
    Json(true).as_int();
    FAIL() << "expected a throw";
  } catch (const JsonError& e) {
    EXPECT_STREQ(e.what(), "expected a JSON integer, found bool");
  }
}

TEST(JsonValue, SetReplacesAndAppends) {
  Json o = Json::object();
  o.set("b", 1);
  o.set("a", 2);
  o.set("b", 3);
  EXPECT_EQ(dump_json(o), R"({"b":3,"a":2})");
  EXPECT_EQ(o, parse_json(R"({"b": 3, "a": 2})"));
  EXPECT_FALSE(o == parse_json(R"({"a": 2, "b": 3})"));
}

TEST(JsonDump, EscapesStrings) {
  Json s = Json(std::string("a\"b\\c\n\x01\x7f é \xff"));
  EXPECT_EQ(dump_json(s), "\"a\\\"b\\\\c\\n\\u0001\x7f \xC3\xA9 \xEF\xBF\xBD\"");
}

TEST(JsonDump, Numbers) {
  Json a = Json::array({Json(1), Json(1.0), Json(-0.0), Json(0.1), Json(1e16), Json(1e-7),
                        Json(std::numeric_limits<int64_t>::min())});
  EXPECT_EQ(dump_json(a), "[1,1.0,-0.0,0.1,1e+16,1e-07,-9223372036854775808]");
  EXPECT_EQ(parse_json(dump_json(a)), a);
  EXPECT_THROW(dump_json(Json(std::numeric_limits<double>::infinity())), JsonError);
  EXPECT_THROW(dump_json(Json(std::nan(""))), JsonError);
}

TEST(JsonDump, PrettyKeepsShortContainersOnOneLine) {
  Json inner = parse_json(R"({"dtype": "float32", "sizes": [4, 8]})");
  Json longer = Json::array();
  for (int i = 0; i < 12; ++i) longer.push_back("abcdefghij");
  Json doc = Json::object();
  doc.set("short", inner);
  doc.set("long", longer);
  doc.set("empty", Json::array());
  doc.set("eo", Json::object());
  const char* expected = R"({
  "short": {"dtype": "float32", "sizes": [4, 8]},
  "long": [
    "abcdefghij",
    "abcdefghij",
    "abcdefghij",
    "abcdefghij",
    "abcdefghij",
    "abcdefghij",
    "abcdefghij",
    "abcdefghij",
    "abcdefghij",
    "abcdefghij",
    "abcdefghij",
    "abcdefghij"
  ],
  "empty": [],
  "eo": {}
})";
  EXPECT_EQ(dump_json(doc, 2), expected);
  EXPECT_EQ(parse_json(dump_json(doc, 2)), doc);
  EXPECT_EQ(dump_json(Json::array({1, 2}), 2), "[1, 2]");
}

TEST(JsonDump, RefusesTooDeepValues) {
  Json v = 1;
  for (int i = 0; i < kMaxJsonDepth; ++i) v = Json::array({v});
  EXPECT_NO_THROW(dump_json(v));
  EXPECT_EQ(parse_json(dump_json(v, 2)), v);
  v = Json::array({v});
  EXPECT_THROW(dump_json(v), JsonError);
  EXPECT_THROW(dump_json(v, 2), JsonError);
}

TEST(FormatDouble, PythonRepr) {
  struct Case {
    double v;
    const char* text;
  };
  const Case cases[] = {
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {1.0, "1.0"},
      {-2.5, "-2.5"},
      {0.1, "0.1"},
      {123.456, "123.456"},
      {1e-4, "0.0001"},
      {1e-5, "1e-05"},
      {1.5e-7, "1.5e-07"},
      {1e15, "1000000000000000.0"},
      {1e16, "1e+16"},
      {1234567890123456789.0, "1.2345678901234568e+18"},
      {100.0, "100.0"},
      {1e6, "1000000.0"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {std::numeric_limits<double>::infinity(), "inf"},
      {-std::numeric_limits<double>::infinity(), "-inf"},
      {std::nan(""), "nan"},
  };
  for (const Case& c : cases) EXPECT_EQ(format_double(c.v), c.text);
}

TEST(FormatDouble, RandomRoundTrip) {
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 20000; ++i) {
    double v = std::bit_cast<double>(rng());
    if (!std::isfinite(v)) continue;
    std::string text = format_double(v);
    double back = std::strtod(text.c_str(), nullptr);
    ASSERT_EQ(std::bit_cast<uint64_t>(back), std::bit_cast<uint64_t>(v)) << text;
    // The text is also valid JSON that reads back as a double.
    Json j = parse_json(text);
    ASSERT_TRUE(j.is_double()) << text;
    ASSERT_EQ(std::bit_cast<uint64_t>(j.as_double()), std::bit_cast<uint64_t>(v)) << text;
  }
}

}  // namespace
}  // namespace coil::graph
