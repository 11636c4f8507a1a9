// The ONNX operator cases: one model of a node or a few, its inputs, and the tolerance against
// ONNX Runtime. OnnxImport.EveryOperatorMatchesOnnxRuntime runs every case eagerly and compiled
// and checks that every supported operator has one; each family of operators adds its cases
// from its own file (onnx_cases_<family>.cpp) through the functions declared at the end.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "unit/onnx_builder.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace zc::test::onnx_model {

struct Case {
  std::string what;
  Builder model;
  std::vector<Tensor> inputs;
  double tol = 1e-4;
  // The model ONNX Runtime runs instead, where it lacks what `model` uses (its CPU recurrent
  // operators refuse layout 1): the same function of the same inputs.
  std::optional<Builder> reference = std::nullopt;
};

// The model `b` describes, loaded from its bytes.
inline std::shared_ptr<onnx::Model> load_model(const Builder& b) {
  const std::string bytes = b.bytes();
  return onnx::load_from_bytes(
      std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "test model");
}

// Loading `b` and running it on `in` (compiled, or eagerly) raises zc::Error containing `part`:
// what a rule refuses names the node, at the call that meets it.
inline void expect_refused(const Builder& b, std::vector<Tensor> in, const std::string& part,
                           bool compiled = false) {
  auto m = load_model(b);
  expect_error_containing(
      [&] {
        if (compiled) {
          compile(m)(in);
        } else {
          (*m)(in);
        }
      },
      part);
}

inline Tensor positive(const Shape& s) {
  return abs(randn(s)) + 0.5;
}
inline Tensor i64s(std::vector<int64_t> v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i64);
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}
inline Tensor i64_scalar(int64_t v) {
  return full({}, static_cast<double>(v), DType::i64);
}

// One node of input "x" (dtype `xt`) and the constants `inits` (an empty name leaves an optional
// input out) to outputs "out0", "out1", ... of dtype `ot`, in a file of `opset`.
inline Builder one_typed(const std::string& op, DType xt, const Shape& x, DType ot,
                         std::vector<Attr> attrs = {},
                         const std::vector<std::pair<std::string, Tensor>>& inits = {},
                         int outputs = 1, int64_t opset = 17) {
  Builder b(opset);
  b.input("x", xt, x);
  std::vector<std::string> in{"x"};
  for (const auto& [name, t] : inits) {
    if (name.empty()) {
      in.push_back("");
      continue;
    }
    b.init(name, t);
    in.push_back(name);
  }
  std::vector<std::string> out;
  for (int k = 0; k < outputs; ++k) {
    out.push_back("out" + std::to_string(k));
    b.output(out.back(), ot);
  }
  b.node(op, in, out, std::move(attrs));
  return b;
}

// The same of f32.
inline Builder one(const std::string& op, const Shape& x, std::vector<Attr> attrs = {},
                   const std::vector<std::pair<std::string, Tensor>>& inits = {}, int outputs = 1,
                   int64_t opset = 17) {
  return one_typed(op, DType::f32, x, DType::f32, std::move(attrs), inits, outputs, opset);
}

// The cases of each family kept in a file of its own.
void add_indexing_cases(std::vector<Case>& c);    // onnx_cases_indexing.cpp
void add_recurrent_cases(std::vector<Case>& c);   // onnx_cases_recurrent.cpp
void add_resize_cases(std::vector<Case>& c);      // onnx_cases_resize.cpp
void add_einsum_cases(std::vector<Case>& c);      // onnx_cases_einsum.cpp
void add_extra_cases(std::vector<Case>& c);       // onnx_cases_extra.cpp
void add_gridsample_cases(std::vector<Case>& c);  // onnx_cases_gridsample.cpp

}  // namespace zc::test::onnx_model
