// A small, strict JSON reader (RFC 8259) for safetensors headers and transformers' config.json:
// objects, arrays, strings, numbers, true, false and null. A number without a fraction or an
// exponent is an integer (64 bits, or a parse error: a byte count must not round); any other is
// a double. Refused: duplicate keys, trailing commas, leading zeros, NaN and Infinity (Python's
// json writes them, JSON has no such literals), a number out of double's range, and anything
// after the top-level value but whitespace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/json_quote.h"  // json::quote, the writer's half
#include "zc/error.h"

namespace zc::json {

struct Value {
  enum class Kind : uint8_t { object, array, string, integer, number, boolean, null };
  Kind kind = Kind::object;
  std::string string;
  int64_t integer = 0;
  double number = 0;  // for Kind::number: 1.5, 1e-05, 10000.0
  bool boolean = false;
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object;  // in file order, keys unique

  const Value* find(std::string_view key) const;  // nullptr when absent or not an object
  // An integer or a number: what a reader wanting a real value takes ("factor": 8 or 8.0).
  bool is_numeric() const { return kind == Kind::integer || kind == Kind::number; }
  double as_double() const;  // its value when is_numeric(); ZC_CHECKs it
};

std::string_view kind_name(Value::Kind kind);  // "object", "array", ...

// What parse() throws: the byte offset into the text where the problem was found.
class ParseError : public Error {
 public:
  ParseError(size_t offset, const std::string& reason);
  size_t offset;
  std::string reason;  // what() without the offset
};

Value parse(std::string_view text);

}  // namespace zc::json
