// Sizes as polynomials in a graph's symbols, and how they are found.
//
// Every integer a code generator prints for a graph whose sizes vary (a loop bound, a stride, an
// offset, a product's leading dimension) is, on one code path, a polynomial in the varying
// sizes with integer coefficients: shapes multiply and add, nothing else. fit_sizes() finds
// those polynomials from the integers printed at a few sizes of the same graph (size_template.h
// says how they are gathered), exactly, in rational arithmetic, and checks each against the
// sizes it did not use. A size that is not a polynomial there (a rounding, a minimum) fails the
// fit, never silently.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace zc {
class ByteWriter;
class ByteReader;
}  // namespace zc

namespace zc::codegen {

struct SizePoly {
  struct Term {
    std::vector<uint8_t> exps;  // the power of each symbol
    int64_t coef = 0;           // never 0
    bool operator==(const Term&) const = default;
  };
  std::vector<Term> terms;  // by ascending powers; empty: the constant 0

  static SizePoly constant(int64_t c);
  bool is_constant() const;
  int64_t eval(std::span<const int64_t> symbols) const;
  // A C expression of int64_t type: the constant itself, or terms over `sym`[i] (the name of
  // an int64_t array holding the symbol values), in parentheses.
  std::string c_expr(const std::string& sym) const;
  // "64*s0*s0 + 3" for logs.
  std::string str() const;
  bool operator==(const SizePoly&) const = default;

  void write(ByteWriter& w) const;
  static SizePoly read(ByteReader& r);  // raises zc::Error on malformed bytes
};

// `points[p]` holds the symbol values at sample p, `values[p]` the integers recorded there (the
// same count at every sample). Each integer's polynomial has, in each symbol, at most the
// degree the samples allow: with n distinct values of a symbol, n - 2 (at most 3), the last
// kept to check the fit. The samples must include every combination of the first
// degree + 1 distinct values of each symbol (a grid); the others only check. Returns nullopt,
// with the reason in `why`, when the samples do not allow a fit or an integer is no
// polynomial with integer coefficients of that degree.
std::optional<std::vector<SizePoly>> fit_sizes(std::span<const std::vector<int64_t>> points,
                                               std::span<const std::vector<int64_t>> values,
                                               std::string* why);

}  // namespace zc::codegen
