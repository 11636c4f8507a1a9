// Einsum and TopK as compositions of zc's ops.
//
// Einsum: each operand's dims get labels (a letter's code, or one per dim of "..."), the
// diagonals of a label repeated within an operand are taken (the two dims flattened and read
// with a stride of n + 1), and the operands are folded left to right: a label neither operand of
// a pair shares with the rest of the equation is summed away before the pair meets, the labels
// both hold and something later needs are batch dims, the ones only they hold are contracted.
// Each pair is one matmul of [batch, free of A, contracted] by [batch, contracted, free of B],
// the batch dims kept apart so that matmul broadcasts a size-1 one. The result is permuted to
// the output's order. Dims of size 1 broadcast against the same label's other sizes, and
// ellipses of different ranks align on the right, as numpy does (ONNX Runtime's shape
// inference refuses the latter, and an output without "..." where the inputs have one, which
// here sums the ellipsis dims as numpy does).
//
// TopK: k rounds, each taking the extreme of the elements not yet taken along the axis (amax
// or amin), and the first of them (argmax of a mask: ties go to the lower index, as ONNX asks).
// A mask of taken elements is kept apart from the values, so an element equal to the value
// masked ones are filled with (-inf, a row's minimum) is still found. NaN ranks above every
// number for largest and smallest alike, as torch and ONNX's reference implementation order it
// (ONNX leaves it open; ONNX Runtime's versions differ). The output is always sorted, which
// sorted = 0 allows. O(k * n): meant for the small k models use.
#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "onnx/convert.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc::onnx_import {

namespace {

using V = std::vector<Tensor>;
// One label per dim: a letter's character code, or kEllipsis + j for the j-th ellipsis dim
// (counted in the widest ellipsis, so that narrower ones align on the right).
using Labels = std::vector<int>;
constexpr int kEllipsis = 256;

std::string label_str(int l) {
  return l >= kEllipsis ? "..." : std::string(1, static_cast<char>(l));
}

// One term of the equation: its letters before and after "...", and whether it has one.
struct Term {
  std::string before, after;
  bool dots = false;
  size_t letters() const { return before.size() + after.size(); }
};

Term parse_term(const NodeArgs& a, const std::string& eq, const std::string& t) {
  Term term;
  for (size_t i = 0; i < t.size(); ++i) {
    const char ch = t[i];
    if (std::isalpha(static_cast<unsigned char>(ch))) {
      (term.dots ? term.after : term.before).push_back(ch);
    } else if (t.compare(i, 3, "...") == 0 && !term.dots) {
      term.dots = true;
      i += 2;
    } else {
      throw a.error("equation '" + eq + "': term '" + t +
                    "' holds something other than letters and one '...'");
    }
  }
  return term;
}

Labels labels_of(const Term& t, int64_t dots, int64_t widest) {
  Labels l(t.before.begin(), t.before.end());
  for (int64_t j = widest - dots; j < widest; ++j) l.push_back(kEllipsis + static_cast<int>(j));
  l.insert(l.end(), t.after.begin(), t.after.end());
  return l;
}

struct Equation {
  std::vector<Labels> in;
  Labels out;
};

Equation parse(const NodeArgs& a, const std::vector<int64_t>& ranks) {
  const std::string given = a.s("equation", "");
  std::string eq;
  for (char ch : given) {
    if (!std::isspace(static_cast<unsigned char>(ch))) eq.push_back(ch);
  }
  const size_t arrow = eq.find("->");
  if (arrow != std::string::npos && eq.find("->", arrow + 1) != std::string::npos) {
    throw a.error("equation '" + given + "' has more than one '->'");
  }
  std::vector<Term> terms;
  const std::string lhs = eq.substr(0, arrow);
  for (size_t from = 0;;) {
    const size_t comma = lhs.find(',', from);
    terms.push_back(parse_term(a, given, lhs.substr(from, comma - from)));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  if (terms.size() != ranks.size()) {
    throw a.error("equation '" + given + "' has " + std::to_string(terms.size()) +
                  " input term(s) for " + std::to_string(ranks.size()) + " input(s)");
  }
  Equation e;
  int64_t widest = 0;
  bool any_dots = false;
  for (size_t i = 0; i < terms.size(); ++i) {
    const auto letters = static_cast<int64_t>(terms[i].letters());
    if (letters > ranks[i] || (!terms[i].dots && letters != ranks[i])) {
      throw a.error("equation '" + given + "': term " + std::to_string(i) + " has " +
                    std::to_string(letters) + " label(s) for input " + std::to_string(i) +
                    " of rank " + std::to_string(ranks[i]));
    }
    if (terms[i].dots) widest = std::max(widest, ranks[i] - letters);
    any_dots = any_dots || terms[i].dots;
  }
  std::vector<int> count(kEllipsis, 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    const int64_t dots = terms[i].dots ? ranks[i] - static_cast<int64_t>(terms[i].letters()) : 0;
    e.in.push_back(labels_of(terms[i], dots, widest));
    for (int l : e.in.back()) {
      if (l < kEllipsis) ++count[static_cast<size_t>(l)];
    }
  }
  if (arrow == std::string::npos) {
    // Implicit output: the ellipsis dims, then the letters used once, in alphabetical order
    // (character codes: upper case first).
    if (any_dots) e.out = labels_of(Term{"", "", true}, widest, widest);
    for (int l = 0; l < kEllipsis; ++l) {
      if (count[static_cast<size_t>(l)] == 1) e.out.push_back(l);
    }
    return e;
  }
  const Term out = parse_term(a, given, eq.substr(arrow + 2));
  e.out = labels_of(out, out.dots ? widest : 0, widest);
  std::set<int> seen;
  for (int l : e.out) {
    if (l < kEllipsis && count[static_cast<size_t>(l)] == 0) {
      throw a.error("equation '" + given + "': output label '" + label_str(l) +
                    "' is in no input term");
    }
    if (!seen.insert(l).second) {
      throw a.error("equation '" + given + "': output label '" + label_str(l) + "' is repeated");
    }
  }
  return e;
}

struct Operand {
  Tensor t;
  Labels l;
  int64_t size(int label) const {
    const auto at = std::find(l.begin(), l.end(), label) - l.begin();
    return t.size(at);
  }
  bool has(int label) const { return std::find(l.begin(), l.end(), label) != l.end(); }
};

// The diagonal of every label repeated within the operand; the label moves last.
void take_diagonals(const NodeArgs& a, Operand& o) {
  for (size_t i = 0; i < o.l.size(); ++i) {
    for (size_t j = i + 1; j < o.l.size(); ++j) {
      if (o.l[i] != o.l[j]) continue;
      const int64_t n = o.t.size(static_cast<int64_t>(i));
      if (o.t.size(static_cast<int64_t>(j)) != n) {
        throw a.error("label '" + label_str(o.l[i]) + "' is repeated within one input on dims of " +
                      std::to_string(n) + " and " +
                      std::to_string(o.t.size(static_cast<int64_t>(j))));
      }
      std::vector<int64_t> perm;
      Labels kept;
      Shape s;
      for (size_t d = 0; d < o.l.size(); ++d) {
        if (d == i || d == j) continue;
        perm.push_back(static_cast<int64_t>(d));
        kept.push_back(o.l[d]);
        s.push_back(o.t.size(static_cast<int64_t>(d)));
      }
      perm.push_back(static_cast<int64_t>(i));
      perm.push_back(static_cast<int64_t>(j));
      s.push_back(n * n);
      o.t = o.t.permute(perm).reshape(s).slice(-1, 0, n * n, n + 1);
      kept.push_back(o.l[i]);
      o.l = kept;
      i = static_cast<size_t>(-1);  // again from the start: a label may repeat thrice
      break;
    }
  }
}

// Sums the operand's dims whose label `drop` selects (kept as size 1 with `keep`).
template <class Pred>
void sum_labels(Operand& o, Pred drop, bool keep = false) {
  std::vector<int64_t> dims;
  Labels kept;
  for (size_t d = 0; d < o.l.size(); ++d) {
    if (drop(o.l[d])) {
      dims.push_back(static_cast<int64_t>(d));
      if (keep) kept.push_back(o.l[d]);
    } else {
      kept.push_back(o.l[d]);
    }
  }
  if (dims.empty()) return;
  o.t = sum(o.t, dims, keep);
  o.l = kept;
}

int64_t product_of(const Operand& o, const Labels& ls) {
  int64_t p = 1;
  for (int l : ls) p *= o.size(l);
  return p;
}

// A times B, summed over the labels they share that `later` lacks.
Operand contract(Operand A, Operand B, const std::set<int>& later) {
  const auto needed = [&](int l) { return later.count(l) > 0; };
  sum_labels(A, [&](int l) { return !B.has(l) && !needed(l); });
  sum_labels(B, [&](int l) { return !A.has(l) && !needed(l); });
  Labels batch, contracted, free_a, free_b;
  for (int l : A.l) {
    if (!B.has(l)) {
      free_a.push_back(l);
    } else {
      (needed(l) ? batch : contracted).push_back(l);
    }
  }
  for (int l : B.l) {
    if (!A.has(l)) free_b.push_back(l);
  }
  // A contracted dim of size 1 against a longer one: the other side summed over it first.
  for (int l : contracted) {
    if (A.size(l) == 1 && B.size(l) != 1)
      sum_labels(
          B, [&](int m) { return m == l; }, true);
    if (B.size(l) == 1 && A.size(l) != 1)
      sum_labels(
          A, [&](int m) { return m == l; }, true);
  }
  const auto perm_of = [](const Operand& o, std::initializer_list<const Labels*> parts) {
    std::vector<int64_t> perm;
    for (const Labels* p : parts) {
      for (int l : *p) perm.push_back(std::find(o.l.begin(), o.l.end(), l) - o.l.begin());
    }
    return perm;
  };
  Shape sa, sb, out;
  for (int l : batch) {
    sa.push_back(A.size(l));
    sb.push_back(B.size(l));
    out.push_back(std::max(A.size(l), B.size(l)));
  }
  const int64_t m = product_of(A, free_a), k = product_of(A, contracted), n = product_of(B, free_b);
  sa.insert(sa.end(), {m, k});
  sb.insert(sb.end(), {k, n});
  const Tensor ta = A.t.permute(perm_of(A, {&batch, &free_a, &contracted})).reshape(sa);
  const Tensor tb = B.t.permute(perm_of(B, {&batch, &contracted, &free_b})).reshape(sb);
  for (int l : free_a) out.push_back(A.size(l));
  for (int l : free_b) out.push_back(B.size(l));
  Operand r{matmul(ta, tb).reshape(out), batch};
  r.l.insert(r.l.end(), free_a.begin(), free_a.end());
  r.l.insert(r.l.end(), free_b.begin(), free_b.end());
  return r;
}

V einsum_op(const NodeArgs& a) {
  if (a.count() == 0) throw a.error("Einsum needs at least one input");
  std::vector<int64_t> ranks;
  for (size_t i = 0; i < a.count(); ++i) {
    if (a.in(i).dtype() == DType::boolean) throw a.error("bool inputs (expected numbers)");
    ranks.push_back(a.in(i).dim());
  }
  const Equation e = parse(a, ranks);
  // Each label's size: equal in every input, or 1 there (broadcast).
  std::map<int, std::pair<int64_t, size_t>> size;  // a label's size and an input holding it
  for (size_t i = 0; i < e.in.size(); ++i) {
    for (size_t d = 0; d < e.in[i].size(); ++d) {
      const int64_t n = a.in(i).size(static_cast<int64_t>(d));
      auto& [s, from] = size.try_emplace(e.in[i][d], n, i).first->second;
      if (s != n && s != 1 && n != 1) {
        throw a.error("label '" + label_str(e.in[i][d]) + "' is " + std::to_string(s) +
                      " in input " + std::to_string(from) + " and " + std::to_string(n) +
                      " in input " + std::to_string(i) + " (expected equal sizes, or 1)");
      }
      if (s == 1) std::tie(s, from) = std::make_pair(n, i);
    }
  }
  const std::set<int> outs(e.out.begin(), e.out.end());
  std::vector<Operand> ops;
  for (size_t i = 0; i < e.in.size(); ++i) {
    ops.push_back({a.in(i), e.in[i]});
    take_diagonals(a, ops.back());
  }
  Operand r = ops[0];
  if (ops.size() == 1) sum_labels(r, [&](int l) { return outs.count(l) == 0; });
  for (size_t i = 1; i < ops.size(); ++i) {
    std::set<int> later = outs;
    for (size_t j = i + 1; j < ops.size(); ++j) later.insert(ops[j].l.begin(), ops[j].l.end());
    r = contract(r, ops[i], later);
  }
  std::vector<int64_t> perm;
  for (int l : e.out) perm.push_back(std::find(r.l.begin(), r.l.end(), l) - r.l.begin());
  Tensor y = perm.empty() ? r.t : r.t.permute(perm);
  const DType want = a.in(0).dtype();
  return {y.dtype() == want ? y : cast(y, want)};
}

V topk_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  if (x.dtype() == DType::boolean) throw a.error("bool input (expected numbers)");
  const std::vector<int64_t> ks = a.values(1, "k");
  if (ks.size() != 1) throw a.error("k must be one value, got " + std::to_string(ks.size()));
  if (x.dim() == 0) throw a.error("the input is a scalar (expected rank 1 or more)");
  const int64_t axis = a.axis(a.i("axis", -1), x.dim()), n = x.size(axis), k = ks[0];
  if (k < 0 || k > n) {
    throw a.error("k = " + std::to_string(k) + " for an axis of " + std::to_string(n) +
                  " element(s) (expected 0 to " + std::to_string(n) + ")");
  }
  const bool largest = a.i("largest", 1) != 0;
  (void)a.i("sorted", 1);  // any order is allowed unsorted: the sorted one is
  if (k == 0) {
    const Tensor none = x.slice(axis, 0, 0);
    return {none, cast(none, DType::i64)};
  }
  const Device dev = x.device();
  const bool fp = is_floating(x.dtype());
  const double inf = std::numeric_limits<double>::infinity();
  Shape ps(static_cast<size_t>(x.dim()), 1);
  ps[static_cast<size_t>(axis)] = n;
  Tensor pos = arange(n).reshape(ps);
  if (!dev.is_cpu()) pos = pos.to(dev);
  const Tensor no = scalar_on(0, DType::boolean, dev);
  // What taken elements are filled with: never above (largest) or below (smallest) the rest.
  Tensor fill, nan, key = x;
  if (fp) {
    fill = scalar_on(largest ? -inf : inf, x.dtype(), dev);
    nan = ne(x, x);
    // Smallest first puts NaN last: it is found after the numbers, not by amin.
    if (!largest) key = where(nan, fill, x);
  } else {
    fill = largest ? amin(x, {axis}, true) : amax(x, {axis}, true);
  }
  V values, indices;
  Tensor open;  // the elements not taken yet (undefined: all)
  for (int64_t r = 0; r < k; ++r) {
    const Tensor avail = open.defined() ? where(open, key, fill) : key;
    Tensor m = largest ? amax(avail, {axis}, true) : amin(avail, {axis}, true);
    Tensor hit = eq(x, m);
    if (fp && largest) hit = where(ne(m, m), nan, hit);
    if (open.defined()) hit = where(open, hit, no);
    if (fp && !largest) {
      // None equal to the minimum: only NaN is left.
      const Tensor found = gt(amax(cast(hit, DType::i32), {axis}, true), 0.0);
      hit = where(found, hit, open.defined() ? where(open, nan, no) : nan);
      m = where(found, m, scalar_on(std::numeric_limits<double>::quiet_NaN(), x.dtype(), dev));
    }
    const Tensor at = argmax(cast(hit, DType::i32), axis, true);
    values.push_back(m);
    indices.push_back(at);
    if (r + 1 < k) open = open.defined() ? where(eq(pos, at), no, open) : ne(pos, at);
  }
  if (k == 1) return {values[0], indices[0]};
  return {cat(values, axis), cat(indices, axis)};
}

}  // namespace

void add_einsum_rules(std::vector<OpRule>& r) {
  r.push_back({"Einsum", einsum_op, {"equation"}});
  r.push_back({"TopK", topk_op, {"axis", "largest", "sorted"}, {1}});
}

}  // namespace zc::onnx_import
