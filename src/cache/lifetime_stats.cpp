#include "cache/lifetime_stats.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "util/bytes.h"

namespace zc::cache {

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string human_bytes(uint64_t b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  return u == 0 ? std::to_string(b) + " B" : fmt("%.1f ", v) + units[u];
}

std::string human_ms(double ms) {
  if (ms < 1000) return fmt("%.0f ms", ms);
  if (ms < 120'000) return fmt("%.1f s", ms / 1000);
  if (ms < 7'200'000) return fmt("%.1f min", ms / 60'000);
  return fmt("%.1f h", ms / 3'600'000);
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "0";
  return fmt("%.3f", v);
}

void counters_json(std::ostringstream& os, const LifetimeCounters& c) {
  os << "{\"hits\":" << c.hits << ",\"misses\":" << c.misses << ",\"errors\":" << c.errors
     << ",\"puts\":" << c.puts << ",\"bytes_written\":" << c.bytes_written
     << ",\"compile_ms_saved\":" << json_number(c.compile_ms_saved) << "}";
}

std::string row(const std::string& name, const LifetimeCounters& c) {
  uint64_t lookups = c.hits + c.misses + c.errors;
  std::string rate = lookups ? fmt("%.1f%%", 100.0 * c.hits / lookups) : std::string("-");
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%-10s %10llu %10llu %8llu %8s %8llu %10s %10s\n", name.c_str(),
                static_cast<unsigned long long>(c.hits), static_cast<unsigned long long>(c.misses),
                static_cast<unsigned long long>(c.errors), rate.c_str(),
                static_cast<unsigned long long>(c.puts), human_bytes(c.bytes_written).c_str(),
                human_ms(c.compile_ms_saved).c_str());
  return buf;
}

// Stats files: magic, version, zeroed_unix, then per level hits, misses, errors, puts,
// bytes_written (u64) and compile_ms_saved (f64), then the first 8 bytes of a SHA-256 of all
// of it. Fixed size, so any truncation or torn write is caught.
constexpr uint8_t kStatsMagic[8] = {'Z', 'C', 'S', 'T', 'A', 'T', 'S', 0};
constexpr uint32_t kStatsVersion = 1;
constexpr size_t kStatsSize = kLifetimeStatsFileSize;

}  // namespace

std::vector<uint8_t> encode_lifetime_stats(const LifetimeStats& s) {
  ByteWriter w;
  w.raw(kStatsMagic, sizeof(kStatsMagic));
  w.u32(kStatsVersion);
  w.u32(0);
  w.u64(s.zeroed_unix);
  for (const auto& c : s.levels) {
    w.u64(c.hits);
    w.u64(c.misses);
    w.u64(c.errors);
    w.u64(c.puts);
    w.u64(c.bytes_written);
    w.f64(c.compile_ms_saved);
  }
  Digest d = sha256(w.bytes());
  w.raw(d.data(), 8);
  return w.take();
}

std::optional<LifetimeStats> decode_lifetime_stats(std::span<const uint8_t> b, std::string* why) {
  if (b.size() != kStatsSize) {
    *why = "size " + std::to_string(b.size()) + ", expected " + std::to_string(kStatsSize);
    return std::nullopt;
  }
  if (std::memcmp(b.data(), kStatsMagic, sizeof(kStatsMagic)) != 0) {
    *why = "bad magic";
    return std::nullopt;
  }
  Digest d = sha256(b.first(kStatsSize - 8));
  if (std::memcmp(d.data(), b.data() + kStatsSize - 8, 8) != 0) {
    *why = "checksum mismatch";
    return std::nullopt;
  }
  ByteReader r(b, "lifetime statistics");  // sizes checked above: it cannot throw
  r.raw(sizeof(kStatsMagic));
  if (uint32_t v = r.u32(); v != kStatsVersion) {
    *why = "unknown version " + std::to_string(v);
    return std::nullopt;
  }
  r.u32();
  LifetimeStats s;
  s.zeroed_unix = r.u64();
  for (auto& c : s.levels) {
    c.hits = r.u64();
    c.misses = r.u64();
    c.errors = r.u64();
    c.puts = r.u64();
    c.bytes_written = r.u64();
    c.compile_ms_saved = r.f64();
  }
  return s;
}

LifetimeCounters& LifetimeCounters::operator+=(const LifetimeCounters& o) {
  hits += o.hits;
  misses += o.misses;
  errors += o.errors;
  puts += o.puts;
  bytes_written += o.bytes_written;
  compile_ms_saved += o.compile_ms_saved;
  return *this;
}

bool LifetimeCounters::empty() const {
  return hits == 0 && misses == 0 && errors == 0 && puts == 0 && bytes_written == 0 &&
         compile_ms_saved == 0;
}

void LifetimeDelta::add(Level l, uint64_t h, uint64_t m, uint64_t e, uint64_t p, double saved,
                        uint64_t written) {
  LifetimeCounters& c = at(l);
  c += LifetimeCounters{h, m, e, p, written, saved};
}

bool LifetimeDelta::empty() const {
  for (const auto& c : levels) {
    if (!c.empty()) return false;
  }
  return true;
}

LifetimeCounters LifetimeStats::total() const {
  LifetimeCounters t;
  for (const auto& c : levels) t += c;
  return t;
}

void LifetimeStats::merge(const LifetimeDelta& d) {
  for (size_t i = 0; i < kLevelCount; ++i) levels[i] += d.levels[i];
}

std::string LifetimeStats::to_json() const {
  std::ostringstream os;
  os << "{\"zeroed_unix\":" << zeroed_unix << ",\"levels\":{";
  for (size_t i = 0; i < kLevelCount; ++i) {
    if (i) os << ",";
    os << "\"" << level_name(kLevels[i]) << "\":";
    counters_json(os, levels[i]);
  }
  os << "},\"total\":";
  counters_json(os, total());
  os << "}";
  return os.str();
}

std::string LifetimeStats::to_table() const {
  char head[256];
  std::snprintf(head, sizeof(head), "%-10s %10s %10s %8s %8s %8s %10s %10s\n", "level", "hits",
                "misses", "errors", "hit rate", "puts", "written", "saved");
  std::string out = head;
  for (size_t i = 0; i < kLevelCount; ++i) out += row(level_name(kLevels[i]), levels[i]);
  out += row("total", total());
  return out;
}

}  // namespace zc::cache
