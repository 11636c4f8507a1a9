// The recurrent operators LSTM, GRU and RNN, unrolled over the sequence when the rule runs (a
// traced tensor's length is known): the input's product with W for every step is one matmul,
// and each step adds the product of the previous hidden state with R and its gates. Each
// direction runs its own chain; the reverse one from the last step. The sequence lengths may
// only repeat the input's length (shorter sequences would end each row at its own step).
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "onnx/convert.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc::onnx_import {

namespace {

using V = std::vector<Tensor>;

// The functions ONNX lets a recurrent operator's gates apply, with their alpha and beta.
enum class ActKind {
  sigmoid,
  tanh,
  relu,
  affine,
  leaky_relu,
  thresholded_relu,
  scaled_tanh,
  hard_sigmoid,
  elu,
  softsign,
  softplus
};

struct Activation {
  ActKind kind;
  double alpha = 0, beta = 0;
};

// A name, whether it takes alpha and beta, and their defaults (those of the ONNX operator of
// that name; Affine and ScaledTanh have none, so the node must give them).
struct ActInfo {
  const char* name;
  ActKind kind;
  bool takes_alpha, takes_beta;
  double alpha, beta;
  bool needs_values;
};

constexpr ActInfo kActivations[] = {
    {"Sigmoid", ActKind::sigmoid, false, false, 0, 0, false},
    {"Tanh", ActKind::tanh, false, false, 0, 0, false},
    {"Relu", ActKind::relu, false, false, 0, 0, false},
    {"Affine", ActKind::affine, true, true, 0, 0, true},
    {"LeakyRelu", ActKind::leaky_relu, true, false, 0.01, 0, false},
    {"ThresholdedRelu", ActKind::thresholded_relu, true, false, 1.0, 0, false},
    {"ScaledTanh", ActKind::scaled_tanh, true, true, 0, 0, true},
    {"HardSigmoid", ActKind::hard_sigmoid, true, true, 0.2, 0.5, false},
    {"Elu", ActKind::elu, true, false, 1.0, 0, false},
    {"Softsign", ActKind::softsign, false, false, 0, 0, false},
    {"Softplus", ActKind::softplus, false, false, 0, 0, false},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

Tensor apply(const Activation& f, const Tensor& x) {
  switch (f.kind) {
    case ActKind::sigmoid:
      return sigmoid(x);
    case ActKind::tanh:
      return tanh(x);
    case ActKind::relu:
      return relu(x);
    case ActKind::affine:
      return x * f.alpha + f.beta;
    case ActKind::leaky_relu:
      return where(ge(x, 0.0), x, x * f.alpha);
    case ActKind::thresholded_relu:
      return where(gt(x, f.alpha), x, zeros({}, x.dtype()));
    case ActKind::scaled_tanh:
      return tanh(x * f.beta) * f.alpha;
    case ActKind::hard_sigmoid:
      return clamp(x * f.alpha + f.beta, 0.0, 1.0);
    case ActKind::elu:
      return where(ge(x, 0.0), x, (exp(x) - 1.0) * f.alpha);
    case ActKind::softsign:
      return x / (abs(x) + 1.0);
    case ActKind::softplus:
      return relu(x) + log(exp(-abs(x)) + 1.0);  // neither side overflows
  }
  return x;
}

// The node's activations, `per` for each direction (the defaults where it names none). The
// alphas and betas are consumed in order by the functions that take them, as ONNX Runtime
// reads them; a function they run out for takes its operator's default.
std::vector<Activation> activations_of(const NodeArgs& a, size_t per, int64_t dirs,
                                       const std::vector<std::string>& defaults) {
  std::vector<std::string> names;
  if (const auto* attr = a.attr("activations")) {
    names.assign(attr->strings().begin(), attr->strings().end());
  }
  if (names.empty()) {
    for (int64_t d = 0; d < dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  }
  // RNN's schema default lists two Tanh whatever the direction: one direction takes the first,
  // as ONNX Runtime does.
  if (per == 1 && dirs == 1 && names.size() == 2) names.resize(1);
  if (names.size() != per * static_cast<size_t>(dirs)) {
    throw a.error("activations lists " + std::to_string(names.size()) + " function(s); " +
                  a.node.op_type() + " takes " + std::to_string(per) + " per direction (" +
                  std::to_string(per * static_cast<size_t>(dirs)) + " here)");
  }
  std::vector<float> alphas, betas;
  if (const auto* attr = a.attr("activation_alpha")) {
    alphas.assign(attr->floats().begin(), attr->floats().end());
  }
  if (const auto* attr = a.attr("activation_beta")) {
    betas.assign(attr->floats().begin(), attr->floats().end());
  }
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> out;
  for (const std::string& name : names) {
    const ActInfo* info = nullptr;
    for (const ActInfo& i : kActivations) {
      if (lower(i.name) == lower(name)) info = &i;
    }
    if (!info) {
      std::string known;
      for (const ActInfo& i : kActivations)
        known += (known.empty() ? "" : ", ") + std::string(i.name);
      throw a.error("activation '" + name + "' is not supported (zc supports " + known + ")");
    }
    Activation f{info->kind, info->alpha, info->beta};
    const bool has_alpha = info->takes_alpha && next_alpha < alphas.size();
    const bool has_beta = info->takes_beta && next_beta < betas.size();
    if (info->needs_values && (!has_alpha || !has_beta)) {
      throw a.error("activation " + std::string(info->name) +
                    " has no default alpha and beta; give them in activation_alpha and "
                    "activation_beta");
    }
    if (has_alpha) f.alpha = alphas[next_alpha++];
    if (has_beta) f.beta = betas[next_beta++];
    out.push_back(f);
  }
  return out;
}

// What the three operators share: the input, its sizes, the directions and the clip.
struct Recurrence {
  Tensor x;  // as the file has it: [seq, batch, input], or [batch, seq, input] in layout 1
  bool batch_first = false;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1, gates = 1;
  std::vector<bool> reversed;  // per direction: whether it runs from the last step
  bool clips = false;
  double clip = 0;
  std::vector<Activation> acts;  // `per` for each direction
};

void check_shape(const NodeArgs& a, const Tensor& t, const char* what, const Shape& want) {
  if (t.shape() != want) {
    throw a.error(std::string(what) + " is " + shape_str(t.shape()) + ", expected " +
                  shape_str(want));
  }
}

// Inputs X, W, R, B and sequence_lens (0 to 4) and the attributes of every recurrent operator.
Recurrence recurrence(const NodeArgs& a, int64_t gates, size_t per,
                      const std::vector<std::string>& defaults) {
  Recurrence c;
  c.gates = gates;
  const int64_t layout = a.i("layout", 0);
  if (layout != 0 && layout != 1) throw a.error("layout must be 0 or 1");
  c.batch_first = layout == 1;
  c.x = a.in(0);
  if (c.x.dim() != 3) throw a.error("X must have 3 dims, got " + shape_str(c.x.shape()));
  c.seq = c.x.size(c.batch_first ? 1 : 0);
  c.batch = c.x.size(c.batch_first ? 0 : 1);
  c.input = c.x.size(2);
  if (c.seq == 0) throw a.error("an empty sequence (X " + shape_str(c.x.shape()) + ")");
  const std::string direction = a.s("direction", "forward");
  if (direction == "forward" || direction == "reverse") {
    c.reversed = {direction == "reverse"};
  } else if (direction == "bidirectional") {
    c.reversed = {false, true};
  } else {
    throw a.error("direction '" + direction + "' (forward, reverse or bidirectional)");
  }
  c.dirs = static_cast<int64_t>(c.reversed.size());
  const Tensor& r = a.in(2);
  if (r.dim() != 3) throw a.error("R must have 3 dims, got " + shape_str(r.shape()));
  c.hidden = a.i("hidden_size", r.size(2));
  if (c.hidden < 1) throw a.error("hidden_size must be positive");
  check_shape(a, a.in(1), "W", {c.dirs, gates * c.hidden, c.input});
  check_shape(a, r, "R", {c.dirs, gates * c.hidden, c.hidden});
  if (a.has(3)) check_shape(a, a.in(3), "B", {c.dirs, 2 * gates * c.hidden});
  if (a.has(4)) {
    const std::vector<int64_t> lens = a.values(4, "sequence_lens");
    if (static_cast<int64_t>(lens.size()) != c.batch) {
      throw a.error("sequence_lens has " + std::to_string(lens.size()) +
                    " length(s) for a batch of " + std::to_string(c.batch));
    }
    for (int64_t len : lens) {
      if (len != c.seq) {
        throw a.error("sequence_lens holds " + std::to_string(len) +
                      ", zc supports only sequences of the input's full length " +
                      std::to_string(c.seq) +
                      " (run each length apart, or leave sequence_lens out)");
      }
    }
  }
  if (const auto* attr = a.attr("clip")) {
    c.clips = true;
    c.clip = attr->f();
    if (!(c.clip > 0)) throw a.error("clip must be positive, got " + std::to_string(c.clip));
  }
  c.acts = activations_of(a, per, c.dirs, defaults);
  return c;
}

// The input's product with direction d's W and `bias` for every step at once: [steps of X's
// layout, gates * hidden].
Tensor input_products(const Recurrence& c, const Tensor& w, const Tensor& bias) {
  const Tensor flat = c.x.reshape({-1, c.input});
  return linear(flat, w, bias).reshape({c.x.size(0), c.x.size(1), c.gates * c.hidden});
}

// Step t's rows of the input products: [batch, gates * hidden].
Tensor at_step(const Recurrence& c, const Tensor& products, int64_t t) {
  return products.select(c.batch_first ? 1 : 0, t);
}

// Gate k of a [batch, gates * hidden] row: [batch, hidden].
Tensor gate(const Recurrence& c, const Tensor& g, int64_t k) {
  return g.slice(1, k * c.hidden, (k + 1) * c.hidden);
}

Tensor clipped(const Recurrence& c, const Tensor& x) {
  return c.clips ? clamp(x, -c.clip, c.clip) : x;
}

// Direction d's half of B: W's bias (0) or R's (1), [gates * hidden]; undefined without B.
Tensor bias_of(const NodeArgs& a, const Recurrence& c, int64_t d, int64_t half) {
  if (!a.has(3)) return {};
  const int64_t n = c.gates * c.hidden;
  return a.in(3).select(0, d).slice(0, half * n, (half + 1) * n);
}

// Direction d's initial state from input i ([dirs, batch, hidden], [batch, dirs, hidden] in
// layout 1); undefined where the node leaves it out, for zeros: the first step then skips the
// terms it is a factor of (a tensor of zeros would be a constant of the batch size, and the
// graph would trace differently at every batch size).
Tensor initial_state(const NodeArgs& a, const Recurrence& c, size_t i, int64_t d,
                     const char* what) {
  if (!a.has(i)) return Tensor();
  const Tensor& s = a.in(i);
  check_shape(a, s, what,
              c.batch_first ? Shape{c.batch, c.dirs, c.hidden} : Shape{c.dirs, c.batch, c.hidden});
  return s.select(c.batch_first ? 1 : 0, d);
}

// The order direction d visits the steps in.
int64_t step_at(const Recurrence& c, int64_t d, int64_t k) {
  return c.reversed[static_cast<size_t>(d)] ? c.seq - 1 - k : k;
}

// The outputs Y (every step's hidden state, [seq, dirs, batch, hidden] or [batch, seq, dirs,
// hidden] in layout 1) and the last states, [dirs, batch, hidden] or [batch, dirs, hidden].
// `hs` holds each direction's hidden states in the order of the steps; Y only where the node
// names it.
Tensor all_steps(const Recurrence& c, const std::vector<std::vector<Tensor>>& hs) {
  std::vector<Tensor> per_dir;
  for (const auto& h : hs) per_dir.push_back(stack(h, 0));  // [seq, batch, hidden]
  const Tensor y = stack(per_dir, 1);                       // [seq, dirs, batch, hidden]
  return c.batch_first ? y.permute({2, 0, 1, 3}) : y;
}

Tensor last_states(const Recurrence& c, const std::vector<Tensor>& last) {
  const Tensor s = stack(last, 0);  // [dirs, batch, hidden]
  return c.batch_first ? s.transpose(0, 1) : s;
}

bool wants(const NodeArgs& a, int k) {
  return k < a.node.output_size() && !a.node.output(k).empty();
}

// The hidden states of every step and the last ones, the result every operator gives.
struct Run {
  std::vector<std::vector<Tensor>> hs;  // per direction, per step in the input's order
  std::vector<Tensor> last_h, last_c;   // per direction
};

V outputs(const NodeArgs& a, const Recurrence& c, const Run& run) {
  V out{wants(a, 0) ? all_steps(c, run.hs) : Tensor(), last_states(c, run.last_h)};
  if (!run.last_c.empty()) out.push_back(last_states(c, run.last_c));
  return out;
}

// Inputs: X, W, R, B, sequence_lens, initial_h, initial_c, P. Gates i, o, f, c.
//   i = f(Xt Wi + Ht-1 Ri + Pi . Ct-1 + Wbi + Rbi)   (f for the forget gate alike)
//   c' = g(Xt Wc + Ht-1 Rc + Wbc + Rbc),  Ct = f . Ct-1 + i . c'
//   o = f(Xt Wo + Ht-1 Ro + Po . Ct + Wbo + Rbo),  Ht = o . h(Ct)
// input_forget couples the forget gate to the input gate: 1 - i.
V lstm(const NodeArgs& a) {
  const Recurrence c = recurrence(a, 4, 3, {"Sigmoid", "Tanh", "Tanh"});
  const bool coupled = a.i("input_forget", 0) != 0;
  if (a.has(7)) check_shape(a, a.in(7), "P", {c.dirs, 3 * c.hidden});
  Run run;
  for (int64_t d = 0; d < c.dirs; ++d) {
    const Activation& f = c.acts[static_cast<size_t>(3 * d)];
    const Activation& g = c.acts[static_cast<size_t>(3 * d + 1)];
    const Activation& h_act = c.acts[static_cast<size_t>(3 * d + 2)];
    const Tensor w = a.in(1).select(0, d), r = a.in(2).select(0, d);
    const Tensor wb = bias_of(a, c, d, 0), rb = bias_of(a, c, d, 1);
    const Tensor xw = input_products(c, w, wb.defined() ? wb + rb : Tensor());
    Tensor pi, po, pf;
    if (a.has(7)) {
      const Tensor p = a.in(7).select(0, d);
      pi = p.slice(0, 0, c.hidden);
      po = p.slice(0, c.hidden, 2 * c.hidden);
      pf = p.slice(0, 2 * c.hidden, 3 * c.hidden);
    }
    Tensor h = initial_state(a, c, 5, d, "initial_h");
    Tensor cell = initial_state(a, c, 6, d, "initial_c");
    std::vector<Tensor> hs(static_cast<size_t>(c.seq));
    for (int64_t k = 0; k < c.seq; ++k) {
      const int64_t t = step_at(c, d, k);
      const Tensor gates = h.defined() ? at_step(c, xw, t) + linear(h, r) : at_step(c, xw, t);
      Tensor i_in = gate(c, gates, 0), o_in = gate(c, gates, 1), f_in = gate(c, gates, 2);
      if (pi.defined() && cell.defined()) {
        i_in = i_in + pi * cell;
        f_in = f_in + pf * cell;
      }
      const Tensor i = apply(f, clipped(c, i_in));
      const Tensor forget = coupled ? 1.0 - i : apply(f, clipped(c, f_in));
      const Tensor candidate = apply(g, clipped(c, gate(c, gates, 3)));
      cell = cell.defined() ? forget * cell + i * candidate : i * candidate;
      if (po.defined()) o_in = o_in + po * cell;
      h = apply(f, clipped(c, o_in)) * apply(h_act, cell);
      hs[static_cast<size_t>(t)] = h;
    }
    run.hs.push_back(std::move(hs));
    run.last_h.push_back(h);
    run.last_c.push_back(cell);
  }
  return outputs(a, c, run);
}

// Inputs: X, W, R, B, sequence_lens, initial_h. Gates z, r, h.
//   z = f(Xt Wz + Ht-1 Rz + Wbz + Rbz),  r alike
//   h' = g(Xt Wh + (r . Ht-1) Rh + Rbh + Wbh)       (linear_before_reset 0)
//   h' = g(Xt Wh + r . (Ht-1 Rh + Rbh) + Wbh)       (linear_before_reset 1)
//   Ht = (1 - z) . h' + z . Ht-1
V gru(const NodeArgs& a) {
  const Recurrence c = recurrence(a, 3, 2, {"Sigmoid", "Tanh"});
  const bool before_reset = a.i("linear_before_reset", 0) != 0;
  const int64_t n = c.hidden;
  Run run;
  for (int64_t d = 0; d < c.dirs; ++d) {
    const Activation& f = c.acts[static_cast<size_t>(2 * d)];
    const Activation& g = c.acts[static_cast<size_t>(2 * d + 1)];
    const Tensor w = a.in(1).select(0, d), r = a.in(2).select(0, d);
    const Tensor wb = bias_of(a, c, d, 0), rb = bias_of(a, c, d, 1);
    // Every bias joins the input products but Rbh under linear_before_reset, which the reset
    // gate scales with the recurrent product.
    Tensor bias, rbh;
    if (wb.defined()) {
      bias = wb + rb;
      if (before_reset) {
        rbh = rb.slice(0, 2 * n, 3 * n);
        bias = cat({bias.slice(0, 0, 2 * n), wb.slice(0, 2 * n, 3 * n)});
      }
    }
    const Tensor xw = input_products(c, w, bias);
    const Tensor r_zr = r.slice(0, 0, 2 * n), r_h = r.slice(0, 2 * n, 3 * n);
    Tensor h = initial_state(a, c, 5, d, "initial_h");
    std::vector<Tensor> hs(static_cast<size_t>(c.seq));
    for (int64_t k = 0; k < c.seq; ++k) {
      const int64_t t = step_at(c, d, k);
      const Tensor x_t = at_step(c, xw, t);
      Tensor candidate_in;
      Tensor z, reset;
      if (before_reset) {
        const Tensor hr = h.defined() ? linear(h, r) : Tensor();
        const Tensor gates = hr.defined() ? x_t + hr : x_t;
        z = apply(f, clipped(c, gate(c, gates, 0)));
        reset = apply(f, clipped(c, gate(c, gates, 1)));
        Tensor rh = hr.defined() ? gate(c, hr, 2) : Tensor();
        if (rbh.defined()) rh = rh.defined() ? rh + rbh : rbh;
        candidate_in = rh.defined() ? gate(c, x_t, 2) + reset * rh : gate(c, x_t, 2);
      } else {
        const Tensor x_zr = x_t.slice(1, 0, 2 * n);
        const Tensor gates = h.defined() ? x_zr + linear(h, r_zr) : x_zr;
        z = apply(f, clipped(c, gate(c, gates, 0)));
        reset = apply(f, clipped(c, gate(c, gates, 1)));
        candidate_in = h.defined() ? gate(c, x_t, 2) + linear(reset * h, r_h) : gate(c, x_t, 2);
      }
      const Tensor candidate = apply(g, clipped(c, candidate_in));
      h = h.defined() ? (1.0 - z) * candidate + z * h : (1.0 - z) * candidate;
      hs[static_cast<size_t>(t)] = h;
    }
    run.hs.push_back(std::move(hs));
    run.last_h.push_back(h);
  }
  return outputs(a, c, run);
}

// Inputs: X, W, R, B, sequence_lens, initial_h.  Ht = f(Xt Wi + Ht-1 Ri + Wbi + Rbi).
V rnn(const NodeArgs& a) {
  const Recurrence c = recurrence(a, 1, 1, {"Tanh"});
  Run run;
  for (int64_t d = 0; d < c.dirs; ++d) {
    const Activation& f = c.acts[static_cast<size_t>(d)];
    const Tensor w = a.in(1).select(0, d), r = a.in(2).select(0, d);
    const Tensor wb = bias_of(a, c, d, 0), rb = bias_of(a, c, d, 1);
    const Tensor xw = input_products(c, w, wb.defined() ? wb + rb : Tensor());
    Tensor h = initial_state(a, c, 5, d, "initial_h");
    std::vector<Tensor> hs(static_cast<size_t>(c.seq));
    for (int64_t k = 0; k < c.seq; ++k) {
      const int64_t t = step_at(c, d, k);
      const Tensor x_t = at_step(c, xw, t);
      h = apply(f, clipped(c, h.defined() ? x_t + linear(h, r) : x_t));
      hs[static_cast<size_t>(t)] = h;
    }
    run.hs.push_back(std::move(hs));
    run.last_h.push_back(h);
  }
  return outputs(a, c, run);
}

}  // namespace

void add_recurrent_rules(std::vector<OpRule>& r) {
  // sequence_lens (input 4) is read as numbers: it stays on the CPU.
  r.push_back({"LSTM",
               lstm,
               {"activation_alpha", "activation_beta", "activations", "clip", "direction",
                "hidden_size", "input_forget", "layout"},
               {4}});
  r.push_back({"GRU",
               gru,
               {"activation_alpha", "activation_beta", "activations", "clip", "direction",
                "hidden_size", "layout", "linear_before_reset"},
               {4}});
  r.push_back({"RNN",
               rnn,
               {"activation_alpha", "activation_beta", "activations", "clip", "direction",
                "hidden_size", "layout"},
               {4}});
}

}  // namespace zc::onnx_import
