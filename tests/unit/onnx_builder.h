// What the ONNX import tests share: models built with the onnx library's protobuf classes,
// tensors to and from .npy files, and ONNX Runtime (tests/tools/ort_run.py) as the reference.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"
#include "unit/run_model.h"
#include "zc/npy.h"
#include "zc/zc.h"

namespace zc::test::onnx_model {

inline int32_t onnx_type(DType t) {
  switch (t) {
    case DType::f32:
      return ::onnx::TensorProto::FLOAT;
    case DType::f64:
      return ::onnx::TensorProto::DOUBLE;
    case DType::i64:
      return ::onnx::TensorProto::INT64;
    case DType::i32:
      return ::onnx::TensorProto::INT32;
    case DType::boolean:
      return ::onnx::TensorProto::BOOL;
    case DType::i8:
      return ::onnx::TensorProto::INT8;
    case DType::f16:
      return ::onnx::TensorProto::FLOAT16;
    case DType::bf16:
      return ::onnx::TensorProto::BFLOAT16;
  }
  return 0;
}

inline ::onnx::TensorProto tensor_proto(const std::string& name, const Tensor& t) {
  ::onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(onnx_type(t.dtype()));
  for (int64_t d : t.shape()) p.add_dims(d);
  Tensor c = t.contiguous();
  p.set_raw_data(
      std::string(static_cast<const char*>(c.raw_data()), c.numel() * dtype_size(c.dtype())));
  return p;
}

// An attribute: Attr("axis", 1), Attr("perm", {0, 2, 1}), Attr("epsilon", 1e-5f), lists of
// floats and strings as std::vector<float> and std::vector<std::string>.
struct Attr {
  ::onnx::AttributeProto p;
  Attr(const std::string& name, int64_t v) {
    p.set_name(name);
    p.set_type(::onnx::AttributeProto::INT);
    p.set_i(v);
  }
  Attr(const std::string& name, int v) : Attr(name, static_cast<int64_t>(v)) {}
  Attr(const std::string& name, float v) {
    p.set_name(name);
    p.set_type(::onnx::AttributeProto::FLOAT);
    p.set_f(v);
  }
  Attr(const std::string& name, std::initializer_list<int64_t> v) {
    p.set_name(name);
    p.set_type(::onnx::AttributeProto::INTS);
    for (int64_t x : v) p.add_ints(x);
  }
  Attr(const std::string& name, const std::vector<float>& v) {
    p.set_name(name);
    p.set_type(::onnx::AttributeProto::FLOATS);
    for (float x : v) p.add_floats(x);
  }
  Attr(const std::string& name, const std::vector<std::string>& v) {
    p.set_name(name);
    p.set_type(::onnx::AttributeProto::STRINGS);
    for (const std::string& s : v) p.add_strings(s);
  }
  Attr(const std::string& name, const char* s) {
    p.set_name(name);
    p.set_type(::onnx::AttributeProto::STRING);
    p.set_s(s);
  }
  Attr(const std::string& name, const Tensor& t) {
    p.set_name(name);
    p.set_type(::onnx::AttributeProto::TENSOR);
    *p.mutable_t() = tensor_proto("", t);
  }
};

class Builder {
 public:
  explicit Builder(int64_t opset = 17) {
    // The IR version each opset came with (ONNX Runtime refuses an older one for newer opsets).
    m_.set_ir_version(opset <= 18 ? 8 : opset <= 20 ? 9 : 10);
    m_.set_producer_name("zc tests");
    auto* op = m_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
  }
  // dims: -1 for a symbolic dim.
  Builder& input(const std::string& name, DType t, std::vector<int64_t> dims) {
    value(m_.mutable_graph()->add_input(), name, t, dims);
    return *this;
  }
  Builder& output(const std::string& name, DType t = DType::f32) {
    auto* v = m_.mutable_graph()->add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx_type(t));
    return *this;
  }
  Builder& init(const std::string& name, const Tensor& t) {
    *m_.mutable_graph()->add_initializer() = tensor_proto(name, t);
    return *this;
  }
  Builder& node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                std::vector<Attr> attrs = {}, const std::string& name = "") {
    auto* n = m_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + std::to_string(m_.graph().node_size()) : name);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    for (auto& a : attrs) *n->add_attribute() = a.p;
    return *this;
  }
  ::onnx::ModelProto& proto() { return m_; }
  std::string bytes() const { return m_.SerializeAsString(); }
  std::string save(const std::string& path) const {
    std::ofstream(path, std::ios::binary) << bytes();
    return path;
  }

 private:
  static void value(::onnx::ValueInfoProto* v, const std::string& name, DType t,
                    const std::vector<int64_t>& dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx_type(t));
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = shape->add_dim();
      if (d >= 0) {
        dim->set_dim_value(d);
      } else {
        dim->set_dim_param("d" + std::to_string(shape->dim_size()));
      }
    }
  }
  ::onnx::ModelProto m_;
};

// A model for ONNX Runtime to run, and where its files go.
struct OrtJob {
  std::string model;
  std::vector<Tensor> inputs;
  std::string dir;
};

// ONNX Runtime's outputs for each job, from one run of tests/tools/ort_run.py; an empty list
// with `why` set when it cannot run here (no onnxruntime: the caller skips). A model ONNX
// Runtime refuses or fails on is a test failure, not a skip: one bad case must not turn off
// every comparison of the run.
inline std::vector<std::vector<Tensor>> run_ort(const std::vector<OrtJob>& jobs,
                                                const std::string& dir, std::string* why) {
  std::ofstream list(dir + "/jobs.txt");
  for (const OrtJob& j : jobs) {
    list << j.model << " " << j.dir << "/ort";
    for (size_t i = 0; i < j.inputs.size(); ++i) {
      const std::string p = j.dir + "/input_" + std::to_string(i) + ".npy";
      zc_cli::write_npy(p, j.inputs[i]);
      list << " " << p;
    }
    list << "\n";
  }
  list.close();
  ProcessRun r = run_shell("python3 " + std::string(ZC_TEST_SOURCE_DIR) +
                           "/tools/ort_run.py --batch " + dir + "/jobs.txt");
  if (r.rc != 0) {
    *why = r.out;
    if (r.rc != 2) ADD_FAILURE() << "ONNX Runtime failed on a model of " << dir << ":\n" << r.out;
    return {};
  }
  std::vector<std::vector<Tensor>> out;
  for (const OrtJob& j : jobs) {
    std::vector<Tensor> outs;
    for (int k = 0;; ++k) {
      const std::string p = j.dir + "/ort/output_" + std::to_string(k) + ".npy";
      if (!std::ifstream(p)) break;
      outs.push_back(zc_cli::read_npy(p));
    }
    out.push_back(std::move(outs));
  }
  return out;
}

}  // namespace zc::test::onnx_model
