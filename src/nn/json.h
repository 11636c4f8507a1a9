// A small, strict JSON reader, enough for safetensors headers: objects,
// arrays, strings and integers. Floating-point numbers, true, false and null are rejected, as
// are duplicate keys, trailing commas and anything after the top-level value but whitespace.
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
  enum class Kind : uint8_t { object, array, string, integer };
  Kind kind = Kind::object;
  std::string string;
  int64_t integer = 0;
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object;  // in file order, keys unique

  const Value* find(std::string_view key) const;  // nullptr when absent or not an object
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
