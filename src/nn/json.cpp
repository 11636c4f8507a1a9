#include "nn/json.h"

#include <charconv>
#include <cstdio>
#include <limits>
#include <string>

#include "util/check.h"

namespace zc::json {

namespace {

// Deeper nesting than any real header; the limit keeps hostile input from overflowing the stack.
constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Value parse_document() {
    skip_space();
    Value v = parse_value(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected " + describe_here() + " after the top-level value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw ParseError(pos_, what); }

  std::string describe_here() const {
    if (pos_ >= text_.size()) return "end of input";
    const unsigned char c = static_cast<unsigned char>(text_[pos_]);
    char buf[32];
    if (c >= 0x20 && c < 0x7f) {
      std::snprintf(buf, sizeof buf, "character '%c'", c);
    } else {
      std::snprintf(buf, sizeof buf, "byte 0x%02x", c);
    }
    return buf;
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  void expect(char c) {
    if (pos_ >= text_.size() || text_[pos_] != c) {
      fail(std::string("expected '") + c + "', found " + describe_here());
    }
    ++pos_;
  }

  Value parse_value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    if (pos_ >= text_.size()) fail("expected a value, found end of input");
    const char c = text_[pos_];
    Value v;
    if (c == '{') {
      v.kind = Value::Kind::object;
      parse_object(v, depth);
    } else if (c == '[') {
      v.kind = Value::Kind::array;
      parse_array(v, depth);
    } else if (c == '"') {
      v.kind = Value::Kind::string;
      v.string = parse_string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      parse_number(v);
    } else if (c == 't' || c == 'f' || c == 'n') {
      parse_literal(v);
    } else {
      fail("expected a value (object, array, string, number, true, false or null), found " +
           describe_here());
    }
    return v;
  }

  void parse_literal(Value& v) {
    struct Literal {
      std::string_view text;
      Value::Kind kind;
      bool boolean;
    };
    constexpr Literal kLiterals[] = {{"true", Value::Kind::boolean, true},
                                     {"false", Value::Kind::boolean, false},
                                     {"null", Value::Kind::null, false}};
    for (const auto& l : kLiterals) {
      if (text_.substr(pos_, l.text.size()) == l.text) {
        pos_ += l.text.size();
        v.kind = l.kind;
        v.boolean = l.boolean;
        return;
      }
    }
    fail("expected a value (object, array, string, number, true, false or null), found " +
         describe_here());
  }

  bool digit_here() const {
    return pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9';
  }

  // JSON's grammar, checked here because from_chars alone takes more ("+1", ".5", "1.", "inf").
  void parse_number(Value& v) {
    const size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    if (!digit_here()) fail("expected a digit, found " + describe_here());
    if (text_[pos_] == '0' && pos_ + 1 < text_.size() && text_[pos_ + 1] >= '0' &&
        text_[pos_ + 1] <= '9') {
      fail("numbers must not have leading zeros");
    }
    while (digit_here()) ++pos_;
    bool real = false;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      real = true;
      ++pos_;
      if (!digit_here()) fail("expected a digit after the decimal point, found " + describe_here());
      while (digit_here()) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      real = true;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!digit_here()) fail("expected a digit in the exponent, found " + describe_here());
      while (digit_here()) ++pos_;
    }
    const std::string_view literal = text_.substr(start, pos_ - start);
    if (!real) {
      v.kind = Value::Kind::integer;
      v.integer = integer_value(literal, start);
      return;
    }
    v.kind = Value::Kind::number;
    const auto [end, error] =
        std::from_chars(literal.data(), literal.data() + literal.size(), v.number);
    if (error == std::errc::result_out_of_range) {
      // from_chars reports underflow the same way; a value too small for a double is 0 to JSON
      // readers everywhere, one too large is not a number zc can use.
      if (exponent_is_negative(literal)) {
        v.number = literal.front() == '-' ? -0.0 : 0.0;
        return;
      }
      pos_ = start;
      fail("number " + std::string(literal) + " is out of the range of a double");
    }
    ZC_CHECK(error == std::errc() && end == literal.data() + literal.size(),
             "from_chars refused a JSON number: " << literal);
  }

  static bool exponent_is_negative(std::string_view literal) {
    const size_t e = literal.find_first_of("eE");
    return e != std::string_view::npos && e + 1 < literal.size() && literal[e + 1] == '-';
  }

  void parse_object(Value& v, int depth) {
    expect('{');
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return;
    }
    while (true) {
      skip_space();
      const size_t key_pos = pos_;
      if (pos_ >= text_.size() || text_[pos_] != '"') {
        fail("expected a string key, found " + describe_here());
      }
      std::string key = parse_string();
      for (const auto& entry : v.object) {
        if (entry.first == key) {
          pos_ = key_pos;
          fail("duplicate key " + quote(key));
        }
      }
      skip_space();
      expect(':');
      skip_space();
      Value item = parse_value(depth + 1);
      v.object.emplace_back(std::move(key), std::move(item));
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return;
      }
      fail("expected ',' or '}' in an object, found " + describe_here());
    }
  }

  void parse_array(Value& v, int depth) {
    expect('[');
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return;
    }
    while (true) {
      skip_space();
      v.array.push_back(parse_value(depth + 1));
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return;
      }
      fail("expected ',' or ']' in an array, found " + describe_here());
    }
  }

  // The value of an integer literal the grammar check accepted.
  int64_t integer_value(std::string_view literal, size_t start) {
    const bool negative = literal.front() == '-';
    // Accumulate the magnitude as unsigned so that the most negative int64 parses too.
    const uint64_t limit = negative ? uint64_t{1} << 63 : std::numeric_limits<int64_t>::max();
    uint64_t magnitude = 0;
    for (const char c : literal.substr(negative ? 1 : 0)) {
      const uint64_t digit = static_cast<uint64_t>(c - '0');
      if (magnitude > (limit - digit) / 10) {
        pos_ = start;
        fail("integer does not fit in 64 bits");
      }
      magnitude = magnitude * 10 + digit;
    }
    return negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  }

  uint32_t parse_hex4() {
    if (text_.size() - pos_ < 4) fail("truncated \\u escape");
    uint32_t code = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      const char c = text_[pos_];
      code <<= 4;
      if (c >= '0' && c <= '9') {
        code |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        code |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        code |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        fail("invalid hex digit in \\u escape: " + describe_here());
      }
    }
    return code;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        fail("unescaped control character (" + describe_here() + ") in a string");
      }
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= text_.size()) fail("unterminated escape sequence");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
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
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xdc00 && cp <= 0xdfff) fail("unpaired low surrogate in \\u escape");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            if (text_.substr(pos_, 2) != "\\u") fail("unpaired high surrogate in \\u escape");
            pos_ += 2;
            const uint32_t low = parse_hex4();
            if (low < 0xdc00 || low > 0xdfff) fail("invalid low surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          --pos_;
          fail("invalid escape sequence '\\" + std::string(1, e) + "'");
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

const Value* Value::find(std::string_view key) const {
  if (kind != Kind::object) return nullptr;
  for (const auto& entry : object) {
    if (entry.first == key) return &entry.second;
  }
  return nullptr;
}

std::string_view kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::object:
      return "object";
    case Value::Kind::array:
      return "array";
    case Value::Kind::string:
      return "string";
    case Value::Kind::integer:
      return "integer";
    case Value::Kind::number:
      return "number";
    case Value::Kind::boolean:
      return "boolean";
    case Value::Kind::null:
      return "null";
  }
  return "?";
}

double Value::as_double() const {
  ZC_CHECK(is_numeric(), "json::Value::as_double on a " << kind_name(kind));
  return kind == Kind::integer ? static_cast<double>(integer) : number;
}

ParseError::ParseError(size_t offset, const std::string& reason)
    : Error("byte " + std::to_string(offset) + ": " + reason), offset(offset), reason(reason) {}

Value parse(std::string_view text) {
  return Parser(text).parse_document();
}

}  // namespace zc::json
