// The public cache API (include/zc/cache.h) over the process cache. It lives beside the
// runtime because a bundle is judged against what this process's backends build for, which
// the cache itself does not know.
#include <sstream>

#include "cache/bundle.h"
#include "cache/cache.h"
#include "cache/disk_tier.h"
#include "codegen/backend.h"
#include "runtime/products/autotune.h"
#include "util/json_quote.h"
#include "zc/cache.h"
#include "zc/version.h"

namespace zc::cache {

namespace {
std::vector<uint8_t> hmac_key(const Cache& c) {
  return c.config().hmac_key_file.empty() ? std::vector<uint8_t>{}
                                          : read_hmac_key_file(c.config().hmac_key_file);
}

// What entries must have been made for to be of use here: one provenance per code-generating
// backend this process can run (the C++ compiler's target; a GPU's architecture).
std::vector<Provenance> usable_provenances() {
  std::vector<Provenance> out;
  for (const codegen::Backend* b : codegen::all_backends()) {
    if (b->interprets()) continue;
    // Without its compiler a backend can still load prebuilt binaries of its target.
    std::string why = b->unavailable_reason();
    const codegen::KeyParts& parts = b->key_parts();
    if (!why.empty() && parts.target.empty()) continue;
    out.push_back(Provenance{zc::build_id(), parts.target, parts.toolchain});
  }
  if (out.empty()) out.push_back(Provenance{zc::build_id(), "", ""});
  // max_autotune's records are made for this CPU and its GEMM libraries
  // (runtime/products/autotune.h).
  out.push_back(runtime::tuning_provenance(runtime::this_host()));
  return out;
}
}  // namespace

const LevelStats* Stats::find(const std::string& level, const std::string& tier) const {
  for (const LevelStats& l : levels) {
    if (l.level == level && l.tier == tier) return &l;
  }
  return nullptr;
}

Stats stats() {
  Cache& c = process_cache();
  Stats s;
  s.persistent = c.disk() != nullptr;
  s.dir = s.persistent ? c.config().dir : "";
  for (Level level : kLevels) {
    for (TierKind tier : kTierKinds) {
      TierCounters t = c.counters({level, tier});
      s.levels.push_back(LevelStats{level_name(level), tier_kind_name(tier), t.hits, t.misses,
                                    t.errors, t.puts, t.put_failures, t.saved_ms});
    }
  }
  return s;
}

std::string Stats::str() const {
  std::ostringstream os;
  os << "cache dir: " << (persistent ? dir : "(persistent caches disabled)") << "\n";
  os << "level     tier     hits  misses  errors    puts  saved ms\n";
  for (const LevelStats& l : levels) {
    if (l.hits + l.misses + l.errors + l.puts + l.put_failures == 0) continue;
    char line[160];
    std::snprintf(line, sizeof line, "%-9s %-7s %5lld %7lld %7lld %7lld %9.1f\n", l.level.c_str(),
                  l.tier.c_str(), static_cast<long long>(l.hits), static_cast<long long>(l.misses),
                  static_cast<long long>(l.errors), static_cast<long long>(l.puts), l.saved_ms);
    os << line;
  }
  return os.str();
}

std::string Stats::json() const {
  std::ostringstream os;
  os << "{\"dir\":" << json::quote(dir) << ",\"persistent\":" << (persistent ? "true" : "false")
     << ",\"levels\":[";
  for (size_t i = 0; i < levels.size(); ++i) {
    const LevelStats& l = levels[i];
    os << (i ? "," : "") << "{\"level\":\"" << l.level << "\",\"tier\":\"" << l.tier
       << "\",\"hits\":" << l.hits << ",\"misses\":" << l.misses << ",\"errors\":" << l.errors
       << ",\"puts\":" << l.puts << ",\"put_failures\":" << l.put_failures
       << ",\"saved_ms\":" << l.saved_ms << "}";
  }
  os << "]}";
  return os.str();
}

std::vector<uint8_t> save_artifacts() {
  Cache& c = process_cache();
  return write_bundle(c.touched_items(), hmac_key(c));
}

LoadReport load_artifacts(std::span<const uint8_t> bytes) {
  Cache& c = process_cache();
  // Bundle items are judged against this process's whole provenance (an item's empty fields
  // are those it does not depend on), which only the toolchain can tell.
  const std::vector<Provenance> accept = usable_provenances();
  BundleContents contents = read_bundle(bytes, accept, hmac_key(c));
  LoadReport report;
  for (ReadItem& item : contents.items) {
    LoadReport::Item out{level_name(item.level), item.key_hex, "", item.reason};
    if (item.status != ItemStatus::ok) {
      out.status = "refused";
      if (out.reason.empty()) out.reason = item_status_name(item.status);
      ++report.refused;
    } else if (c.contains(item.entry->level, item.entry->key)) {
      out.status = "already present";
      ++report.already_present;
    } else {
      c.insert(std::move(*item.entry));
      out.status = "loaded";
      ++report.loaded;
    }
    report.items.push_back(std::move(out));
  }
  return report;
}

std::string LoadReport::str() const {
  std::ostringstream os;
  os << loaded << " loaded, " << already_present << " already present, " << refused << " refused\n";
  for (const Item& i : items) {
    if (i.status == "refused")
      os << "  refused " << i.level << " " << i.key.substr(0, 16) << ": " << i.reason << "\n";
  }
  return os.str();
}

std::string LoadReport::json() const {
  std::ostringstream os;
  os << "{\"loaded\":" << loaded << ",\"already_present\":" << already_present
     << ",\"refused\":" << refused << ",\"items\":[";
  for (size_t k = 0; k < items.size(); ++k) {
    const Item& i = items[k];
    os << (k ? "," : "") << "{\"level\":\"" << i.level << "\",\"key\":\"" << i.key
       << "\",\"status\":\"" << i.status << "\",\"reason\":" << json::quote(i.reason) << "}";
  }
  os << "]}";
  return os.str();
}

}  // namespace zc::cache
