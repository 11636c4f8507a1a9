// How an attribute struct lists its fields, once, for its printer, its canonical bytes and their
// reader to be derived from. Each struct has
//
//   static auto fields(auto& self) { return std::tuple{field("dim", self.dim), ...}; }
//
// in the order of its bytes and of its printed form. `self` is const for printing and writing,
// mutable for reading, so the one list serves all three. A field's bytes are its type's (an
// integer as i64, a bool or an enum as u8, a double as f64, an optional double as a u8 flag and
// an f64, a list as a length and i64s); the descriptors below say what differs from that.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>

namespace zc::ops {

// Printed "name=value".
template <class T>
struct Field {
  std::string_view name;
  T& value;
};

// A bool printed as its bare name when set and not at all otherwise: an option that is
// usually off stays out of IR dumps.
template <class B>
struct Flag {
  std::string_view name;
  B& value;
};

// Bools of which at most one is set, stored as one integer of a packed list: 0 when none is,
// else 1 + the index of the one that is, printed as that one's name. A flag that gains
// alternatives so keeps its bytes (conv2d's relu, then relu6: stored graphs stay reachable).
template <class B, size_t N>
struct OneOf {
  std::array<std::string_view, N> names;
  std::array<B*, N> values;
};

// Integer fields printed as one list, "name=[a,b]" (a 2-d stride from its two fields).
template <class I, size_t N>
struct IntList {
  std::string_view name;
  std::array<I*, N> values;
};

// Integer and bool fields (bools as 0 or 1) stored as one list of i64, its length first, and
// printed as their own descriptors say. `what` names the struct in the error a list of another
// length raises.
template <class... Items>
struct Packed {
  std::string_view what;
  std::tuple<Items...> items;
};

template <class T>
Field<T> field(std::string_view name, T& value) {
  return {name, value};
}

template <class B>
Flag<B> flag(std::string_view name, B& value) {
  return {name, value};
}

template <class B>
OneOf<B, 2> one_of(std::string_view first, B& a, std::string_view second, B& b) {
  return {{first, second}, {&a, &b}};
}

template <class I, class... More>
IntList<I, 1 + sizeof...(More)> ints(std::string_view name, I& first, More&... more) {
  static_assert((std::is_same_v<I, More> && ...), "a list's fields are of one integer type");
  return {name, {&first, &more...}};
}

template <class... Items>
Packed<Items...> packed(std::string_view what, Items... items) {
  return {what, {items...}};
}

}  // namespace zc::ops
