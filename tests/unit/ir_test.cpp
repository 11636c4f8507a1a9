// The graph IR: verifier, printer, canonical bytes round trip, region extraction.
#include <gtest/gtest.h>

#include "capture/capture.h"
#include "ir/canonical.h"
#include "ir/printer.h"
#include "ir/subgraph.h"
#include "ir/verifier.h"
#include "zc/zc.h"

namespace zc {
namespace {

ir::Graph capture_graph(nn::Module& m, const Tensor& x) {
  return capture::capture_module(m, x, nullptr, true).graph;
}

// x -> relu(x * 2 + b) with b a parameter.
struct Small : nn::Module {
  Tensor b;
  Small() { b = register_parameter("b", ones({3})); }
  Tensor forward(const Tensor& x) override { return relu(x * 2.0 + b); }
};

TEST(IrGraph, CaptureProducesVerifiedGraphWithParamInputAndConstant) {
  Small m;
  ir::Graph g = capture_graph(m, randn({2, 3}));
  EXPECT_NO_THROW(ir::verify(g));
  ASSERT_EQ(g.inputs.size(), 2u);
  EXPECT_EQ(g.inputs[0].kind, ir::InputKind::user);
  EXPECT_EQ(g.inputs[1].kind, ir::InputKind::parameter);
  ASSERT_EQ(g.constants.size(), 1u);  // the 2.0
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(ops::op_def(g.nodes[0].op).name, "mul");
  EXPECT_EQ(ops::op_def(g.nodes[1].op).name, "add");
  EXPECT_EQ(ops::op_def(g.nodes[2].op).name, "relu");
}

TEST(IrGraph, PrinterShowsOpsRegionsAndKinds) {
  auto m = models::seed_model(2);
  std::string text = ir::print(capture_graph(*m, randn({10, 10})));
  EXPECT_NE(text.find("param"), std::string::npos);
  EXPECT_NE(text.find("= linear("), std::string::npos);
  EXPECT_NE(text.find("region #"), std::string::npos);
  EXPECT_NE(text.find("SeedLayer {"), std::string::npos);
  EXPECT_NE(text.find("return %"), std::string::npos);
}

TEST(IrGraph, CanonicalBytesRoundTrip) {
  auto m = models::seed_model(3);
  ir::Graph g = capture_graph(*m, randn({10, 10}));
  std::vector<uint8_t> bytes = ir::canonical_bytes(g);
  ir::Graph back = ir::read_canonical(bytes);
  EXPECT_NO_THROW(ir::verify(back));
  EXPECT_EQ(ir::canonical_bytes(back), bytes);
  EXPECT_EQ(back.regions.size(), g.regions.size());
}

TEST(IrGraph, ReadCanonicalRejectsCorruptBytes) {
  Small m;
  std::vector<uint8_t> bytes = ir::canonical_bytes(capture_graph(m, randn({2, 3})));
  std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + bytes.size() / 2);
  EXPECT_THROW(ir::read_canonical(cut), Error);
  std::vector<uint8_t> bad = bytes;
  bad[0] ^= 0xff;
  EXPECT_THROW(ir::read_canonical(bad), Error);
  // Every truncation is an error, never a crash.
  for (size_t n = 0; n < bytes.size(); n += 7) {
    std::vector<uint8_t> part(bytes.begin(), bytes.begin() + n);
    EXPECT_THROW(ir::read_canonical(part), Error) << n;
  }
}

TEST(IrGraph, VerifierCatchesUseBeforeDefinition) {
  Small m;
  ir::Graph g = capture_graph(m, randn({2, 3}));
  std::swap(g.nodes[0], g.nodes[1]);
  EXPECT_THROW(ir::verify(g), Error);
}

TEST(IrGraph, VerifierCatchesWrongMetadata) {
  Small m;
  ir::Graph g = capture_graph(m, randn({2, 3}));
  g.values[g.nodes[2].outputs[0]].meta.shape = {3, 2};
  EXPECT_THROW(ir::verify(g), Error);
}

TEST(IrSubgraph, RegionExtractionHasInputsOutputsAndNestedRegions) {
  auto m = models::seed_model(2);
  ir::Graph g = capture_graph(*m, randn({10, 10}));
  std::vector<ir::RegionId> top = g.top_regions();
  ASSERT_EQ(top.size(), 3u);  // the outer Linear and two SeedLayers
  ir::RegionGraph rg = ir::extract_region(g, top[1]);
  EXPECT_NO_THROW(ir::verify(rg.graph));
  // activation + 4 parameters in, one activation out
  EXPECT_EQ(rg.graph.inputs.size(), 5u);
  EXPECT_EQ(rg.graph.outputs.size(), 1u);
  // The SeedLayer itself, and inside it Linear, ReLU, Linear, ReLU.
  ASSERT_EQ(rg.graph.regions.size(), 5u);
  EXPECT_NE(rg.graph.regions[0].type_name.find("SeedLayer"), std::string::npos);
}

}  // namespace
}  // namespace zc
