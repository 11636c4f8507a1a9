// Writes the seed corpora of the fuzz harnesses: valid inputs that a fuzzer then mutates, so
// the paths past the format's checks are reached from the first run.
// Usage: seed_corpus <dir>; writes <dir>/entry_fuzz/* (and <dir>/bundle_fuzz/* when bundles
// are built in).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cache/entry.h"
#if ZC_FUZZ_HAVE_BUNDLE
#include "cache/bundle.h"
#endif
#if ZC_FUZZ_HAVE_ONNX
#include "onnx/onnx_pb.h"
#endif

namespace {

namespace fs = std::filesystem;
using namespace zc::cache;

void write(const fs::path& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  fs::create_directories(dir);
  std::ofstream f(dir / name, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

Entry make(int i, size_t size) {
  Entry e;
  e.level = kLevels[i % 4];
  e.key = zc::sha256("seed " + std::to_string(i));
  e.compile_ms = 1.5 * i;
  e.created_unix = 1'700'000'000u + static_cast<uint64_t>(i);
  e.payload.resize(size);
  for (size_t j = 0; j < size; ++j) e.payload[j] = static_cast<uint8_t>(j * 13 + i);
  return e;
}

#if ZC_FUZZ_HAVE_ONNX
// A small valid model: a Conv with an initializer, a Constant, a Relu.
std::vector<uint8_t> onnx_seed(bool raw) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_version(17);
  auto* g = m.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(1);
  for (int d : {1, 2, 4, 4})
    in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  g->add_output()->set_name("y");
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(1);
  for (int d : {3, 2, 1, 1}) w->add_dims(d);
  for (int i = 0; i < 6; ++i) {
    if (raw) {
      float v = 0.5f * i;
      w->mutable_raw_data()->append(reinterpret_cast<const char*>(&v), 4);
    } else {
      w->add_float_data(0.5f * i);
    }
  }
  auto* conv = g->add_node();
  conv->set_op_type("Conv");
  conv->add_input("x");
  conv->add_input("w");
  conv->add_output("c");
  auto* k = g->add_node();
  k->set_op_type("Constant");
  k->add_output("k");
  auto* a = k->add_attribute();
  a->set_name("value");
  a->mutable_t()->set_data_type(7);
  a->mutable_t()->add_int64_data(2);
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->add_input("c");
  relu->add_output("y");
  std::string s = m.SerializeAsString();
  return std::vector<uint8_t>(s.begin(), s.end());
}

// The same with its Relu a call of a local function (as torch's dynamo exporter writes
// modules), whose body reads an attribute of the call.
std::vector<uint8_t> onnx_function_seed() {
  std::vector<uint8_t> bytes = onnx_seed(true);
  ::onnx::ModelProto m;
  m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  m.add_opset_import()->set_domain("pkg.seed");
  auto* f = m.add_functions();
  f->set_name("Act");
  f->set_domain("pkg.seed");
  f->add_input("a");
  f->add_output("b");
  f->add_attribute("alpha");
  f->add_opset_import()->set_version(17);
  auto* leaky = f->add_node();
  leaky->set_op_type("LeakyRelu");
  leaky->add_input("a");
  leaky->add_output("b");
  auto* ref = leaky->add_attribute();
  ref->set_name("alpha");
  ref->set_ref_attr_name("alpha");
  ref->set_type(::onnx::AttributeProto::FLOAT);
  auto* call = m.mutable_graph()->mutable_node(2);
  call->set_op_type("Act");
  call->set_domain("pkg.seed");
  auto* alpha = call->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(::onnx::AttributeProto::FLOAT);
  alpha->set_f(0.1f);
  std::string s = m.SerializeAsString();
  return std::vector<uint8_t>(s.begin(), s.end());
}
#endif

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  fs::path root = argv[1];
  const size_t sizes[] = {0, 1, 64, 1000};
  for (int i = 0; i < 4; ++i)
    write(root / "entry_fuzz", "entry" + std::to_string(i), encode_entry(make(i, sizes[i])));
#if ZC_FUZZ_HAVE_BUNDLE
  const Provenance prov{"fuzz-build", "fuzz-target", "fuzz-toolchain"};
  std::vector<BundleItem> items;
  write(root / "bundle_fuzz", "empty", write_bundle(items));
  for (int i = 0; i < 3; ++i) items.push_back(BundleItem{make(i, sizes[i + 1]), prov});
  write(root / "bundle_fuzz", "three", write_bundle(items));
  const std::string key = "zc-fuzz-key";
  write(root / "bundle_fuzz", "three_signed",
        write_bundle(items, std::span(reinterpret_cast<const uint8_t*>(key.data()), key.size())));
#endif
#if ZC_FUZZ_HAVE_ONNX
  write(root / "onnx_fuzz", "conv_raw", onnx_seed(true));
  write(root / "onnx_fuzz", "conv_fields", onnx_seed(false));
  write(root / "onnx_fuzz", "conv_function", onnx_function_seed());
#endif
  return 0;
}
