// ONNX cases of the recurrent operators: LSTM, GRU and RNN in each direction and layout, with
// and without their optional inputs, every output, clip, the GRU's linear_before_reset, the
// LSTM's peepholes and input_forget, other activations, sizes of 1 (onnx_cases.h). ONNX
// Runtime's CPU kernels refuse layout 1, so a layout-1 case has it run the same node in layout
// 0 between Transposes (Case::reference).
#include "zc/zc.h"

#ifdef ZC_WITH_ONNX
#include "unit/onnx_cases.h"

namespace zc::test::onnx_model {

namespace {

// One recurrent node and what it is given.
struct Rnn {
  std::string op = "LSTM";
  std::string direction = "forward";
  int64_t layout = 0;
  int64_t seq = 3, batch = 2, input = 4, hidden = 5;
  bool bias = true, initial = false, peepholes = false, lens = false;
  std::vector<bool> outputs = {true, true, true};  // Y, Y_h, Y_c (the LSTM's)
  std::vector<Attr> attrs = {};
  int64_t opset = 17;
};

int64_t gates_of(const std::string& op) {
  return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
}

// The node's tensors: initializers, and the graph's inputs in the layout of the file.
struct Tensors {
  Tensor x, w, r, b, p, lens, h0, c0;
};

Tensors tensors_for(const Rnn& s) {
  const int64_t dirs = s.direction == "bidirectional" ? 2 : 1, g = gates_of(s.op);
  Tensors t;
  t.x = s.layout ? randn({s.batch, s.seq, s.input}) : randn({s.seq, s.batch, s.input});
  t.w = randn({dirs, g * s.hidden, s.input}) * 0.5;
  t.r = randn({dirs, g * s.hidden, s.hidden}) * 0.5;
  t.b = randn({dirs, 2 * g * s.hidden}) * 0.5;
  t.p = randn({dirs, 3 * s.hidden}) * 0.5;
  t.lens = full({s.batch}, static_cast<double>(s.seq), DType::i32);
  const Shape state = s.layout ? Shape{s.batch, dirs, s.hidden} : Shape{dirs, s.batch, s.hidden};
  t.h0 = randn(state);
  t.c0 = randn(state);
  return t;
}

// The model of `s` (its layout in the node), or with `as_layout_0` the same function as a
// layout-0 node between Transposes, which ONNX Runtime runs.
Builder model_of(const Rnn& s, const Tensors& t, bool as_layout_0) {
  const bool lstm = s.op == "LSTM";
  const bool wrap = as_layout_0 && s.layout == 1;
  Builder b(s.opset);
  b.input("x", DType::f32, t.x.shape());
  if (s.initial) {
    b.input("h0", DType::f32, t.h0.shape());
    if (lstm) b.input("c0", DType::f32, t.c0.shape());
  }
  b.init("W", t.w).init("R", t.r);
  // Inputs in layout 0 for the wrapped node.
  auto in = [&](const std::string& name, std::initializer_list<int64_t> perm) {
    if (!wrap) return name;
    b.node("Transpose", {name}, {name + "_0"}, {Attr("perm", perm)});
    return name + "_0";
  };
  std::vector<std::string> ins{in("x", {1, 0, 2}), "W", "R", "", "", "", "", ""};
  if (s.bias) {
    b.init("B", t.b);
    ins[3] = "B";
  }
  if (s.lens) {
    b.init("lens", t.lens);
    ins[4] = "lens";
  }
  if (s.initial) {
    ins[5] = in("h0", {1, 0, 2});
    if (lstm) ins[6] = in("c0", {1, 0, 2});
  }
  if (s.peepholes) {
    b.init("P", t.p);
    ins[7] = "P";
  }
  while (!ins.empty() && ins.back().empty()) ins.pop_back();
  const std::vector<std::string> names{"y", "y_h", "y_c"};
  const size_t count = lstm ? 3 : 2;
  std::vector<std::string> outs;
  for (size_t k = 0; k < count; ++k) {
    if (s.outputs[k]) b.output(names[k]);
    outs.push_back(s.outputs[k] ? names[k] + (wrap ? "_0" : "") : "");
  }
  while (!outs.empty() && outs.back().empty()) outs.pop_back();
  std::vector<Attr> attrs{Attr("hidden_size", s.hidden), Attr("direction", s.direction.c_str())};
  if (s.layout || s.opset != 17) attrs.push_back(Attr("layout", wrap ? int64_t{0} : s.layout));
  for (const Attr& a : s.attrs) attrs.push_back(a);
  b.node(s.op, ins, outs, attrs, "rnn");
  if (wrap) {
    for (size_t k = 0; k < count; ++k) {
      if (!s.outputs[k]) continue;
      b.node("Transpose", {names[k] + "_0"}, {names[k]},
             {k == 0 ? Attr("perm", {2, 0, 1, 3}) : Attr("perm", {1, 0, 2})});
    }
  }
  return b;
}

void add(std::vector<Case>& c, const std::string& what, const Rnn& s) {
  const Tensors t = tensors_for(s);
  std::vector<Tensor> inputs{t.x};
  if (s.initial) {
    inputs.push_back(t.h0);
    if (s.op == "LSTM") inputs.push_back(t.c0);
  }
  Case k{what, model_of(s, t, false), inputs};
  if (s.layout == 1) k.reference = model_of(s, t, true);
  c.push_back(std::move(k));
}

void add_lstm_cases(std::vector<Case>& c) {
  add(c, "LSTM forward", {});
  add(c, "LSTM forward, opset 14", {.op = "LSTM", .initial = true, .peepholes = true, .opset = 14});
  add(c, "LSTM reverse, initial states, peepholes",
      {.direction = "reverse", .initial = true, .peepholes = true});
  add(c, "LSTM bidirectional, initial states, peepholes, sequence_lens of the full length",
      {.direction = "bidirectional", .initial = true, .peepholes = true, .lens = true});
  add(c, "LSTM bidirectional without B, Y only",
      {.direction = "bidirectional", .bias = false, .outputs = {true, false, false}});
  add(c, "LSTM Y_c only", {.direction = "reverse", .outputs = {false, false, true}});
  add(c, "LSTM Y_h only", {.outputs = {false, true, false}});
  add(c, "LSTM clip",
      {.direction = "bidirectional",
       .initial = true,
       .peepholes = true,
       .attrs = {Attr("clip", 0.7f)}});
  add(c, "LSTM input_forget",
      {.initial = true, .peepholes = true, .attrs = {Attr("input_forget", 1)}});
  add(c, "LSTM layout 1, bidirectional, initial states, peepholes",
      {.direction = "bidirectional", .layout = 1, .initial = true, .peepholes = true});
  add(c, "LSTM layout 1, reverse, Y_h only",
      {.direction = "reverse", .layout = 1, .outputs = {false, true, false}});
  add(c, "LSTM seq 1, batch 1, hidden 1",
      {.direction = "bidirectional",
       .seq = 1,
       .batch = 1,
       .input = 3,
       .hidden = 1,
       .initial = true,
       .peepholes = true});
  add(c, "LSTM other activations (HardSigmoid, Softsign, Elu; Sigmoid, ScaledTanh, Affine)",
      {.direction = "bidirectional",
       .attrs = {Attr("activations", std::vector<std::string>{"HardSigmoid", "Softsign", "Elu",
                                                              "Sigmoid", "ScaledTanh", "Affine"}),
                 Attr("activation_alpha", std::vector<float>{0.3f, 0.8f, 0.9f, 0.6f}),
                 Attr("activation_beta", std::vector<float>{0.4f, 1.5f, 0.1f})}});
}

void add_gru_cases(std::vector<Case>& c) {
  const Attr before_reset("linear_before_reset", 1);
  add(c, "GRU forward", {.op = "GRU"});
  add(c, "GRU forward, linear_before_reset", {.op = "GRU", .attrs = {before_reset}});
  add(c, "GRU reverse, initial_h, linear_before_reset",
      {.op = "GRU", .direction = "reverse", .initial = true, .attrs = {before_reset}});
  add(c, "GRU bidirectional, initial_h, sequence_lens of the full length",
      {.op = "GRU", .direction = "bidirectional", .initial = true, .lens = true});
  add(c, "GRU bidirectional without B, linear_before_reset",
      {.op = "GRU", .direction = "bidirectional", .bias = false, .attrs = {before_reset}});
  add(c, "GRU without B", {.op = "GRU", .bias = false, .initial = true});
  add(c, "GRU clip", {.op = "GRU", .direction = "bidirectional", .attrs = {Attr("clip", 0.6f)}});
  add(c, "GRU clip, linear_before_reset",
      {.op = "GRU", .initial = true, .attrs = {Attr("clip", 0.6f), before_reset}});
  add(c, "GRU Y only", {.op = "GRU", .outputs = {true, false}});
  add(c, "GRU Y_h only", {.op = "GRU", .direction = "reverse", .outputs = {false, true}});
  add(c, "GRU layout 1, bidirectional, initial_h, linear_before_reset",
      {.op = "GRU",
       .direction = "bidirectional",
       .layout = 1,
       .initial = true,
       .attrs = {before_reset}});
  add(c, "GRU layout 1, forward, Y only",
      {.op = "GRU", .layout = 1, .outputs = {true, false}, .attrs = {}});
  add(c, "GRU seq 1, batch 1, hidden 1",
      {.op = "GRU",
       .direction = "bidirectional",
       .seq = 1,
       .batch = 1,
       .input = 2,
       .hidden = 1,
       .initial = true});
  add(c, "GRU other activations (LeakyRelu, Softplus)",
      {.op = "GRU",
       .attrs = {Attr("activations", std::vector<std::string>{"LeakyRelu", "Softplus"}),
                 Attr("activation_alpha", std::vector<float>{0.2f})}});
}

void add_rnn_cases(std::vector<Case>& c) {
  add(c, "RNN forward", {.op = "RNN"});
  add(c, "RNN reverse, initial_h", {.op = "RNN", .direction = "reverse", .initial = true});
  add(c, "RNN bidirectional, Relu, sequence_lens of the full length",
      {.op = "RNN",
       .direction = "bidirectional",
       .lens = true,
       .attrs = {Attr("activations", std::vector<std::string>{"Relu", "Relu"})}});
  add(c, "RNN without B, Y_h only",
      {.op = "RNN", .bias = false, .initial = true, .outputs = {false, true}});
  add(c, "RNN clip", {.op = "RNN", .initial = true, .attrs = {Attr("clip", 0.5f)}});
  add(c, "RNN layout 1, bidirectional, initial_h",
      {.op = "RNN", .direction = "bidirectional", .layout = 1, .initial = true});
  add(c, "RNN seq 1, batch 1, hidden 1",
      {.op = "RNN", .seq = 1, .batch = 1, .input = 1, .hidden = 1, .initial = true});
  add(c, "RNN other activations (ThresholdedRelu, Sigmoid)",
      {.op = "RNN",
       .direction = "bidirectional",
       .initial = true,
       .attrs = {Attr("activations", std::vector<std::string>{"ThresholdedRelu", "Sigmoid"}),
                 Attr("activation_alpha", std::vector<float>{0.1f})}});
}

}  // namespace

void add_recurrent_cases(std::vector<Case>& c) {
  add_lstm_cases(c);
  add_gru_cases(c);
  add_rnn_cases(c);
}

}  // namespace zc::test::onnx_model

#endif
