#include "codegen/size_poly.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "util/bytes.h"
#include "zc/tensor.h"

namespace zc::codegen {

namespace {

using i128 = __int128;

i128 abs128(i128 v) {
  return v < 0 ? -v : v;
}
i128 gcd128(i128 a, i128 b) {
  a = abs128(a);
  b = abs128(b);
  while (b != 0) {
    i128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// Exact rationals. The samples are sizes (at most thousands) and the recorded integers at most
// byte counts, so numerators and denominators of a degree-3 fit stay far inside 128 bits.
struct Rational {
  i128 num = 0, den = 1;
  static Rational of(i128 n, i128 d = 1) {
    if (d < 0) {
      n = -n;
      d = -d;
    }
    i128 g = gcd128(n, d);
    if (g > 1) {
      n /= g;
      d /= g;
    }
    return {n, d};
  }
  Rational operator-(const Rational& o) const { return of(num * o.den - o.num * den, den * o.den); }
  Rational operator+(const Rational& o) const { return of(num * o.den + o.num * den, den * o.den); }
  Rational operator*(const Rational& o) const { return of(num * o.num, den * o.den); }
  Rational operator/(i128 d) const { return of(num, den * d); }
};

// The monomial coefficients of the polynomial of degree < x.size() through (x[j], y[j]):
// Newton's divided differences, then the Newton form expanded.
std::vector<Rational> fit_1d(const std::vector<int64_t>& x, std::vector<Rational> y) {
  size_t n = x.size();
  for (size_t level = 1; level < n; ++level) {
    for (size_t j = n - 1; j >= level; --j) y[j] = (y[j] - y[j - 1]) / (x[j] - x[j - level]);
  }
  std::vector<Rational> poly{y[n - 1]};
  for (size_t j = n - 1; j-- > 0;) {
    // poly = poly * (t - x[j]) + y[j]
    std::vector<Rational> next(poly.size() + 1);
    for (size_t e = 0; e < poly.size(); ++e) {
      next[e + 1] = next[e + 1] + poly[e];
      next[e] = next[e] - poly[e] * Rational::of(x[j]);
    }
    next[0] = next[0] + y[j];
    poly = std::move(next);
  }
  return poly;
}

}  // namespace

SizePoly SizePoly::constant(int64_t c) {
  SizePoly p;
  if (c != 0) p.terms.push_back(Term{{}, c});
  return p;
}

bool SizePoly::is_constant() const {
  for (const Term& t : terms) {
    for (uint8_t e : t.exps) {
      if (e) return false;
    }
  }
  return true;
}

int64_t SizePoly::eval(std::span<const int64_t> symbols) const {
  int64_t sum = 0;
  for (const Term& t : terms) {
    int64_t v = t.coef;
    for (size_t i = 0; i < t.exps.size(); ++i) {
      for (uint8_t e = 0; e < t.exps[i]; ++e) v *= symbols[i];
    }
    sum += v;
  }
  return sum;
}

namespace {
std::string term_str(const SizePoly::Term& t, const std::string& sym, bool c_syntax) {
  std::string s;
  bool first = true;
  auto factor = [&](const std::string& f) {
    s += (first ? "" : "*") + f;
    first = false;
  };
  if (t.coef != 1 || std::all_of(t.exps.begin(), t.exps.end(), [](uint8_t e) { return !e; })) {
    factor(std::to_string(t.coef));
  }
  for (size_t i = 0; i < t.exps.size(); ++i) {
    std::string name = c_syntax ? sym + "[" + std::to_string(i) + "]" : sym + std::to_string(i);
    for (uint8_t e = 0; e < t.exps[i]; ++e) factor(name);
  }
  return s;
}
}  // namespace

std::string SizePoly::c_expr(const std::string& sym) const {
  if (is_constant()) return std::to_string(eval({}));
  std::string s = "(";
  for (size_t i = 0; i < terms.size(); ++i) s += (i ? " + " : "") + term_str(terms[i], sym, true);
  return s + ")";
}

std::string SizePoly::str() const {
  if (terms.empty()) return "0";
  std::string s;
  for (size_t i = 0; i < terms.size(); ++i) s += (i ? " + " : "") + term_str(terms[i], "s", false);
  return s;
}

void SizePoly::write(ByteWriter& w) const {
  w.u32(static_cast<uint32_t>(terms.size()));
  for (const Term& t : terms) {
    w.i64(t.coef);
    w.u8(static_cast<uint8_t>(t.exps.size()));
    for (uint8_t e : t.exps) w.u8(e);
  }
}

SizePoly SizePoly::read(ByteReader& r) {
  SizePoly p;
  uint32_t n = r.u32();
  for (uint32_t i = 0; i < n; ++i) {
    Term t;
    t.coef = r.i64();
    uint8_t k = r.u8();
    for (uint8_t j = 0; j < k; ++j) {
      uint8_t e = r.u8();
      if (e > 8) throw Error("size polynomial: power " + std::to_string(e) + " out of range");
      t.exps.push_back(e);
    }
    if (t.coef == 0) throw Error("size polynomial: a zero term");
    p.terms.push_back(std::move(t));
  }
  return p;
}

std::optional<std::vector<SizePoly>> fit_sizes(std::span<const std::vector<int64_t>> points,
                                               std::span<const std::vector<int64_t>> values,
                                               std::string* why) {
  if (points.empty() || points.size() != values.size()) {
    *why = "no samples";
    return std::nullopt;
  }
  const size_t k = points[0].size(), count = values[0].size();
  for (size_t p = 0; p < points.size(); ++p) {
    if (points[p].size() != k || values[p].size() != count) {
      *why = "samples of different lengths";
      return std::nullopt;
    }
  }
  // The grid: the first degree + 1 distinct values of each symbol, in order of appearance.
  std::vector<std::vector<int64_t>> nodes(k);
  std::vector<size_t> degree(k);
  for (size_t s = 0; s < k; ++s) {
    std::vector<int64_t> distinct;
    for (const auto& pt : points) {
      if (std::find(distinct.begin(), distinct.end(), pt[s]) == distinct.end())
        distinct.push_back(pt[s]);
    }
    if (distinct.size() < 3) {
      *why = "symbol s" + std::to_string(s) + " was sampled at " + std::to_string(distinct.size()) +
             " sizes; a fit needs 3 or more";
      return std::nullopt;
    }
    degree[s] = std::min<size_t>(distinct.size() - 2, 3);
    nodes[s].assign(distinct.begin(), distinct.begin() + static_cast<long>(degree[s]) + 1);
  }
  // The sample at each grid position, row-major over the symbols.
  size_t cells = 1;
  for (size_t s = 0; s < k; ++s) cells *= nodes[s].size();
  std::vector<size_t> sample_at(cells);
  for (size_t c = 0; c < cells; ++c) {
    std::vector<int64_t> want(k);
    size_t rest = c;
    for (size_t s = k; s-- > 0;) {
      want[s] = nodes[s][rest % nodes[s].size()];
      rest /= nodes[s].size();
    }
    auto it = std::find(points.begin(), points.end(), want);
    if (it == points.end()) {
      *why = "the samples do not cover a grid of the symbols' sizes";
      return std::nullopt;
    }
    sample_at[c] = static_cast<size_t>(it - points.begin());
  }

  std::vector<SizePoly> polys(count);
  std::vector<Rational> grid(cells);
  for (size_t i = 0; i < count; ++i) {
    for (size_t c = 0; c < cells; ++c) grid[c] = Rational::of(values[sample_at[c]][i]);
    // Fit along each symbol in turn: the grid's axis s becomes the power of symbol s.
    size_t stride = cells;
    for (size_t s = 0; s < k; ++s) {
      size_t n = nodes[s].size();
      stride /= n;
      for (size_t outer = 0; outer < cells; outer += stride * n) {
        for (size_t inner = 0; inner < stride; ++inner) {
          std::vector<Rational> y(n);
          for (size_t j = 0; j < n; ++j) y[j] = grid[outer + j * stride + inner];
          std::vector<Rational> c = fit_1d(nodes[s], std::move(y));
          for (size_t j = 0; j < n; ++j) grid[outer + j * stride + inner] = c[j];
        }
      }
    }
    SizePoly poly;
    for (size_t c = 0; c < cells; ++c) {
      if (grid[c].num == 0) continue;
      if (grid[c].den != 1 || abs128(grid[c].num) > INT64_MAX) {
        *why = "recorded size " + std::to_string(i) +
               " is not a polynomial with integer "
               "coefficients in the symbols";
        return std::nullopt;
      }
      SizePoly::Term t;
      t.exps.resize(k);
      size_t rest = c;
      for (size_t s = k; s-- > 0;) {
        t.exps[s] = static_cast<uint8_t>(rest % nodes[s].size());
        rest /= nodes[s].size();
      }
      t.coef = static_cast<int64_t>(grid[c].num);
      poly.terms.push_back(std::move(t));
    }
    // Every sample, the grid's included, must agree: the others are the check.
    for (size_t p = 0; p < points.size(); ++p) {
      if (poly.eval(points[p]) != values[p][i]) {
        *why = "recorded size " + std::to_string(i) + " (" + std::to_string(values[p][i]) +
               " at sample " + std::to_string(p) +
               ") is no polynomial of degree <= " + std::to_string(degree[0]) +
               " in the symbols (it fits " + poly.str() + " elsewhere)";
        return std::nullopt;
      }
    }
    polys[i] = std::move(poly);
  }
  return polys;
}

}  // namespace zc::codegen
