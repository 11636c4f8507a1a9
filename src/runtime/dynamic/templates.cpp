#include "runtime/dynamic/templates.h"

#include <algorithm>

#include "codegen/pipeline.h"
#include "codegen/size_poly.h"
#include "codegen/size_template.h"
#include "ir/canonical.h"
#include "runtime/driver/compile_graph.h"
#include "runtime/records/codec.h"
#include "toolchain/build_priority.h"
#include "util/bytes.h"
#include "util/log.h"
#include "util/parallel.h"
#include "util/stats.h"
#include "util/timer.h"

namespace zc::runtime {

namespace {

using codegen::SizePoly;

// What is stored for one template.
struct Record {
  struct Symbol {
    int32_t input = 0, dim = 0;  // the graph input and dim whose size is the symbol's value
  };
  std::vector<Symbol> symbols;
  std::vector<uint64_t> varying;  // per value of the lowered graph (Schedule::varying)
  std::string text_hex;           // SHA-256 of the text with markers
  std::vector<SizePoly> sizes;    // one per marker
  std::string source_hex;         // SHA-256 of the instantiated source: its kernel-level key
};

std::vector<uint8_t> encode(const Record& r) {
  RecordWriter w(kSizeTemplateFormat);
  w.u32(static_cast<uint32_t>(r.symbols.size()));
  for (const Record::Symbol& s : r.symbols) {
    w.u32(static_cast<uint32_t>(s.input));
    w.u32(static_cast<uint32_t>(s.dim));
  }
  w.u64(r.varying.size());
  for (uint64_t m : r.varying) w.u64(m);
  w.str(r.text_hex);
  w.u64(r.sizes.size());
  for (const SizePoly& p : r.sizes) p.write(w);
  w.str(r.source_hex);
  return w.take();
}

Record decode(std::span<const uint8_t> bytes) {
  RecordReader rd(bytes, kSizeTemplateFormat);
  Record r;
  const uint32_t ns = rd.count32(64, "symbols");
  for (uint32_t i = 0; i < ns; ++i) {
    Record::Symbol s;
    s.input = static_cast<int32_t>(rd.u32());
    s.dim = static_cast<int32_t>(rd.u32());
    r.symbols.push_back(s);
  }
  const uint64_t nv = rd.count(bytes.size(), "varying values");
  for (uint64_t i = 0; i < nv; ++i) r.varying.push_back(rd.u64());
  r.text_hex = rd.str();
  const uint64_t np = rd.count(bytes.size(), "sizes");
  for (uint64_t i = 0; i < np; ++i) r.sizes.push_back(SizePoly::read(rd));
  r.source_hex = rd.str();
  rd.finish("field");
  return r;
}

// The most templates kept under one structure (the oldest goes first): one per distinct set of
// fixed sizes a model has of that structure.
constexpr size_t kTemplatesPerStructure = 16;

std::vector<uint8_t> encode_list(const std::vector<Record>& rs) {
  RecordWriter w(kSizeTemplatesFormat);
  w.u32(static_cast<uint32_t>(rs.size()));
  for (const Record& r : rs) {
    const std::vector<uint8_t> one = encode(r);
    w.u64(one.size());
    w.raw(one.data(), one.size());
  }
  return w.take();
}

std::vector<Record> decode_list(std::span<const uint8_t> bytes) {
  RecordReader rd(bytes, kSizeTemplatesFormat);
  std::vector<Record> rs;
  const uint32_t n = rd.count32(kTemplatesPerStructure, "templates");
  for (uint32_t i = 0; i < n; ++i) rs.push_back(decode(rd.raw(rd.u64())));
  rd.finish("field");
  return rs;
}

// The templates stored under `key`; none when there are none or they are unusable (logged).
std::vector<Record> stored_records(cache::Cache& store, const cache::Key& key, CompileContext& ctx,
                                   const std::string& short_hash) {
  auto entry = store.get(key, ctx.lookups());
  if (!entry) return {};
  try {
    return decode_list(entry->payload);
  } catch (const Error& e) {
    ZC_LOG(cache) << "graph " << short_hash << ": size templates unusable (" << e.what() << ")";
    return {};
  }
}

// The symbol values of `g` under `symbols`, or nullopt when an input lacks the dim.
std::optional<std::vector<int64_t>> symbol_values(const ir::Graph& g,
                                                  const std::vector<Record::Symbol>& symbols) {
  std::vector<int64_t> out;
  for (const Record::Symbol& s : symbols) {
    if (s.input < 0 || static_cast<size_t>(s.input) >= g.inputs.size()) return std::nullopt;
    const Shape& shape = g.meta(g.inputs[s.input].value).shape;
    if (s.dim < 0 || static_cast<size_t>(s.dim) >= shape.size()) return std::nullopt;
    out.push_back(shape[s.dim]);
  }
  return out;
}

std::nullopt_t refuse(const std::string& short_hash, const std::string& why) {
  ZC_LOG(recompiles) << "graph " << short_hash << ": no code for many sizes: " << why;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> make_size_template(std::span<const ir::Graph> family,
                                              const codegen::Backend& backend,
                                              CompileContext& ctx) {
  cache::Cache* store = ctx.store();
  if (family.empty()) return std::nullopt;
  const std::string first_hex = hex(ir::graph_hash(family[0]));
  const std::string short_hash = first_hex.substr(0, 16);
  if (!backend.serves_many_sizes())
    return refuse(short_hash, "backend " + std::string(backend.name()) + " makes code per size");
  Timer t;
  // Lowered, canonically numbered: value v is the same value at every sample. The samples are
  // lowered (and below, generated) side by side: a first call that makes templates waits for
  // the slowest sample, not for the sum of ten.
  std::vector<ir::Graph> lowered(family.size());
  std::vector<std::string> structures(family.size());
  run_indexed(
      family.size(),
      [&](size_t i) {
        CompileKeys keys = compile_keys(hex(ir::graph_hash(family[i])), backend);
        lowered[i] = ir::read_canonical(lowered_bytes(family[i], backend, ctx, keys));
        structures[i] = hex(ir::structure_hash(lowered[i]));
      },
      toolchain::compile_threads());
  const std::string structure = structures[0];
  for (const std::string& s : structures) {
    if (s != structure) return refuse(short_hash, "its lowered structure changes with its sizes");
  }
  const ir::Graph& g0 = lowered[0];
  Record r;
  r.varying.assign(g0.values.size(), 0);
  for (size_t v = 0; v < g0.values.size(); ++v) {
    const Shape& s0 = g0.meta(static_cast<ir::ValueId>(v)).shape;
    for (size_t d = 0; d < s0.size() && d < 64; ++d) {
      for (const ir::Graph& g : lowered) {
        if (g.meta(static_cast<ir::ValueId>(v)).shape[d] != s0[d]) r.varying[v] |= uint64_t{1} << d;
      }
    }
  }
  // The symbols: the inputs' varying dims, one per distinct sequence of sizes over the samples.
  std::vector<std::vector<int64_t>> sequences;
  for (size_t i = 0; i < g0.inputs.size(); ++i) {
    const ir::ValueId v = g0.inputs[i].value;
    for (size_t d = 0; d < g0.meta(v).shape.size(); ++d) {
      if (!(r.varying[v] >> d & 1)) continue;
      std::vector<int64_t> seq;
      for (const ir::Graph& g : lowered) seq.push_back(g.meta(g.inputs[i].value).shape[d]);
      if (std::find(sequences.begin(), sequences.end(), seq) != sequences.end()) continue;
      sequences.push_back(std::move(seq));
      r.symbols.push_back({static_cast<int32_t>(i), static_cast<int32_t>(d)});
    }
  }
  if (r.symbols.empty()) return refuse(short_hash, "none of its inputs' sizes varies");
  if (r.symbols.size() > backend.max_symbols()) {
    return refuse(short_hash, std::to_string(r.symbols.size()) + " symbols; backend " +
                                  std::string(backend.name()) + " takes " +
                                  std::to_string(backend.max_symbols()));
  }
  std::vector<std::vector<int64_t>> points(lowered.size()), values;
  for (size_t p = 0; p < lowered.size(); ++p) {
    for (const auto& seq : sequences) points[p].push_back(seq[p]);
  }
  std::vector<codegen::CodegenResult> codes(lowered.size());
  run_indexed(
      lowered.size(),
      [&](size_t i) { codes[i] = codegen::codegen(lowered[i], backend, true, r.varying); },
      toolchain::compile_threads());
  const std::string text = codes[0].source.text;
  for (codegen::CodegenResult& c : codes) {
    if (c.source.text != text)
      return refuse(short_hash, "its generated code takes other paths at other sizes");
    values.push_back(std::move(c.source.sizes));
  }
  const codegen::CodegenResult& code = codes[0];
  std::string why;
  auto polys = codegen::fit_sizes(points, values, &why);
  if (!polys) return refuse(short_hash, why);
  r.text_hex = hex(sha256(text));
  r.sizes = std::move(*polys);
  codegen::GeneratedSource source = code.source;
  source.text = codegen::instantiate_sizes(text, r.sizes, source.symbol_array);
  source.sizes.clear();
  r.source_hex = hex(sha256(source.text));
  ZC_LOG(output_code) << "size template of graph " << short_hash << ":\n" << source.text;
  double build_ms = 0;
  CompileKeys keys = compile_keys(first_hex, backend);
  binary_for(keys, backend, ctx, source, &build_ms);
  if (store) {
    // Beside the templates of other graphs of this structure (other fixed sizes), this one
    // replacing a template of the same text. The parts of one compile store theirs side by
    // side (two widths of one block): one update at a time, or one list overwrote the other and
    // a width compiled again at its next size. Another process's write may still drop one,
    // which only costs a compile for its own size later.
    store->update(
        keys.size_template_key(structure),
        [&](const std::optional<cache::Entry>& entry) {
          std::vector<Record> all;
          if (entry) {
            try {
              all = decode_list(entry->payload);
            } catch (const Error& e) {
              ZC_LOG(cache) << "graph " << short_hash << ": size templates unusable (" << e.what()
                            << "), replaced";
            }
          }
          std::erase_if(all, [&](const Record& o) {
            return o.text_hex == r.text_hex && o.source_hex == r.source_hex;
          });
          if (all.size() >= kTemplatesPerStructure) all.erase(all.begin());
          all.push_back(r);
          return encode_list(all);
        },
        t.ms(), ctx.lookups());
  }
  ctx.count(stats::Counter::size_templates);
  std::string names;
  for (size_t s = 0; s < r.symbols.size(); ++s) {
    names += (s ? ", s" : "s") + std::to_string(s) + " = input " +
             std::to_string(r.symbols[s].input) + " dim " + std::to_string(r.symbols[s].dim);
  }
  ZC_LOG(timing) << "size template of graph " << short_hash << " (" << names << ", "
                 << family.size() << " samples): " << t.ms() << " ms, build " << build_ms << " ms";
  return structure;
}

bool holds_size_template(const std::string& structure_hex, const codegen::Backend& backend,
                         CompileContext& ctx) {
  cache::Cache* store = ctx.store();
  return store &&
         store->get(compile_keys("", backend).size_template_key(structure_hex), ctx.lookups())
             .has_value();
}

namespace {

// The executable of `lowered` from template `r` and its binary, or null when the template does
// not serve it (`why` says how).
std::shared_ptr<const codegen::Executable> check_and_bind(const ir::Graph& lowered,
                                                          const codegen::Backend& backend,
                                                          const Record& r,
                                                          std::span<const uint8_t> binary,
                                                          std::string* why, CompileContext* ctx) {
  auto symbols = symbol_values(lowered, r.symbols);
  if (!symbols || r.varying.size() != lowered.values.size()) {
    *why = "its size template was made for another graph of its structure";
    return nullptr;
  }
  codegen::CodegenResult code = codegen::codegen(lowered, backend, true, r.varying);
  if (hex(sha256(code.source.text)) != r.text_hex || code.source.sizes.size() != r.sizes.size()) {
    *why = "at these sizes its generated code takes other paths than its template's";
    return nullptr;
  }
  for (size_t i = 0; i < r.sizes.size(); ++i) {
    if (r.sizes[i].eval(*symbols) != code.source.sizes[i]) {
      *why = "a size of its code is " + std::to_string(code.source.sizes[i]) +
             " here, and its template's " + r.sizes[i].str() + " says " +
             std::to_string(r.sizes[i].eval(*symbols));
      return nullptr;
    }
  }
  // A package binds without a compile (no context): the process still counts the use.
  if (ctx) {
    ctx->count(stats::Counter::template_hits);
  } else {
    stats::add(stats::Counter::template_hits);
  }
  return backend.load_for_size(std::move(code.schedule), std::move(code.plan), binary,
                               std::move(*symbols));
}

}  // namespace

std::shared_ptr<const codegen::Executable> bind_size_template(const ir::Graph& lowered,
                                                              const codegen::Backend& backend,
                                                              std::span<const uint8_t> record,
                                                              std::span<const uint8_t> binary,
                                                              std::string* why) {
  std::string ignored;
  if (!why) why = &ignored;
  Record r;
  try {
    r = decode(record);
  } catch (const Error& e) {
    *why = std::string("its size template is unusable (") + e.what() + ")";
    return nullptr;
  }
  return check_and_bind(lowered, backend, r, binary, why, nullptr);
}

std::optional<StoredTemplate> stored_size_template(const ir::Graph& lowered, CompileContext& ctx,
                                                   const CompileKeys& keys) {
  cache::Cache* store = ctx.store();
  if (!store) return std::nullopt;
  const cache::Key key = keys.size_template_key(hex(ir::structure_hash(lowered)));
  // The newest whose symbols and values fit the graph (bind_size_template checks the rest).
  std::vector<Record> all = stored_records(*store, key, ctx, keys.graph.substr(0, 16));
  for (auto r = all.rbegin(); r != all.rend(); ++r) {
    if (!symbol_values(lowered, r->symbols) || r->varying.size() != lowered.values.size()) continue;
    auto binary = store->get(keys.kernel_key(r->source_hex), ctx.lookups());
    if (binary) return StoredTemplate{encode(*r), std::move(binary->payload)};
  }
  return std::nullopt;
}

std::shared_ptr<const codegen::Executable> executable_from_template(const ir::Graph& lowered,
                                                                    const codegen::Backend& backend,
                                                                    CompileContext& ctx,
                                                                    const CompileKeys& keys,
                                                                    SizedUse* used) {
  cache::Cache* store = ctx.store();
  if (!store) return nullptr;
  const std::string short_hash = keys.graph.substr(0, 16);
  const std::string structure = hex(ir::structure_hash(lowered));
  const std::vector<Record> all =
      stored_records(*store, keys.size_template_key(structure), ctx, short_hash);
  if (all.empty()) return nullptr;
  // The newest first: each template of this structure is tried until one serves the graph.
  std::string why;
  for (auto r = all.rbegin(); r != all.rend(); ++r) {
    std::vector<uint8_t> binary;
    if (auto e = store->get(keys.kernel_key(r->source_hex), ctx.lookups())) {
      binary = std::move(e->payload);
    } else if (symbol_values(lowered, r->symbols) && r->varying.size() == lowered.values.size()) {
      // The binary was evicted or never shared: built again from the template (check_and_bind()
      // checks that the template serves this graph before the binary runs).
      codegen::CodegenResult code = codegen::codegen(lowered, backend, true, r->varying);
      codegen::GeneratedSource source = code.source;
      source.text = codegen::instantiate_sizes(code.source.text, r->sizes, source.symbol_array);
      source.sizes.clear();
      if (hex(sha256(source.text)) != r->source_hex) {
        why = "at these sizes its generated code takes other paths than its template's";
        continue;
      }
      double ms = 0;
      binary = binary_for(keys, backend, ctx, source, &ms);
    } else {
      why = "its size template was made for another graph of its structure";
      continue;
    }
    auto exec = check_and_bind(lowered, backend, *r, binary, &why, &ctx);
    if (exec) {
      if (used) *used = SizedUse{r->varying, *symbol_values(lowered, r->symbols), r->source_hex};
      return exec;
    }
  }
  ctx.count(stats::Counter::template_refusals);
  refuse(short_hash, why);
  return nullptr;
}

std::vector<uint8_t> encode_sized(const std::vector<uint8_t>& lowered, const SizedUse& used) {
  RecordWriter w(kSizedGraphFormat);
  w.u64(lowered.size());
  w.raw(lowered.data(), lowered.size());
  w.u64(used.varying.size());
  for (uint64_t m : used.varying) w.u64(m);
  w.u64(used.symbols.size());
  for (int64_t v : used.symbols) w.i64(v);
  w.str(used.source_hex);
  return w.take();
}

std::shared_ptr<const codegen::Executable> load_sized(std::span<const uint8_t> record,
                                                      const codegen::Backend& backend,
                                                      CompileContext& ctx,
                                                      const CompileKeys& keys) {
  const std::string short_hash = keys.graph.substr(0, 16);
  cache::Cache* store = ctx.store();
  if (!store) return nullptr;
  try {
    Timer t;
    RecordReader rd(record, kSizedGraphFormat);
    auto lowered_bytes = rd.raw(rd.u64());
    SizedUse u;
    const uint64_t nv = rd.count(record.size(), "varying values");
    for (uint64_t i = 0; i < nv; ++i) u.varying.push_back(rd.u64());
    const uint64_t ns = rd.count(64, "symbols");
    for (uint64_t i = 0; i < ns; ++i) u.symbols.push_back(rd.i64());
    u.source_hex = rd.str();
    rd.finish("field");
    ir::Graph lowered = ir::read_canonical(lowered_bytes);
    if (u.varying.size() != lowered.values.size()) {
      throw Error("sized graph record: its varying dims are another graph's");
    }
    auto binary = store->get(keys.kernel_key(u.source_hex), ctx.lookups());
    if (!binary) return nullptr;  // evicted: lowered and checked against the template again
    codegen::CodegenResult code = codegen::codegen(lowered, backend, false, u.varying);
    auto exec = backend.load_for_size(std::move(code.schedule), std::move(code.plan),
                                      binary->payload, std::move(u.symbols));
    ctx.count(stats::Counter::template_hits);
    ZC_LOG(timing) << "graph " << short_hash << ": loaded as its size template's in " << t.ms()
                   << " ms";
    return exec;
  } catch (const Error& e) {
    ZC_LOG(cache) << "graph " << short_hash << ": sized record unusable (" << e.what() << ")";
    return nullptr;
  }
}

}  // namespace zc::runtime
