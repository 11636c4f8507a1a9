#include "cpu/onednn_common.h"

#ifdef ZC_WITH_DNNL
#include <vector>

#include "util/stats.h"

namespace zc::cpu {

const dnnl::engine& dnnl_engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& dnnl_thread_stream() {
  thread_local dnnl::stream s(dnnl_engine());
  return s;
}

dnnl::primitive_attr dnnl_kept_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

char* dnnl_thread_scratchpad(size_t bytes) {
  thread_local std::vector<char> buf;
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

void dnnl_run_kept(const dnnl::primitive& p, std::unordered_map<int, dnnl::memory> args) {
  const dnnl_memory_desc_t* md =
      dnnl_primitive_desc_query_md(p.get_primitive_desc(), dnnl_query_scratchpad_md, 0);
  if (md) {
    const dnnl::memory::desc desc(*md);
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 dnnl::memory(desc, dnnl_engine(), dnnl_thread_scratchpad(desc.get_size())));
  }
  p.execute(dnnl_thread_stream(), args);
  dnnl_thread_stream().wait();
}

dnnl::memory dnnl_thread_memory(std::vector<char>& buf, const dnnl::memory::desc& desc) {
  if (buf.size() < desc.get_size()) buf.resize(desc.get_size());
  return dnnl::memory(desc, dnnl_engine(), buf.data());
}

dnnl::memory::desc dnnl_f32_matrix(bool trans, int64_t rows, int64_t cols, int64_t ld) {
  return dnnl::memory::desc({rows, cols}, dnnl::memory::data_type::f32,
                            trans ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1});
}

dnnl::memory KeptWeights::get(const void* addr, WeightIdentity id, const dnnl::memory::desc& user,
                              const dnnl::memory::desc& layout) {
  ++clock_;
  if (!id.known()) return convert(addr, user, layout);
  auto it = entries_.find(addr);
  const bool again = it != entries_.end() && it->second.id == id;
  if (again && it->second.data && it->second.layout == layout) {
    it->second.last_use = clock_;
    return it->second.data;
  }
  if (!again && keep_ == Keep::second_sight) {
    remember(addr, Entry{id, layout, dnnl::memory(), clock_});
    return dnnl::memory();
  }
  dnnl::memory data = convert(addr, user, layout);
  zc::stats::add(zc::stats::Counter::weights_kept);
  remember(addr, Entry{id, layout, data, clock_});
  return data;
}

int64_t KeptWeights::kept() const {
  int64_t n = 0;
  for (const auto& [addr, e] : entries_) n += e.data ? 1 : 0;
  return n;
}

dnnl::memory KeptWeights::convert(const void* addr, const dnnl::memory::desc& user,
                                  const dnnl::memory::desc& layout) {
  dnnl::memory data(layout, dnnl_engine());
  dnnl::memory from(user, dnnl_engine(), const_cast<void*>(addr));
  dnnl::reorder(from, data).execute(dnnl_thread_stream(), from, data);
  dnnl_thread_stream().wait();
  ++conversions_;
  return data;
}

void KeptWeights::remember(const void* addr, Entry e) {
  if (entries_.size() >= 256 && entries_.find(addr) == entries_.end()) {
    auto oldest = entries_.begin();
    for (auto i = entries_.begin(); i != entries_.end(); ++i) {
      if (i->second.last_use < oldest->second.last_use) oldest = i;
    }
    entries_.erase(oldest);
  }
  entries_[addr] = std::move(e);
}

}  // namespace zc::cpu
#endif
