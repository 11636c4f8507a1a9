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

KeptArgs::KeptArgs(const dnnl::primitive& p,
                   std::initializer_list<std::pair<int, dnnl::memory::desc>> descs) {
  for (const auto& [arg, desc] : descs) {
    args_.emplace(arg, dnnl::memory(desc, dnnl_engine(), DNNL_MEMORY_NONE));
  }
  const dnnl_memory_desc_t* md =
      dnnl_primitive_desc_query_md(p.get_primitive_desc(), dnnl_query_scratchpad_md, 0);
  if (md && dnnl::memory::desc(*md).get_size() > 0) {
    const dnnl::memory::desc desc(*md);
    scratch_bytes_ = desc.get_size();
    scratch_ = dnnl::memory(desc, dnnl_engine(), DNNL_MEMORY_NONE);
    args_.emplace(DNNL_ARG_SCRATCHPAD, scratch_);
  }
}

void KeptArgs::set(int arg, const void* data) {
  args_.at(arg).set_data_handle(const_cast<void*>(data));
}

void KeptArgs::run(const dnnl::primitive& p, const dnnl::memory* weights) {
  if (scratch_bytes_ > 0) scratch_.set_data_handle(dnnl_thread_scratchpad(scratch_bytes_));
  if (weights) args_.insert_or_assign(DNNL_ARG_WEIGHTS, *weights);
  p.execute(dnnl_thread_stream(), args_);
  dnnl_thread_stream().wait();
  // The weights are the caller's (a module's, kept in oneDNN's layout): not kept alive here.
  if (weights) args_.insert_or_assign(DNNL_ARG_WEIGHTS, dnnl::memory());
}

KeptArgs& dnnl_kept_args(const std::shared_ptr<const void>& owner, const dnnl::primitive& p,
                         std::initializer_list<std::pair<int, dnnl::memory::desc>> descs) {
  struct Entry {
    std::weak_ptr<const void> owner;
    KeptArgs args;
  };
  thread_local std::unordered_map<const void*, Entry> kept;
  auto it = kept.find(owner.get());
  if (it != kept.end() && !it->second.owner.expired()) return it->second.args;
  if (kept.size() >= 1024) {
    std::erase_if(kept, [](const auto& e) { return e.second.owner.expired(); });
  }
  return kept.insert_or_assign(owner.get(), Entry{owner, KeptArgs(p, descs)}).first->second.args;
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
