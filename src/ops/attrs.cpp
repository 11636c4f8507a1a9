#include "ops/attrs.h"

#include <sstream>
#include <type_traits>

#include "util/bytes.h"

namespace zc::ops {

namespace {

// Each field type's printed value, bytes and reading of those bytes.

std::string text(int64_t v) {
  return std::to_string(v);
}
std::string text(bool v) {
  return v ? "true" : "false";
}
// Every digit, so that attributes that differ print differently.
std::string text(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}
// A clamp's bounds, unlike other doubles, have always printed with the stream's six digits.
std::string text(const std::optional<double>& v) {
  if (!v) return "none";
  std::ostringstream os;
  os << *v;
  return os.str();
}
std::string text(const std::vector<int64_t>& v) {
  return shape_str(v);
}
std::string text(GeluApprox v) {
  return v == GeluApprox::tanh ? "tanh" : "none";
}
std::string text(DType v) {
  return std::string(dtype_name(v));
}
std::string text(AttentionWrt v) {
  return attention_wrt_name(v);
}

void put(ByteWriter& w, int64_t v) {
  w.i64(v);
}
void put(ByteWriter& w, bool v) {
  w.u8(v);
}
void put(ByteWriter& w, double v) {
  w.f64(v);
}
void put(ByteWriter& w, const std::optional<double>& v) {
  w.u8(v.has_value());
  w.f64(v.value_or(0.0));
}
void put(ByteWriter& w, const std::vector<int64_t>& v) {
  w.i64s(v);
}
template <class E>
requires std::is_enum_v<E>
void put(ByteWriter& w, E v) {
  w.u8(static_cast<uint8_t>(v));
}

void get(ByteReader& r, int64_t& v) {
  v = r.i64();
}
void get(ByteReader& r, bool& v) {
  v = r.u8() != 0;
}
void get(ByteReader& r, double& v) {
  v = r.f64();
}
void get(ByteReader& r, std::optional<double>& v) {
  const bool has = r.u8() != 0;
  const double x = r.f64();
  v = has ? std::optional<double>(x) : std::nullopt;
}
void get(ByteReader& r, std::vector<int64_t>& v) {
  v = r.i64s();
}

// An enum's number of values, and what it is called in the error for a byte past them.
struct EnumRange {
  int count;
  const char* noun;
};
EnumRange range_of(GeluApprox) {
  return {static_cast<int>(GeluApprox::tanh) + 1, "gelu approximation"};
}
EnumRange range_of(DType) {
  return {kNumDTypes, "dtype"};
}
EnumRange range_of(AttentionWrt) {
  return {static_cast<int>(AttentionWrt::kv) + 1, "attention gradient operand"};
}

template <class E>
requires std::is_enum_v<E>
void get(ByteReader& r, E& v) {
  const uint8_t x = r.u8();
  const EnumRange range = range_of(E{});
  if (x >= range.count) {
    throw Error("attributes: bad " + std::string(range.noun) + " " + std::to_string(x));
  }
  v = static_cast<E>(x);
}

// Each descriptor printed (as parts joined by ", "), written and read.

template <class Tuple, class F>
void for_each_item(const Tuple& t, F&& fn) {
  std::apply([&](const auto&... x) { (fn(x), ...); }, t);
}

template <class T>
void print(std::vector<std::string>& parts, const Field<T>& f) {
  parts.push_back(std::string(f.name) + "=" + text(f.value));
}
template <class B>
void print(std::vector<std::string>& parts, const Flag<B>& f) {
  if (f.value) parts.emplace_back(f.name);
}
template <class B, size_t N>
void print(std::vector<std::string>& parts, const OneOf<B, N>& o) {
  for (size_t i = 0; i < N; ++i) {
    if (*o.values[i]) parts.emplace_back(o.names[i]);
  }
}
template <class I, size_t N>
void print(std::vector<std::string>& parts, const IntList<I, N>& l) {
  std::vector<int64_t> v;
  for (I* x : l.values) v.push_back(*x);
  parts.push_back(std::string(l.name) + "=" + shape_str(v));
}
template <class... Items>
void print(std::vector<std::string>& parts, const Packed<Items...>& p) {
  for_each_item(p.items, [&](const auto& item) { print(parts, item); });
}

// A packed list: its integers, and back.
template <class T>
void pack(std::vector<int64_t>& v, const Field<T>& f) {
  static_assert(std::is_same_v<std::remove_const_t<T>, int64_t> ||
                    std::is_same_v<std::remove_const_t<T>, bool>,
                "a packed field is an integer or a bool");
  v.push_back(static_cast<int64_t>(f.value));
}
template <class B>
void pack(std::vector<int64_t>& v, const Flag<B>& f) {
  v.push_back(static_cast<int64_t>(f.value));
}
template <class B, size_t N>
void pack(std::vector<int64_t>& v, const OneOf<B, N>& o) {
  int64_t code = 0;
  for (size_t i = 0; i < N; ++i) {
    if (*o.values[i]) code = static_cast<int64_t>(i) + 1;
  }
  v.push_back(code);
}
template <class I, size_t N>
void pack(std::vector<int64_t>& v, const IntList<I, N>& l) {
  for (I* x : l.values) v.push_back(*x);
}

template <class T>
void unpack(const std::vector<int64_t>& v, size_t& at, const Field<T>& f) {
  if constexpr (std::is_same_v<T, bool>) {
    f.value = v[at++] != 0;
  } else {
    f.value = v[at++];
  }
}
template <class B>
void unpack(const std::vector<int64_t>& v, size_t& at, const Flag<B>& f) {
  f.value = v[at++] != 0;
}
template <class B, size_t N>
void unpack(const std::vector<int64_t>& v, size_t& at, const OneOf<B, N>& o) {
  const int64_t code = v[at++];
  if (code < 0 || code > static_cast<int64_t>(N)) {
    throw Error("attributes: " + std::string(o.names[0]) +
                " and its alternatives are stored as 0 to " + std::to_string(N) + ", got " +
                std::to_string(code));
  }
  for (size_t i = 0; i < N; ++i) *o.values[i] = code == static_cast<int64_t>(i) + 1;
}
template <class I, size_t N>
void unpack(const std::vector<int64_t>& v, size_t& at, const IntList<I, N>& l) {
  for (I* x : l.values) *x = v[at++];
}

template <class T>
void write(ByteWriter& w, const Field<T>& f) {
  put(w, f.value);
}
template <class B>
void write(ByteWriter& w, const Flag<B>& f) {
  put(w, f.value);
}
template <class I, size_t N>
void write(ByteWriter& w, const IntList<I, N>& l) {
  for (I* x : l.values) put(w, *x);
}
template <class... Items>
void write(ByteWriter& w, const Packed<Items...>& p) {
  std::vector<int64_t> v;
  for_each_item(p.items, [&](const auto& item) { pack(v, item); });
  w.i64s(v);
}

template <class T>
void read(ByteReader& r, const Field<T>& f) {
  get(r, f.value);
}
template <class B>
void read(ByteReader& r, const Flag<B>& f) {
  get(r, f.value);
}
template <class I, size_t N>
void read(ByteReader& r, const IntList<I, N>& l) {
  for (I* x : l.values) get(r, *x);
}
template <class... Items>
void read(ByteReader& r, const Packed<Items...>& p) {
  std::vector<int64_t> now;  // as many integers as the list holds
  for_each_item(p.items, [&](const auto& item) { pack(now, item); });
  const std::vector<int64_t> v = r.i64s();
  if (v.size() != now.size()) {
    throw Error("attributes: " + std::string(p.what) + " needs " + std::to_string(now.size()) +
                " integers");
  }
  size_t at = 0;
  for_each_item(p.items, [&](const auto& item) { unpack(v, at, item); });
}

template <size_t I = 0>
Attrs read_alternative(size_t index, ByteReader& r) {
  if constexpr (I < std::variant_size_v<Attrs>) {
    if (index != I) return read_alternative<I + 1>(index, r);
    using A = std::variant_alternative_t<I, Attrs>;
    A a{};
    for_each_item(A::fields(a), [&](const auto& f) { read(r, f); });
    return a;
  } else {
    throw Error("attributes: unknown kind " + std::to_string(index));
  }
}

}  // namespace

const char* attention_wrt_name(AttentionWrt w) {
  switch (w) {
    case AttentionWrt::q:
      return "q";
    case AttentionWrt::k:
      return "k";
    case AttentionWrt::v:
      return "v";
    case AttentionWrt::kv:
      return "kv";
  }
  return "?";
}

std::string attrs_str(const Attrs& attrs) {
  return std::visit(
      [](const auto& a) {
        std::vector<std::string> parts;
        for_each_item(a.fields(a), [&](const auto& f) { print(parts, f); });
        std::string out;
        for (const std::string& part : parts) out += (out.empty() ? "" : ", ") + part;
        return out;
      },
      attrs);
}

void write_attrs(ByteWriter& w, const Attrs& attrs) {
  w.u8(static_cast<uint8_t>(attrs.index()));
  std::visit(
      [&](const auto& a) { for_each_item(a.fields(a), [&](const auto& f) { write(w, f); }); },
      attrs);
}

Attrs read_attrs(ByteReader& r) {
  return read_alternative(r.u8(), r);
}

}  // namespace zc::ops
