// The ONNX zoo: real architectures from torchvision, timm and transformers at small widths,
// each exported by both of torch's exporters (tests/tools/onnx_zoo.py wrote them and
// tests/data/onnx/zoo/zoo.txt lists them). Every file zc loads must give torch's outputs within
// 1e-4 (relative to the output's scale) eagerly and compiled, agree with ONNX Runtime, and serve
// other batch sizes from the code of its first call (its batch dim is symbolic in the file).
// The files zc does not load yet are listed below with the operators they lack: the error must
// name them, and a file that starts to load fails here until it is taken off the list.
#include <gtest/gtest.h>

#include "unit/test_support.h"
#include "zc/zc.h"

#ifdef ZC_WITH_ONNX
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "unit/onnx_builder.h"

namespace zc {
namespace {

const std::string kZoo = std::string(ZC_TEST_SOURCE_DIR) + "/data/onnx/zoo/";

struct ZooFile {
  std::string name, exporter, family;
  bool exported = false;  // false: torch's exporter failed on it (`why`); nothing to load
  std::string why;
};

void PrintTo(const ZooFile& f, std::ostream* os) {
  *os << f.name << "." << f.exporter;
}

std::vector<ZooFile> zoo_files() {
  std::vector<ZooFile> files;
  std::ifstream in(kZoo + "zoo.txt");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    ZooFile f;
    std::string status;
    s >> f.name >> f.exporter >> f.family >> status;
    f.exported = status == "ok";
    std::getline(s, f.why);
    files.push_back(f);
  }
  return files;
}

// The files zc does not load yet, and the operators its error names for each. Keyed by
// "name.exporter"; the list shrinks as operators land (docs/onnx.md's table).
const std::map<std::string, std::vector<std::string>>& not_yet() {
  static const std::map<std::string, std::vector<std::string>> m = {};
  return m;
}

// The files whose other batch sizes compile code of their own (correct, but not one compile
// for all sizes), and why. The traces of the others hold index tensors computed from the batch
// size (torch's as_strided decomposition in the dynamo exports of ConvNeXt and Swin, transformers'
// attention masks, BERT's token type ids), which are lifted inputs at every size now: while
// constants of up to 64 elements were embedded, batch 2 of length 16 embedded them and batch 5
// lifted them, and the sizes traced to graphs of two structures.
const std::map<std::string, std::string>& compiles_per_size() {
  // RoBERTa: its embeddings' position ids are a CumSum of the mask, which zc composes as
  // log2(length) steps of shifted adds (onnx/convert_indexing.cpp): lengths of another step count
  // trace to another structure, so that part's samples do not cover a grid of batch and length
  // and it compiles per size; the other parts are served by their templates. A scan op would
  // serve every length.
  const std::string grid = "CumSum's step count varies with the length";
  static const std::map<std::string, std::string> m = {
      {"roberta.dynamo", grid},
      {"roberta.torchscript", grid},
  };
  return m;
}

std::vector<Tensor> inputs_of(const std::string& name) {
  std::vector<Tensor> in;
  for (int k = 0;; ++k) {
    const std::string p = kZoo + name + ".input_" + std::to_string(k) + ".npy";
    if (!std::filesystem::exists(p)) break;
    in.push_back(zc_cli::read_npy(p));
  }
  return in;
}

// Within `rel` of `want`'s largest magnitude (at least 1), element by element.
::testing::AssertionResult close_to(const Tensor& got, const Tensor& want, double rel) {
  if (got.shape() != want.shape()) {
    return ::testing::AssertionFailure()
           << "shape " << shape_str(got.shape()) << ", want " << shape_str(want.shape());
  }
  const double scale = std::max(1.0, amax(abs(want.to(DType::f64))).item<double>());
  const double err = amax(abs(got.to(DType::f64) - want.to(DType::f64))).item<double>();
  if (err <= rel * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "largest difference " << err << " against a scale of "
                                       << scale << " (allowed " << rel * scale << ")";
}

// Rows `rows` of every input (a batch of other size made from the stored one).
std::vector<Tensor> take_rows(const std::vector<Tensor>& in, const std::vector<int64_t>& rows) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) {
    std::vector<Tensor> parts;
    for (int64_t r : rows) parts.push_back(t.slice(0, r, r + 1));
    out.push_back(cat(parts, 0));
  }
  return out;
}

class OnnxZoo : public ::testing::TestWithParam<ZooFile> {};

TEST_P(OnnxZoo, MatchesTorchAndOnnxRuntime) {
  const ZooFile& f = GetParam();
  if (!f.exported) GTEST_SKIP() << "torch's " << f.exporter << " exporter failed:" << f.why;
  const std::string key = f.name + "." + f.exporter;
  const std::string path = kZoo + key + ".onnx";
  auto missing = not_yet().find(key);
  if (missing != not_yet().end()) {
    const std::string e = test::error_message([&] { onnx::load(path); });
    ASSERT_FALSE(e.empty()) << key << " loads now: take it off not_yet()";
    for (const std::string& op : missing->second) EXPECT_TRUE(test::contains(e, op)) << e;
    return;
  }
  auto model = onnx::load(path);
  EXPECT_TRUE(test::contains(model->producer(), "pytorch")) << model->producer();
  const std::vector<Tensor> in = inputs_of(f.name);
  const Tensor want = zc_cli::read_npy(kZoo + f.name + ".output_0.npy");
  ASSERT_FALSE(in.empty());
  const int64_t batch = in[0].shape()[0];
  ASSERT_EQ(batch, 2);
  NoGradGuard no_grad;
  EXPECT_TRUE(close_to((*model)(in)[0], want, 1e-4)) << key << ", eager";
  CompiledModule fast = compile(model);
  EXPECT_TRUE(close_to(fast(in)[0], want, 1e-4)) << key << ", compiled";

  // Batches of 3 and 4 from the same rows (each row's output is torch's for that row: the
  // models are per-sample in eval mode), from the code made at the first call.
  const compiler::Stats before = compiler::stats();
  for (const std::vector<int64_t>& rows : {std::vector<int64_t>{0, 1, 0}, {1, 0, 1, 1}}) {
    std::vector<Tensor> want_rows;
    for (int64_t r : rows) want_rows.push_back(want.slice(0, r, r + 1));
    EXPECT_TRUE(close_to(fast(take_rows(in, rows))[0], cat(want_rows, 0), 1e-4))
        << key << ", compiled at batch " << rows.size();
  }
  // Served by the code made for all sizes at the first call (size templates), whatever the
  // caches held: no compiler ran, and each new size's graphs came from a template.
  const int64_t template_hits = compiler::stats().template_hits - before.template_hits;
  // A listed file's other sizes are only checked for their outputs: whether its part that
  // compiles per size runs a compiler depends on what the caches hold.
  if (!compiles_per_size().count(key)) {
    EXPECT_EQ(compiler::stats().compiler_invocations, before.compiler_invocations) << key;
    EXPECT_GE(template_hits, 2) << key
                                << ": batches 3 and 4 did not run the code made for every size";
  }

  // ONNX Runtime on the same inputs (it agreed with torch when the file was written).
  const std::string dir = test::test_dir("onnx-zoo-" + key);
  std::string why;
  auto ort = test::onnx_model::run_ort({{path, in, dir}}, dir, &why);
  if (ort.empty()) GTEST_SKIP() << "ONNX Runtime cannot run here: " << why;
  EXPECT_TRUE(close_to(fast(in)[0], ort[0][0], 1e-4)) << key << ", against ONNX Runtime";
}

// The same files on CUDA: every one zc loads gives torch's outputs eagerly and compiled, with its
// constants on the GPU (scripts/gpu-test.sh runs these; CI has no GPU).
class OnnxZooCuda : public ::testing::TestWithParam<ZooFile> {};

TEST_P(OnnxZooCuda, MatchesTorch) {
  ZC_SKIP_WITHOUT_GPU();
  const ZooFile& f = GetParam();
  const std::string key = f.name + "." + f.exporter;
  if (!f.exported) GTEST_SKIP() << "torch's " << f.exporter << " exporter failed:" << f.why;
  if (not_yet().count(key)) GTEST_SKIP() << key << " does not load yet";
  auto model = onnx::load(kZoo + key + ".onnx");
  model->to(Device::cuda(0));
  std::vector<Tensor> in;
  for (const Tensor& t : inputs_of(f.name)) in.push_back(t.to(Device::cuda(0)));
  const Tensor want = zc_cli::read_npy(kZoo + f.name + ".output_0.npy");
  NoGradGuard no_grad;
  EXPECT_TRUE(close_to((*model)(in)[0].to(Device::cpu()), want, 1e-4)) << key << ", eager";
  CompiledModule fast = compile(model);
  EXPECT_TRUE(close_to(fast(in)[0].to(Device::cpu()), want, 1e-4)) << key << ", compiled";
  const std::vector<int64_t> rows{1, 0, 1};
  std::vector<Tensor> want_rows;
  for (int64_t r : rows) want_rows.push_back(want.slice(0, r, r + 1));
  EXPECT_TRUE(close_to(fast(take_rows(in, rows))[0].to(Device::cpu()), cat(want_rows, 0), 1e-4))
      << key << ", compiled at batch 3";
}

std::string zoo_name(const ::testing::TestParamInfo<ZooFile>& info) {
  return info.param.name + "_" + info.param.exporter;
}

INSTANTIATE_TEST_SUITE_P(Files, OnnxZoo, ::testing::ValuesIn(zoo_files()), zoo_name);
INSTANTIATE_TEST_SUITE_P(Files, OnnxZooCuda, ::testing::ValuesIn(zoo_files()), zoo_name);

// torch's dynamo exporter names nodes after their ops and writes the module scopes as node
// metadata (name_scopes, class_hierarchy): its files get regions as the TorchScript exporter's
// scoped node names give them, and a repeated block compiles once.
TEST(OnnxZooRegions, DynamoExportsRepeatedBlocksCompileOnce) {
  for (const char* name : {"vit", "bert", "resnet"}) {
    SCOPED_TRACE(name);
    for (const char* exporter : {"dynamo", "torchscript"}) {
      auto model = onnx::load(kZoo + name + "." + exporter + ".onnx");
      NoGradGuard no_grad;
      compiler::reset();
      compiler::reset_stats();
      compile(model)(inputs_of(name));
      const compiler::Stats s = compiler::stats();
      EXPECT_GE(s.regions_found, 2) << exporter;
      EXPECT_LT(s.region_graphs, s.regions_found) << exporter;
    }
  }
}

TEST(OnnxZooList, HasEveryFamilyAndBothExporters) {
  std::map<std::string, int> families, exporters;
  for (const ZooFile& f : zoo_files()) {
    ++families[f.family];
    exporters[f.exporter] += f.exported;
  }
  EXPECT_GE(zoo_files().size(), 40u);
  for (const char* family : {"torchvision", "timm", "transformers", "recurrent"}) {
    EXPECT_GT(families[family], 0) << family;
  }
  EXPECT_GE(exporters["dynamo"], 20);
  EXPECT_GE(exporters["torchscript"], 20);
}

}  // namespace
}  // namespace zc

#endif
