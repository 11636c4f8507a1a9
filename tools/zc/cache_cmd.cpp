// zc cache: the local compile cache from the command line, like `ccache -s`.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cache/bundle.h"
#include "cache/cache.h"
#include "cache/disk_tier.h"
#include "cache/redis_tier.h"
#include "cli.h"
#include "runtime/products/autotune.h"
#include "util/json_quote.h"
#include "zc/cache.h"
#include "zc/error.h"

namespace zc_cli {

namespace {

using zc::cache::Level;

struct Options {
  bool json = false;
  bool yes = false;
  bool remote = false;  // ls and clear: the remote tier instead of the local store
  std::vector<std::string> positional;
};

Options parse(Args args, std::string_view sub) {
  Options o;
  for (std::string_view a : args) {
    if (a == "--json") {
      o.json = true;
    } else if (a == "--yes") {
      o.yes = true;
    } else if (a == "--remote" && (sub == "ls" || sub == "clear")) {
      o.remote = true;
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError{"zc cache " + std::string(sub) + ": unknown option '" + std::string(a) +
                       "'"};
    } else {
      o.positional.emplace_back(a);
    }
  }
  return o;
}

zc::cache::DiskTier& store(zc::cache::Cache& c) {
  if (!c.disk()) {
    throw zc::Error(
        "persistent caches are disabled (ZC_FORCE_DISABLE_CACHES is set, or there is "
        "no HOME and no ZC_CACHE_DIR)");
  }
  return *c.disk();
}

// The remote tier, reachable: an unreachable server would otherwise list as empty and clear
// nothing, both reported as success.
zc::cache::Tier& remote_store(zc::cache::Cache& c, std::string* url) {
  if (!c.remote()) {
    throw zc::Error(
        c.config().remote_url.empty()
            ? "no remote cache is configured; set ZC_REMOTE_CACHE=redis://host[:port][/db]"
            : "the remote cache is off (ZC_FORCE_DISABLE_CACHES is set)");
  }
  *url = zc::cache::redis_display_url(zc::cache::parse_redis_url(c.config().remote_url));
  zc::cache::GetResult probe =
      c.remote()->get(Level::graph, zc::sha256(std::string_view("zc cache probe")));
  if (probe.outcome == zc::cache::Outcome::error) {
    throw zc::Error("cannot use the remote cache " + *url + ": " + probe.reason);
  }
  return *c.remote();
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw zc::Error("cannot read " + path);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)),
                              std::istreambuf_iterator<char>());
}

int stats(zc::cache::Cache& c, const Options& o) {
  auto& disk = store(c);
  std::vector<zc::cache::TierListing> entries = disk.list();
  int64_t count[5] = {}, bytes[5] = {};
  for (const auto& e : entries) {
    int l = static_cast<int>(e.info.level);
    ++count[l];
    bytes[l] += static_cast<int64_t>(e.stored_bytes);
  }
  zc::cache::LifetimeStats life = disk.lifetime();
  // The remote tier as configured, password hidden; its entries are shared, so not counted here.
  std::string remote;
  if (c.remote()) {
    remote = zc::cache::redis_display_url(zc::cache::parse_redis_url(c.config().remote_url));
    if (c.config().remote_read_only) remote += " (read-only)";
    if (c.config().remote_ttl_seconds)
      remote += " (ttl " + std::to_string(c.config().remote_ttl_seconds) + " s)";
  }
  if (o.json) {
    std::cout << "{\"dir\":" << zc::json::quote(c.config().dir)
              << ",\"max_bytes\":" << c.config().max_bytes
              << ",\"remote\":" << zc::json::quote(remote) << ",\"levels\":{";
    bool first = true;
    for (Level l : zc::cache::kLevels) {
      int i = static_cast<int>(l);
      std::cout << (first ? "" : ",") << "\"" << zc::cache::level_name(l)
                << "\":{\"entries\":" << count[i] << ",\"bytes\":" << bytes[i] << "}";
      first = false;
    }
    std::cout << "},\"lifetime\":" << life.to_json() << "}\n";
    return 0;
  }
  std::cout << "cache directory  " << c.config().dir << "\n";
  std::cout << "size cap         "
            << (c.config().max_bytes ? std::to_string(c.config().max_bytes) + " bytes" : "none")
            << "\n";
  if (!remote.empty()) std::cout << "remote cache     " << remote << "\n";
  std::cout << "\n";
  std::cout << "level       entries        bytes\n";
  for (Level l : zc::cache::kLevels) {
    int i = static_cast<int>(l);
    char line[96];
    std::snprintf(line, sizeof line, "%-10s %8lld %12lld\n", zc::cache::level_name(l),
                  static_cast<long long>(count[i]), static_cast<long long>(bytes[i]));
    std::cout << line;
  }
  std::cout << "\nlifetime (all processes)\n" << life.to_table();
  return 0;
}

// What an autotune-level entry chose, when it is a CPU GEMM choice (runtime/products/autotune.h),
// for the listing; empty for other records (cuBLASLt products, call records) or unreadable ones.
std::string autotune_choice(zc::cache::Tier& tier, const zc::cache::EntryInfo& info) {
  if (info.level != Level::autotune) return "";
  try {
    zc::cache::GetResult r = tier.get(info.level, info.key);
    if (!r.entry) return "";
    auto unwrapped = zc::cache::unwrap_payload(r.entry->payload);
    if (!unwrapped) return "";
    return zc::runtime::describe_tuned(zc::runtime::decode_tuned(unwrapped->second));
  } catch (const zc::Error&) {
    return "";
  }
}

int ls(zc::cache::Cache& c, const Options& o) {
  std::string url;
  zc::cache::Tier& tier = o.remote ? remote_store(c, &url) : store(c);
  auto entries = tier.list();
  if (o.json) std::cout << "[";
  bool first = true;
  for (const auto& e : entries) {
    const std::string choice = autotune_choice(tier, e.info);
    if (o.json) {
      std::cout << (first ? "" : ",") << "{\"level\":\"" << zc::cache::level_name(e.info.level)
                << "\",\"key\":\"" << zc::hex(e.info.key) << "\",\"bytes\":" << e.stored_bytes
                << ",\"compile_ms\":" << e.info.compile_ms
                << ",\"created\":" << e.info.created_unix;
      if (!choice.empty()) std::cout << ",\"choice\":" << zc::json::quote(choice);
      std::cout << "}";
    } else {
      char line[160];
      std::snprintf(line, sizeof line, "%-9s %s %10llu bytes %9.1f ms",
                    zc::cache::level_name(e.info.level), zc::hex(e.info.key).substr(0, 16).c_str(),
                    static_cast<unsigned long long>(e.stored_bytes), e.info.compile_ms);
      std::cout << line << (choice.empty() ? "" : "  " + choice) << "\n";
    }
    first = false;
  }
  if (o.json) std::cout << "]\n";
  return 0;
}

std::string removed_json(const std::vector<zc::cache::RemovedFile>& removed) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < removed.size(); ++i) {
    os << (i ? "," : "") << "{\"path\":" << zc::json::quote(removed[i].path)
       << ",\"reason\":" << zc::json::quote(removed[i].reason) << ",\"bytes\":" << removed[i].bytes
       << "}";
  }
  os << "]";
  return os.str();
}

void print_removed(const std::vector<zc::cache::RemovedFile>& removed) {
  for (const auto& r : removed) std::cout << "  removed " << r.path << ": " << r.reason << "\n";
}

int verify(zc::cache::Cache& c, const Options& o) {
  zc::cache::VerifyReport r = store(c).verify();
  if (o.json) {
    std::cout << "{\"checked\":" << r.checked << ",\"ok\":" << r.ok
              << ",\"removed\":" << r.removed.size() << ",\"files\":" << removed_json(r.removed)
              << "}\n";
  } else {
    std::cout << "checked " << r.checked << " entries: " << r.ok << " ok, " << r.removed.size()
              << " removed\n";
    print_removed(r.removed);
  }
  return 0;
}

int gc(zc::cache::Cache& c, const Options& o) {
  zc::cache::GcReport r = store(c).gc();
  if (o.json) {
    std::cout << "{\"bytes_before\":" << r.bytes_before << ",\"bytes_after\":" << r.bytes_after
              << ",\"entries_evicted\":" << r.entries_evicted
              << ",\"temp_files_removed\":" << r.temp_files_removed
              << ",\"files\":" << removed_json(r.removed) << "}\n";
  } else {
    std::cout << "evicted " << r.entries_evicted << " entries and " << r.temp_files_removed
              << " stale temp files: " << r.bytes_before << " -> " << r.bytes_after << " bytes\n";
    print_removed(r.removed);
  }
  return 0;
}

int clear_remote(zc::cache::Cache& c, const Options& o) {
  std::string url;
  zc::cache::Tier& remote = remote_store(c, &url);
  if (!o.yes) {
    std::cerr << "zc cache clear --remote: not cleared: " << url
              << " is shared by every machine that uses it, and all of them would compile "
                 "again; add --yes to clear it\n";
    return kExitUsage;
  }
  if (c.config().remote_read_only) {
    throw zc::Error("the remote cache " + url +
                    " is read-only here (ZC_REMOTE_CACHE_READONLY): not cleared");
  }
  uint64_t n = remote.clear();
  if (o.json) {
    std::cout << "{\"removed\":" << n << ",\"remote\":" << zc::json::quote(url) << "}\n";
  } else {
    std::cout << "removed " << n << " entries from " << url << "\n";
  }
  return 0;
}

int clear(zc::cache::Cache& c, const Options& o) {
  if (o.remote) return clear_remote(c, o);
  uint64_t n = store(c).clear();
  if (o.json) {
    std::cout << "{\"removed\":" << n << "}\n";
  } else {
    std::cout << "removed " << n << " entries from " << c.config().dir << "\n";
  }
  return 0;
}

int export_bundle(zc::cache::Cache& c, const Options& o) {
  if (o.positional.size() != 1) throw UsageError{"zc cache export: expects one FILE"};
  store(c);
  std::vector<zc::cache::BundleItem> items = zc::cache::store_items(c);
  std::vector<uint8_t> key;
  if (!c.config().hmac_key_file.empty())
    key = zc::cache::read_hmac_key_file(c.config().hmac_key_file);
  std::vector<uint8_t> bytes = zc::cache::write_bundle(items, key);
  std::ofstream f(o.positional[0], std::ios::binary);
  if (!f.write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()))) {
    throw zc::Error("cannot write " + o.positional[0]);
  }
  if (o.json) {
    std::cout << "{\"file\":" << zc::json::quote(o.positional[0]) << ",\"entries\":" << items.size()
              << ",\"bytes\":" << bytes.size() << ",\"signed\":" << (key.empty() ? "false" : "true")
              << "}\n";
  } else {
    std::cout << "wrote " << items.size() << " entries (" << bytes.size() << " bytes"
              << (key.empty() ? "" : ", signed") << ") to " << o.positional[0] << "\n";
  }
  return 0;
}

int import_bundle(zc::cache::Cache& c, const Options& o) {
  if (o.positional.size() != 1) throw UsageError{"zc cache import: expects one FILE"};
  store(c);
  zc::cache::LoadReport r = zc::cache::load_artifacts(read_file(o.positional[0]));
  std::cout << (o.json ? r.json() + "\n" : r.str());
  return r.refused ? kExitError : 0;
}

}  // namespace

int cmd_cache(Args args) {
  if (args.empty()) {
    throw UsageError{
        "zc cache: expects a subcommand: stats, ls, clear, gc, verify, export, import"};
  }
  std::string_view sub = args[0];
  Options o = parse(args.subspan(1), sub);
  zc::cache::Cache& c = zc::cache::process_cache();
  if (sub == "stats") return stats(c, o);
  if (sub == "ls") return ls(c, o);
  if (sub == "verify") return verify(c, o);
  if (sub == "gc") return gc(c, o);
  if (sub == "export") return export_bundle(c, o);
  if (sub == "import") return import_bundle(c, o);
  if (sub == "clear") return clear(c, o);
  throw UsageError{"zc cache: unknown subcommand '" + std::string(sub) +
                   "'; expected stats, ls, clear, gc, verify, export or import"};
}

}  // namespace zc_cli
