// The strict JSON reader: every kind of value config.json holds, and the malformed input it
// refuses with the byte offset and the cause.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "nn/json.h"
#include "unit/test_support.h"

namespace {

using zc::json::Value;
using zc::test::contains;

TEST(Json, ScalarsOfEveryKind) {
  struct Case {
    std::string text;
    Value::Kind kind;
  };
  const std::vector<Case> cases = {
      {"{}", Value::Kind::object},     {"[]", Value::Kind::array},   {"\"x\"", Value::Kind::string},
      {"42", Value::Kind::integer},    {"4.5", Value::Kind::number}, {"true", Value::Kind::boolean},
      {"false", Value::Kind::boolean}, {"null", Value::Kind::null},
  };
  for (const auto& c : cases) {
    const Value v = zc::json::parse(c.text);
    EXPECT_EQ(v.kind, c.kind) << c.text << " read as " << zc::json::kind_name(v.kind);
  }
  EXPECT_TRUE(zc::json::parse("true").boolean);
  EXPECT_FALSE(zc::json::parse("false").boolean);
  EXPECT_EQ(zc::json::kind_name(Value::Kind::number), "number");
  EXPECT_EQ(zc::json::kind_name(Value::Kind::boolean), "boolean");
  EXPECT_EQ(zc::json::kind_name(Value::Kind::null), "null");
}

// What Python's json.dumps writes for the floats of a transformers config.
TEST(Json, NumbersWithFractionOrExponentAreDoubles) {
  struct Case {
    std::string text;
    double value;
  };
  const std::vector<Case> cases = {
      {"1e-05", 1e-05},     {"1e-06", 1e-06},
      {"10000.0", 10000.0}, {"500000.0", 500000.0},
      {"0.5", 0.5},         {"-2.25", -2.25},
      {"1E+2", 100.0},      {"6.02e23", 6.02e23},
      {"0.1", 0.1},         {"1.7976931348623157e308", 1.7976931348623157e308},
      {"-0.0", -0.0},       {"2.5E-3", 2.5e-3},
  };
  for (const auto& c : cases) {
    const Value v = zc::json::parse(c.text);
    ASSERT_EQ(v.kind, Value::Kind::number) << c.text;
    EXPECT_EQ(v.number, c.value) << c.text;  // correctly rounded, so exactly the literal's double
    EXPECT_TRUE(v.is_numeric());
    EXPECT_EQ(v.as_double(), c.value);
  }
  EXPECT_TRUE(std::signbit(zc::json::parse("-0.0").number));
  // Below the smallest subnormal: zero, as every JSON reader gives.
  EXPECT_EQ(zc::json::parse("1e-400").number, 0.0);
  EXPECT_TRUE(std::signbit(zc::json::parse("-1e-400").number));
}

TEST(Json, IntegersStayExactAndReadAsDoubles) {
  const Value v = zc::json::parse("[0, -7, 9223372036854775807, -9223372036854775808, 8]");
  ASSERT_EQ(v.array.size(), 5u);
  EXPECT_EQ(v.array[2].integer, INT64_MAX);
  EXPECT_EQ(v.array[3].integer, INT64_MIN);
  for (const Value& x : v.array) EXPECT_EQ(x.kind, Value::Kind::integer);
  EXPECT_TRUE(v.array[4].is_numeric());
  EXPECT_EQ(v.array[4].as_double(), 8.0);
  EXPECT_FALSE(zc::json::parse("\"8\"").is_numeric());
  EXPECT_FALSE(zc::json::parse("null").is_numeric());
}

TEST(Json, AConfigLikeDocument) {
  const Value v = zc::json::parse(R"({
    "architectures": ["LlamaForCausalLM"],
    "rms_norm_eps": 1e-05,
    "rope_scaling": null,
    "tie_word_embeddings": false,
    "rope_parameters": {"rope_type": "llama3", "factor": 8.0, "rope_theta": 500000},
    "eos_token_id": [128001, 128009]
  })");
  ASSERT_EQ(v.kind, Value::Kind::object);
  EXPECT_EQ(v.find("architectures")->array.at(0).string, "LlamaForCausalLM");
  EXPECT_EQ(v.find("rms_norm_eps")->as_double(), 1e-05);
  EXPECT_EQ(v.find("rope_scaling")->kind, Value::Kind::null);
  EXPECT_EQ(v.find("tie_word_embeddings")->kind, Value::Kind::boolean);
  EXPECT_FALSE(v.find("tie_word_embeddings")->boolean);
  const Value* rope = v.find("rope_parameters");
  ASSERT_NE(rope, nullptr);
  EXPECT_EQ(rope->find("factor")->as_double(), 8.0);
  EXPECT_EQ(rope->find("rope_theta")->kind, Value::Kind::integer);
  EXPECT_EQ(rope->find("rope_theta")->as_double(), 500000.0);
  EXPECT_EQ(v.find("missing"), nullptr);
  // The order of the file is kept.
  EXPECT_EQ(v.object.front().first, "architectures");
  EXPECT_EQ(v.object.back().first, "eos_token_id");
}

TEST(Json, MalformedInputNamesTheOffsetAndTheCause) {
  struct Case {
    std::string text;
    size_t offset;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"01", 0, "leading zeros"},
      {"-", 1, "expected a digit"},
      {"1.", 2, "after the decimal point"},
      {".5", 0, "expected a value"},
      {"+1", 0, "expected a value"},
      {"1e", 2, "in the exponent"},
      {"1e+", 3, "in the exponent"},
      {"[1.5.2]", 4, "expected ',' or ']'"},
      {"NaN", 0, "expected a value"},
      {"Infinity", 0, "expected a value"},
      {"-Infinity", 1, "expected a digit"},
      {"1e999", 0, "out of the range of a double"},
      {"-1e999", 0, "out of the range of a double"},
      {"99999999999999999999", 0, "64 bits"},
      {"tru", 0, "expected a value"},
      {"nul", 0, "expected a value"},
      {"True", 0, "expected a value"},
      {"[true false]", 6, "expected ',' or ']'"},
      {"{\"a\": nulll}", 10, "expected ',' or '}'"},
      {"{\"a\": 1, \"a\": 2}", 9, "duplicate key"},
      {"[1,]", 3, "expected a value"},
      {"null null", 5, "after the top-level value"},
  };
  for (const auto& c : cases) {
    try {
      zc::json::parse(c.text);
      ADD_FAILURE() << c.text << " parsed";
    } catch (const zc::json::ParseError& e) {
      EXPECT_EQ(e.offset, c.offset) << c.text << " -> " << e.what();
      EXPECT_TRUE(contains(e.reason, c.expected)) << c.text << " -> " << e.what();
      EXPECT_TRUE(contains(e.what(), "byte " + std::to_string(c.offset))) << e.what();
    }
  }
}

}  // namespace
