#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "cache/tier.h"

namespace zc::cache {

namespace {

struct MapKey {
  Level level;
  Digest key;
  bool operator==(const MapKey&) const = default;
};

struct MapKeyHash {
  size_t operator()(const MapKey& k) const {
    uint64_t prefix;
    std::memcpy(&prefix, k.key.data(), sizeof(prefix));  // already uniformly distributed
    return static_cast<size_t>(prefix ^ static_cast<uint64_t>(k.level));
  }
};

// An in-process map with least-recently-used eviction by total payload bytes. Entries are kept
// decoded: they were verified when they came from a slower tier or were made by this process.
class MemoryTier final : public Tier {
 public:
  explicit MemoryTier(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  TierKind kind() const override { return TierKind::memory; }
  std::string name() const override { return "memory"; }

  bool contains(Level level, const Digest& key) override {
    std::lock_guard lock(mu_);
    return index_.count(MapKey{level, key}) != 0;
  }

  GetResult get(Level level, const Digest& key) override {
    std::shared_ptr<const Entry> found;
    {
      std::lock_guard lock(mu_);
      auto it = index_.find(MapKey{level, key});
      if (it == index_.end()) return {};
      lru_.splice(lru_.begin(), lru_, it->second);  // most recently used first
      found = *it->second;
    }
    // The payload is copied outside the lock, so a large entry does not stall other lookups.
    GetResult r;
    r.outcome = Outcome::hit;
    r.entry = *found;
    return r;
  }

  PutResult put(const Entry& entry) override {
    uint64_t size = entry.payload.size();
    if (max_bytes_ != 0 && size > max_bytes_) {
      return {false, "entry of " + std::to_string(size) +
                         " bytes exceeds the memory tier's cap of " + std::to_string(max_bytes_) +
                         " bytes"};
    }
    auto copy = std::make_shared<const Entry>(entry);
    std::lock_guard lock(mu_);
    MapKey k{entry.level, entry.key};
    auto it = index_.find(k);
    if (it != index_.end()) {
      total_ -= (*it->second)->payload.size();
      *it->second = std::move(copy);
      lru_.splice(lru_.begin(), lru_, it->second);
    } else {
      lru_.push_front(std::move(copy));
      index_.emplace(k, lru_.begin());
    }
    total_ += size;
    evict_locked();
    return {true, {}};
  }

  std::vector<TierListing> list() override {
    std::lock_guard lock(mu_);
    std::vector<TierListing> out;
    out.reserve(lru_.size());
    for (const auto& p : lru_) {
      const Entry& e = *p;
      TierListing l;
      l.info = EntryInfo{e.level, e.key, e.compile_ms, e.created_unix, e.payload.size()};
      l.stored_bytes = kEntryHeaderSize + e.payload.size();
      l.location = "memory";
      out.push_back(std::move(l));
    }
    return out;
  }

  uint64_t clear() override {
    std::lock_guard lock(mu_);
    uint64_t n = lru_.size();
    index_.clear();
    lru_.clear();
    total_ = 0;
    return n;
  }

 private:
  void evict_locked() {
    while (max_bytes_ != 0 && total_ > max_bytes_ && !lru_.empty()) {
      const Entry& victim = *lru_.back();
      total_ -= victim.payload.size();
      index_.erase(MapKey{victim.level, victim.key});
      lru_.pop_back();
    }
  }

  const uint64_t max_bytes_;
  std::mutex mu_;
  std::list<std::shared_ptr<const Entry>> lru_;
  std::unordered_map<MapKey, std::list<std::shared_ptr<const Entry>>::iterator, MapKeyHash> index_;
  uint64_t total_ = 0;
};

}  // namespace

std::unique_ptr<Tier> make_memory_tier(uint64_t max_bytes) {
  return std::make_unique<MemoryTier>(max_bytes);
}

}  // namespace zc::cache
