// Indexing operators: GatherElements, GatherND, ScatterElements, ScatterND and CumSum, as
// compositions of zc's ops.
//
// A gather is one embedding lookup: the data viewed as a table of rows, each index turned into
// a row number of that view (flat offsets computed from the indices with zc's arithmetic, so
// indices computed from the inputs are traced as any other value). An index outside its dim
// becomes row -1, which the lookup refuses with a zc::Error, eagerly and in compiled code.
//
// A scatter needs its indices known when the rule runs (constants of the file, or values made
// from shapes, which is how torch's exporters write slice assignments and masks): the positions
// are computed here, and the scatter becomes a gather of the updates and a `where` over the
// data, exact for every dtype. Repeated positions apply in index order, one round each, as ONNX
// Runtime does.
//
// CumSum is a scan of log2(n) shifted additions (Hillis and Steele): exact for integers, and
// for floats a sum in another order than a sequential loop's, within rounding of it.
#include <algorithm>
#include <numeric>

#include "onnx/convert.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc::onnx_import {

namespace {

using V = std::vector<Tensor>;

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t d = from; d < to; ++d) p *= s[d];
  return p;
}

// Indices counted from the end made non-negative against a dim of n; one outside [-n, n)
// becomes -1. `bad`, when given, accumulates (as i64 0/1) which elements were outside.
Tensor wrap(const Tensor& idx, int64_t n, Tensor* bad = nullptr) {
  Tensor k = cast(idx, DType::i64);
  k = where(lt(k, 0.0), k + static_cast<double>(n), k);
  const Tensor outside =
      cast(lt(k, 0.0), DType::i64) + cast(ge(k, static_cast<double>(n)), DType::i64);
  if (bad) *bad = bad->defined() ? *bad + outside : outside;
  return where(gt(outside, 0.0), scalar_on(-1, DType::i64, k.device()), k);
}

// The known values of an indices input (not traced), checked against a dim of n: an Error
// naming the first one outside it.
void check_known(const NodeArgs& a, const Tensor& idx, int64_t n, const char* what) {
  if (idx.is_traced()) return;
  const Tensor c = cast(idx.to(Device::cpu()), DType::i64).contiguous();
  const int64_t* p = c.data<int64_t>();
  for (int64_t i = 0; i < c.numel(); ++i) {
    if (p[i] < -n || p[i] >= n) {
      throw a.error(std::string(what) + " " + std::to_string(p[i]) +
                    " is out of range for a dim of " + std::to_string(n));
    }
  }
}

// arange(count) * step on `device`, reshaped to `shape` (count elements): the first row number
// of each row group, broadcast against the indices.
Tensor row_offsets(int64_t count, int64_t step, const Shape& shape, Device device) {
  const Tensor t = (arange(count) * static_cast<double>(step)).reshape(shape);
  return device.is_cpu() ? t : t.to(device);
}

// out[i][j][k] = data[i][index[i][j][k]][k] (axis 1): the axis moved last, the other dims
// flattened to M rows of n, and row r's indices offset by r * n.
V gather_elements_op(const NodeArgs& a) {
  Tensor x = a.in(0);
  const Tensor& idx = a.in(1);
  const int64_t r = x.dim();
  if (!is_integral(idx.dtype())) throw a.error("indices must be integers");
  if (idx.dim() != r) {
    throw a.error("indices of rank " + std::to_string(idx.dim()) + " for data of rank " +
                  std::to_string(r) + " (they must be equal)");
  }
  const int64_t axis = a.axis(a.i("axis", 0), r), n = x.size(axis);
  check_known(a, idx, n, "index");
  std::vector<int64_t> perm, back(static_cast<size_t>(r));
  for (int64_t d = 0; d < r; ++d) {
    if (d == axis) continue;
    if (idx.size(d) > x.size(d)) {
      throw a.error("indices " + shape_str(idx.shape()) + " are larger than data " +
                    shape_str(x.shape()) + " in dim " + std::to_string(d));
    }
    x = x.slice(d, 0, idx.size(d));
    perm.push_back(d);
  }
  perm.push_back(axis);
  for (int64_t d = 0; d < r; ++d) back[static_cast<size_t>(perm[static_cast<size_t>(d)])] = d;
  const Tensor xt = x.permute(perm), kt = idx.permute(perm);
  const int64_t rows = product(xt.shape(), 0, static_cast<size_t>(r - 1));
  Tensor flat = wrap(kt, n);
  if (rows > 1) {
    Shape s(xt.shape().begin(), xt.shape().end() - 1);
    s.push_back(1);
    flat = where(lt(flat, 0.0), flat, flat + row_offsets(rows, n, s, flat.device()));
  }
  const Tensor table = xt.reshape({rows * n, 1});
  return {embedding(table, flat).reshape(kt.shape()).permute(back)};
}

// out[..] = data[batch.., index[.., 0], .., index[.., k - 1], rest..]: the data viewed as rows of
// its dims past the indexed ones, each index tuple turned into a row number.
V gather_nd_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  const Tensor& idx = a.in(1);
  if (!is_integral(idx.dtype())) throw a.error("indices must be integers");
  const int64_t b = a.i("batch_dims", 0), q = idx.dim(), r = x.dim();
  if (q < 1 || b < 0 || b >= std::min(q, r)) {
    throw a.error("batch_dims " + std::to_string(b) + " for data of rank " + std::to_string(r) +
                  " and indices of rank " + std::to_string(q));
  }
  const int64_t k = idx.size(q - 1);
  if (k < 1 || k > r - b) {
    throw a.error("index tuples of " + std::to_string(k) + " for data of rank " +
                  std::to_string(r) + " with " + std::to_string(b) + " batch dims");
  }
  for (int64_t d = 0; d < b; ++d) {
    if (idx.size(d) != x.size(d)) {
      throw a.error("batch dim " + std::to_string(d) + " is " + std::to_string(idx.size(d)) +
                    " in the indices and " + std::to_string(x.size(d)) + " in the data");
    }
  }
  const Shape& xs = x.shape();
  const auto ub = static_cast<size_t>(b), uk = static_cast<size_t>(k);
  const int64_t batch = product(xs, 0, ub), block = product(xs, ub, ub + uk);
  const int64_t width = product(xs, ub + uk, xs.size());
  Tensor flat, bad;
  int64_t stride = block;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t n = xs[ub + static_cast<size_t>(j)];
    stride /= std::max<int64_t>(n, 1);
    const Tensor kj = idx.slice(q - 1, j, j + 1).squeeze(q - 1);
    check_known(a, kj, n, "index");
    const Tensor term = wrap(kj, n, &bad) * static_cast<double>(stride);
    flat = flat.defined() ? flat + term : term;
  }
  if (batch > 1) {
    Shape s(idx.shape().begin(), idx.shape().begin() + b);
    s.resize(static_cast<size_t>(q - 1), 1);
    flat = flat + row_offsets(batch, block, s, flat.device());
  }
  flat = where(gt(bad, 0.0), scalar_on(-1, DType::i64, flat.device()), flat);
  Shape out(idx.shape().begin(), idx.shape().end() - 1);
  out.insert(out.end(), xs.begin() + b + k, xs.end());
  return {embedding(x.reshape({batch * block, width}), flat).reshape(out)};
}

// The positions of a scatter, known when the rule runs: `target[u]` is the row of the data's
// table that update row u writes.
Tensor scatter_rows(const NodeArgs& a, const Tensor& table, const Tensor& updates,
                    const std::vector<int64_t>& target) {
  const std::string reduction = a.s("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
      reduction != "min") {
    throw a.error("reduction '" + reduction + "' (expected none, add, mul, max or min)");
  }
  const int64_t rows = table.size(0);
  // Round r holds, for each row, the update that is the r-th to write it (-1: none).
  std::vector<std::vector<int64_t>> rounds;
  std::vector<int64_t> seen(static_cast<size_t>(rows), 0);
  for (size_t u = 0; u < target.size(); ++u) {
    int64_t& count = seen[static_cast<size_t>(target[u])];
    // With reduction none a repeated position keeps the last update (ONNX leaves it undefined).
    const size_t round = reduction == "none" ? 0 : static_cast<size_t>(count);
    ++count;
    if (rounds.size() <= round) rounds.emplace_back(static_cast<size_t>(rows), -1);
    rounds[round][static_cast<size_t>(target[u])] = static_cast<int64_t>(u);
  }
  Tensor out = table;
  for (const std::vector<int64_t>& src : rounds) {
    std::vector<int64_t> from(src.size());
    std::vector<bool> hit(src.size());
    for (size_t p = 0; p < src.size(); ++p) {
      from[p] = std::max<int64_t>(src[p], 0);
      hit[p] = src[p] >= 0;
    }
    Tensor rows_from = i64_values(from), mask = from_values<bool>(hit, {rows, 1});
    if (!table.device().is_cpu()) {
      rows_from = rows_from.to(table.device());
      mask = mask.to(table.device());
    }
    const Tensor g = embedding(updates, rows_from);
    Tensor v = g;
    if (reduction == "add") v = out + g;
    if (reduction == "mul") v = out * g;
    if (reduction == "max") v = maximum(out, g);
    if (reduction == "min") v = minimum(out, g);
    out = where(mask, cast(v, out.dtype()), out);
  }
  return out;
}

std::vector<int64_t> known_indices(const NodeArgs& a, const Tensor& idx) {
  if (!is_integral(idx.dtype())) throw a.error("indices must be integers");
  if (idx.is_traced()) {
    throw a.error(
        "scatter indices computed from the model's input values are not supported: zc needs "
        "them known when the model is traced (constants of the file, or values made from "
        "shapes)");
  }
  const Tensor c = cast(idx.to(Device::cpu()), DType::i64).contiguous();
  return std::vector<int64_t>(c.data<int64_t>(), c.data<int64_t>() + c.numel());
}

V scatter_nd_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  const Tensor& idx = a.in(1);
  const Tensor& upd = a.in(2);
  const std::vector<int64_t> ks = known_indices(a, idx);
  const Shape& xs = x.shape();
  const int64_t q = idx.dim(), k = q > 0 ? idx.size(q - 1) : 0;
  if (q < 1 || k < 1 || k > x.dim()) {
    throw a.error("indices " + shape_str(idx.shape()) + " for data of rank " +
                  std::to_string(x.dim()));
  }
  Shape want(idx.shape().begin(), idx.shape().end() - 1);
  want.insert(want.end(), xs.begin() + k, xs.end());
  if (upd.shape() != want) {
    throw a.error("updates " + shape_str(upd.shape()) + " for indices " + shape_str(idx.shape()) +
                  " and data " + shape_str(xs) + " (expected " + shape_str(want) + ")");
  }
  const auto uk = static_cast<size_t>(k);
  const int64_t count = product(idx.shape(), 0, static_cast<size_t>(q - 1));
  const int64_t width = product(xs, uk, xs.size());
  if (count == 0) return {x};
  std::vector<int64_t> target(static_cast<size_t>(count));
  for (int64_t u = 0; u < count; ++u) {
    int64_t row = 0;
    for (size_t j = 0; j < uk; ++j) {
      const int64_t n = xs[j];
      int64_t v = ks[static_cast<size_t>(u) * uk + j];
      if (v < -n || v >= n) {
        throw a.error("index " + std::to_string(v) + " is out of range for dim " +
                      std::to_string(j) + " of " + std::to_string(n));
      }
      row = row * n + (v < 0 ? v + n : v);
    }
    target[static_cast<size_t>(u)] = row;
  }
  const Tensor table = x.reshape({product(xs, 0, uk), width});
  return {scatter_rows(a, table, upd.reshape({count, width}), target).reshape(xs)};
}

V scatter_elements_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  const Tensor& idx = a.in(1);
  const Tensor& upd = a.in(2);
  const int64_t r = x.dim();
  if (idx.shape() != upd.shape() || idx.dim() != r) {
    throw a.error("indices " + shape_str(idx.shape()) + " and updates " + shape_str(upd.shape()) +
                  " for data " + shape_str(x.shape()) +
                  " (they must have one shape, of the data's rank)");
  }
  const int64_t axis = a.axis(a.i("axis", 0), r), n = x.size(axis);
  for (int64_t d = 0; d < r; ++d) {
    if (d != axis && idx.size(d) > x.size(d)) {
      throw a.error("indices " + shape_str(idx.shape()) + " are larger than data " +
                    shape_str(x.shape()) + " in dim " + std::to_string(d));
    }
  }
  const std::vector<int64_t> ks = known_indices(a, idx);
  if (ks.empty()) return {x};
  // Each update's position in the data: its own coordinates, the axis' replaced by its index.
  std::vector<int64_t> target(ks.size()), at(static_cast<size_t>(r), 0);
  for (size_t u = 0; u < ks.size(); ++u) {
    int64_t v = ks[u];
    if (v < -n || v >= n) {
      throw a.error("index " + std::to_string(v) + " is out of range for a dim of " +
                    std::to_string(n));
    }
    int64_t flat = 0;
    for (int64_t d = 0; d < r; ++d) {
      const int64_t c = d == axis ? (v < 0 ? v + n : v) : at[static_cast<size_t>(d)];
      flat = flat * x.size(d) + c;
    }
    target[u] = flat;
    for (int64_t d = r - 1; d >= 0; --d) {  // the next coordinates of the indices
      if (++at[static_cast<size_t>(d)] < idx.size(d)) break;
      at[static_cast<size_t>(d)] = 0;
    }
  }
  const auto count = static_cast<int64_t>(ks.size());
  return {scatter_rows(a, x.reshape({x.numel(), 1}), upd.reshape({count, 1}), target)
              .reshape(x.shape())};
}

// x shifted by `s` along `axis` towards its end (or its start, `back`), zeros filling in.
Tensor shifted(const Tensor& x, int64_t axis, int64_t s, bool back) {
  const int64_t n = x.size(axis);
  Shape zs = x.shape();
  zs[static_cast<size_t>(axis)] = s;
  const Tensor z = scalar_on(0, x.dtype(), x.device()).expand(zs);  // a broadcast (capture)
  return back ? cat({x.slice(axis, s, n), z}, axis) : cat({z, x.slice(axis, 0, n - s)}, axis);
}

V cumsum_op(const NodeArgs& a) {
  const Tensor& x = a.in(0);
  if (x.dtype() == DType::boolean) throw a.error("bool input (expected numbers)");
  const std::vector<int64_t> axes = a.values(1, "axis");
  if (axes.size() != 1) throw a.error("axis must be one value");
  const int64_t axis = a.axis(axes[0], x.dim()), n = x.size(axis);
  const bool reverse = a.i("reverse", 0) != 0, exclusive = a.i("exclusive", 0) != 0;
  Tensor y = x;
  for (int64_t s = 1; s < n; s *= 2) y = y + shifted(y, axis, s, reverse);
  if (exclusive && n > 0) y = shifted(y, axis, 1, reverse);
  return {y};
}

}  // namespace

void add_indexing_rules(std::vector<OpRule>& r) {
  r.push_back({"GatherElements", gather_elements_op, {"axis"}});
  r.push_back({"GatherND", gather_nd_op, {"batch_dims"}});
  r.push_back({"ScatterElements", scatter_elements_op, {"axis", "reduction"}});
  r.push_back({"ScatterND", scatter_nd_op, {"reduction"}});
  r.push_back({"CumSum", cumsum_op, {"exclusive", "reverse"}, {1}});
}

}  // namespace zc::onnx_import
