#include "ir/canonical.h"

#include <algorithm>
#include <cstring>

#include "ops/attrs.h"
#include "ops/eager.h"
#include "ops/meta_bytes.h"
#include "util/bytes.h"

namespace zc::ir {

namespace {

constexpr uint32_t kMagic = 0x3167637a;  // "zcg1"

// Attributes without the sizes they hold (reshape and expand targets, slice bounds).
ops::Attrs without_sizes(ops::Attrs a) {
  if (auto* s = std::get_if<ops::ShapeAttrs>(&a)) std::fill(s->shape.begin(), s->shape.end(), 0);
  if (auto* s = std::get_if<ops::SliceAttrs>(&a)) s->start = s->end = 0;
  return a;
}

std::vector<uint8_t> write_graph(const Graph& g, bool sizes) {
  std::vector<int32_t> id(g.values.size(), -1);
  int32_t next = 0;
  for (const Input& in : g.inputs) id[in.value] = next++;
  for (const Constant& c : g.constants) id[c.value] = next++;
  for (const Node& n : g.nodes) {
    for (ValueId v : n.outputs) id[v] = next++;
  }
  ByteWriter w;
  w.u32(kMagic);
  w.u64(g.inputs.size());
  for (const Input& in : g.inputs) {
    w.u8(static_cast<uint8_t>(in.kind));
    ops::write_meta(w, g.meta(in.value), sizes);
  }
  w.u64(g.constants.size());
  for (const Constant& c : g.constants) {
    ops::write_meta(w, g.meta(c.value), sizes);
    // Without sizes, only one-element constants keep their value: a larger constant's values
    // are data the code reads, like an input's (arange(T) traced at two lengths).
    if (!sizes && c.data.numel() != 1) continue;
    Tensor data = ops::eager_contiguous(c.data);
    w.raw(data.raw_data(), static_cast<size_t>(data.numel()) * dtype_size(data.dtype()));
  }
  w.u64(g.nodes.size());
  for (const Node& n : g.nodes) {
    w.str(ops::op_def(n.op).name);
    ops::write_attrs(w, sizes ? n.attrs : without_sizes(n.attrs));
    w.u64(n.inputs.size());
    for (ValueId v : n.inputs) w.u32(static_cast<uint32_t>(id[v]));
    w.u64(n.outputs.size());
    for (ValueId v : n.outputs) ops::write_meta(w, g.meta(v), sizes);
    w.u32(static_cast<uint32_t>(n.region));
  }
  w.u64(g.outputs.size());
  for (ValueId v : g.outputs) w.u32(static_cast<uint32_t>(id[v]));
  w.u64(g.regions.size());
  for (const Region& r : g.regions) {
    w.str(r.type_name);
    w.u32(static_cast<uint32_t>(r.parent));
    w.u32(static_cast<uint32_t>(r.begin));
    w.u32(static_cast<uint32_t>(r.end));
  }
  return w.take();
}
}  // namespace

std::vector<uint8_t> canonical_bytes(const Graph& g) {
  return write_graph(g, true);
}

Digest graph_hash(const Graph& g) {
  return sha256(canonical_bytes(g));
}

Digest structure_hash(const Graph& g) {
  return sha256(write_graph(g, false));
}

Graph read_canonical(std::span<const uint8_t> bytes) {
  ByteReader r(bytes, "graph bytes");
  if (r.u32() != kMagic) throw Error("graph bytes: bad magic (not a zc graph)");
  Graph g;
  auto check_id = [&](uint32_t v) {
    if (v >= g.values.size())
      throw Error("graph bytes: value %" + std::to_string(v) + " used before definition");
    return static_cast<ValueId>(v);
  };
  uint64_t ni = r.u64();
  for (uint64_t i = 0; i < ni; ++i) {
    uint8_t kind = r.u8();
    if (kind > static_cast<uint8_t>(InputKind::seed)) throw Error("graph bytes: bad input kind");
    g.inputs.push_back(
        Input{g.add_value(ops::read_meta(r, "graph bytes")), static_cast<InputKind>(kind)});
  }
  uint64_t nc = r.u64();
  for (uint64_t i = 0; i < nc; ++i) {
    ops::TensorMeta m = ops::read_meta(r, "graph bytes");
    Tensor t = Tensor::empty(m.shape, m.dtype);
    t.unsafe_impl()->wrapped_number = m.wrapped_number;
    size_t nbytes = static_cast<size_t>(t.numel()) * dtype_size(m.dtype);
    auto raw = r.raw(nbytes);
    if (nbytes) std::memcpy(t.raw_data(), raw.data(), nbytes);
    g.constants.push_back(Constant{g.add_value(m), t});
  }
  uint64_t nn = r.u64();
  for (uint64_t i = 0; i < nn; ++i) {
    Node n;
    std::string name = r.str();
    const ops::OpDef* def = ops::find_op(name);
    if (!def)
      throw Error("graph bytes: unknown op '" + name + "' (written by another zc version?)");
    n.op = def->id;
    n.attrs = ops::read_attrs(r);
    uint64_t nin = r.u64();
    for (uint64_t k = 0; k < nin; ++k) n.inputs.push_back(check_id(r.u32()));
    uint64_t nout = r.u64();
    for (uint64_t k = 0; k < nout; ++k) {
      n.outputs.push_back(
          g.add_value(ops::read_meta(r, "graph bytes"), static_cast<int32_t>(g.nodes.size())));
    }
    n.region = static_cast<RegionId>(r.u32());
    g.nodes.push_back(std::move(n));
  }
  uint64_t no = r.u64();
  for (uint64_t i = 0; i < no; ++i) g.outputs.push_back(check_id(r.u32()));
  uint64_t nr = r.u64();
  for (uint64_t i = 0; i < nr; ++i) {
    Region reg;
    reg.type_name = r.str();
    reg.parent = static_cast<RegionId>(r.u32());
    reg.begin = static_cast<int32_t>(r.u32());
    reg.end = static_cast<int32_t>(r.u32());
    g.regions.push_back(std::move(reg));
  }
  if (r.remaining() != 0) throw Error("graph bytes: trailing data");
  return g;
}

}  // namespace zc::ir
