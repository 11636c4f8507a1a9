#include "cache/disk_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <system_error>
#include <utility>

#include "cache/file_io.h"
#include "util/log.h"

namespace zc::cache {

namespace {

using namespace file_io;

constexpr const char* kEntrySuffix = ".zce";
constexpr const char* kTempPrefix = "tmp.";
// A hit refreshes an entry's mtime only when it is older than this: last-use precision of a
// minute is plenty for eviction and saves a metadata write on most hits.
constexpr int64_t kTouchAfterSeconds = 60;
// Eviction goes below the cap by this fraction, so the puts right after it do not rescan.
constexpr double kLowWater = 0.9;

uint64_t now_unix() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::optional<Digest> parse_key_name(std::string_view name) {
  if (name.size() != 64 + 4 || !ends_with(name, kEntrySuffix)) return std::nullopt;
  Digest d{};
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < d.size(); ++i) {
    int hi = nibble(name[2 * i]), lo = nibble(name[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    d[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return d;
}

// Removes `path` only if it is still the file that was found bad: another process may have
// renamed a good entry over it since.
void remove_if_same(const std::string& path, const struct stat& bad) {
  struct stat now;
  if (::lstat(path.c_str(), &now) != 0) return;
  if (now.st_dev != bad.st_dev || now.st_ino != bad.st_ino) return;
  std::error_code ec;
  if (S_ISDIR(now.st_mode)) {
    std::filesystem::remove_all(path, ec);
  } else {
    std::filesystem::remove(path, ec);
  }
}

struct ScannedFile {
  std::string path;
  std::string name;
  Level level = Level::graph;
  std::string shard;
  uint64_t size = 0;
  timespec mtime{};
  bool regular = true;
  bool temp = false;
};

bool older(const timespec& a, const timespec& b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec < b.tv_sec : a.tv_nsec < b.tv_nsec;
}

// Calls f(name) for each directory entry except . and ..; silent on errors (a missing or
// unreadable directory has nothing to offer).
template <class F>
void for_each_in_dir(const std::string& dir, F&& f) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    f(name);
  }
  ::closedir(d);
}

struct ReadResult {
  enum Kind { missing, bad, ok } kind = missing;
  std::optional<Entry> entry;
  std::string reason;  // for bad (and for a missing entry that could not be opened)
};

class DiskTierImpl final : public DiskTier {
 public:
  explicit DiskTierImpl(const DiskTierOptions& o) : opt_(o), root_(o.root) {
    while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
    if (root_.empty()) {
      broken_ = "no cache directory given";
    } else {
      struct stat st;
      if (::stat(root_.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
        broken_ = "cache root " + root_ + " exists but is not a directory";
      }
    }
    if (!broken_.empty()) {
      ZC_LOG(cache) << "disk tier unusable: " << broken_;
    }
    // Temp names need only be unlikely to collide (O_EXCL catches the rest); this tag tells
    // apart tiers of one process and hosts that share a store.
    uint64_t seed =
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    temp_tag_ = std::to_string(mix64(seed ^ reinterpret_cast<uintptr_t>(this)) & 0xffffff);
  }

  TierKind kind() const override { return TierKind::disk; }
  std::string name() const override { return "disk"; }
  const std::string& root() const override { return root_; }

  std::string entry_path(Level level, const Digest& key) const override {
    std::string h = hex(key);
    return level_dir(level) + "/" + h.substr(0, 2) + "/" + h + kEntrySuffix;
  }

  GetResult get(Level level, const Digest& key) override {
    GetResult r;
    if (!broken_.empty()) {
      r.reason = broken_;
      return r;
    }
    ReadResult rr = read_entry(entry_path(level, key), level, key, /*touch=*/true);
    if (rr.kind == ReadResult::ok) {
      r.outcome = Outcome::hit;
      r.entry = std::move(rr.entry);
    } else {
      r.outcome = rr.kind == ReadResult::bad ? Outcome::error : Outcome::miss;
      r.reason = std::move(rr.reason);
    }
    return r;
  }

  // A stat, not a read: a caller deciding whether to look elsewhere should not pay for
  // reading and hashing the payload (tens of microseconds for a kernel) that its get() reads
  // and checks anyway.
  bool contains(Level level, const Digest& key) override {
    struct stat st;
    return broken_.empty() && ::stat(entry_path(level, key).c_str(), &st) == 0;
  }

  PutResult put(const Entry& entry) override {
    if (!broken_.empty()) return {false, broken_};
    std::string path = entry_path(entry.level, entry.key);
    std::string dir = path.substr(0, path.find_last_of('/'));
    // Hashing first keeps the temp file's life (and what a killed writer leaves) short.
    auto header = encode_entry_header(entry);
    std::string tmp;
    Fd fd;
    for (int attempt = 0; attempt < 3 && fd.get() < 0; ++attempt) {
      tmp = temp_name(dir);
      fd = Fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
      if (fd.get() >= 0) break;
      int e = errno;
      if (e == ENOENT) {
        if (int me = make_dirs(dir)) return fail_put("cannot create " + dir + ": " + sys_error(me));
      } else if (e != EEXIST) {
        return fail_put("cannot create a file in " + dir + ": " + sys_error(e));
      }
    }
    if (fd.get() < 0) return fail_put("cannot create a unique temp file in " + dir);

    int e = write_full(fd.get(), header, entry.payload);
    // Some file systems report write errors only at close.
    if (::close(fd.release()) != 0 && e == 0) e = errno;
    if (e != 0) {
      ::unlink(tmp.c_str());
      return fail_put("cannot write " + tmp + ": " + sys_error(e));
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      e = errno;
      if (e == EISDIR || e == ENOTEMPTY || e == EEXIST) {
        // A directory squats on the entry's name: clear it and try once more.
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
        e = ::rename(tmp.c_str(), path.c_str()) == 0 ? 0 : errno;
      }
      if (e != 0) {
        ::unlink(tmp.c_str());
        return fail_put("cannot rename into " + path + ": " + sys_error(e));
      }
    }
    after_put(kEntryHeaderSize + entry.payload.size());
    return {true, {}};
  }

  std::vector<TierListing> list() override {
    std::vector<TierListing> out;
    for (const ScannedFile& f : scan(false)) {
      if (!f.regular) continue;
      Fd fd(::open(f.path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
      if (fd.get() < 0) continue;
      uint8_t h[kEntryHeaderSize];
      ssize_t n = read_full(fd.get(), h, sizeof(h));
      std::string why;
      auto info = peek_entry(std::span<const uint8_t>(h, n < 0 ? 0 : static_cast<size_t>(n)), &why);
      auto key = parse_key_name(f.name);
      if (!info || !key || info->level != f.level || info->key != *key) {
        ZC_LOG(cache) << "disk: listing skips " << f.path << ": "
                      << (info ? std::string("stored under another level or key") : why);
        continue;
      }
      out.push_back(TierListing{*info, f.size, f.path});
    }
    return out;
  }

  uint64_t clear() override {
    uint64_t n = 0;
    for (const ScannedFile& f : scan(false)) {
      std::error_code ec;
      if (f.regular ? std::filesystem::remove(f.path, ec)
                    : std::filesystem::remove_all(f.path, ec) > 0) {
        ++n;
      }
    }
    std::lock_guard lock(evict_mu_);
    approx_total_.reset();
    return n;
  }

  VerifyReport verify() override {
    VerifyReport rep;
    for (const ScannedFile& f : scan(false)) {
      ++rep.checked;
      auto key = parse_key_name(f.name);
      std::string reason;
      if (!key) {
        reason = "file name is not a key";
      } else if (f.shard != f.name.substr(0, 2)) {
        reason = "in the wrong shard directory";
      }
      if (reason.empty()) {
        ReadResult rr = read_entry(f.path, f.level, *key, /*touch=*/false);
        if (rr.kind == ReadResult::ok || rr.kind == ReadResult::missing) {
          // Missing: another process removed or replaced it meanwhile; nothing to report.
          if (rr.kind == ReadResult::ok) ++rep.ok;
          continue;
        }
        rep.removed.push_back(RemovedFile{f.path, rr.reason, f.size});
        continue;  // read_entry removed it
      }
      struct stat st;
      if (::lstat(f.path.c_str(), &st) == 0) remove_if_same(f.path, st);
      ZC_LOG(cache) << "disk: verify removed " << f.path << ": " << reason;
      rep.removed.push_back(RemovedFile{f.path, reason, f.size});
    }
    return rep;
  }

  GcReport gc() override {
    GcReport rep;
    std::lock_guard lock(evict_mu_);
    std::vector<ScannedFile> files = scan(true);
    // Temp files of statistics updates live in the root, those of the compiler memo in
    // toolchain/ (toolchain/compiler.h).
    if (broken_.empty()) {
      for (const std::string& dir : {root_, root_ + "/toolchain"}) {
        for_each_in_dir(dir, [&](std::string_view name) {
          struct stat st;
          std::string path = dir + "/" + std::string(name);
          if (!name.starts_with(kTempPrefix) || ::lstat(path.c_str(), &st) != 0) return;
          ScannedFile f;
          f.path = std::move(path);
          f.size = static_cast<uint64_t>(st.st_size);
          f.mtime = st.st_mtim;
          f.temp = true;
          files.push_back(std::move(f));
        });
      }
    }
    uint64_t now = now_unix();
    std::vector<ScannedFile> entries;
    for (ScannedFile& f : files) {
      if (!f.temp) {
        rep.bytes_before += f.size;
        entries.push_back(std::move(f));
        continue;
      }
      auto age = static_cast<int64_t>(now) - static_cast<int64_t>(f.mtime.tv_sec);
      if (age >= static_cast<int64_t>(opt_.stale_temp_seconds) && ::unlink(f.path.c_str()) == 0) {
        ++rep.temp_files_removed;
        rep.removed.push_back(RemovedFile{f.path, "stale temp file", f.size});
      }
    }
    rep.bytes_after = evict_locked(std::move(entries), rep.bytes_before, &rep);
    approx_total_ = rep.bytes_after;
    return rep;
  }

  uint64_t total_bytes() override {
    uint64_t total = 0;
    for (const ScannedFile& f : scan(false)) total += f.size;
    return total;
  }

  void add_lifetime(const LifetimeDelta& delta) override {
    update_stats([&](LifetimeStats& s) { s.merge(delta); });
  }

  LifetimeStats lifetime() override {
    // The file is replaced atomically, so it is read without the lock.
    std::string why;
    auto s = read_stats(&why);
    if (!s) {
      if (!why.empty()) {
        ZC_LOG(cache) << "disk: lifetime statistics unreadable (" << why << "), read as zeros";
      }
      return LifetimeStats{};
    }
    return *s;
  }

  void reset_lifetime() override {
    update_stats([](LifetimeStats& s) { s = LifetimeStats{.zeroed_unix = now_unix()}; });
  }

 private:
  // The pid is read at each call: a forked child may go on using its parent's tier.
  std::string temp_name(const std::string& dir, std::string_view what = "") {
    return dir + "/" + kTempPrefix + std::string(what) + std::to_string(::getpid()) + "." +
           temp_tag_ + "." + std::to_string(counter_++);
  }

  std::string level_dir(Level level) const { return root_ + "/v1/" + level_name(level); }

  PutResult fail_put(std::string reason) {
    ZC_LOG(cache) << "disk: put failed: " << reason;
    return {false, std::move(reason)};
  }

  ReadResult read_entry(const std::string& path, Level level, const Digest& key, bool touch) {
    ReadResult rr;
    // Non-blocking, so that a FIFO squatting on the name is refused instead of hanging here.
    Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    if (fd.get() < 0) {
      int e = errno;
      if (e != ENOENT) rr.reason = "cannot open " + path + ": " + sys_error(e);
      return rr;
    }
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) {
      rr.reason = "cannot stat " + path + ": " + sys_error(errno);
      return rr;
    }
    auto refuse = [&](std::string reason) {
      ZC_LOG(cache) << "disk: refused " << path << ": " << reason;
      remove_if_same(path, st);
      rr.kind = ReadResult::bad;
      rr.reason = std::move(reason);
      return rr;
    };
    if (!S_ISREG(st.st_mode)) {
      return refuse(S_ISDIR(st.st_mode) ? "a directory, not an entry file" : "not a regular file");
    }
    auto size = static_cast<uint64_t>(st.st_size);
    uint8_t header[kEntryHeaderSize];
    ssize_t hn = read_full(fd.get(), header, std::min<uint64_t>(size, kEntryHeaderSize));
    if (hn < 0) {
      int e = errno;
      rr.reason = "cannot read " + path + ": " + sys_error(e);
      return rr;
    }
    std::vector<uint8_t> payload;
    if (size > kEntryHeaderSize && hn == static_cast<ssize_t>(kEntryHeaderSize)) {
      // Refuse a header that is bad on its own before reading a possibly large payload.
      std::string why;
      if (!peek_entry(std::span<const uint8_t>(header, kEntryHeaderSize), &why)) return refuse(why);
      payload.resize(size - kEntryHeaderSize);
      ssize_t pn = read_full(fd.get(), payload.data(), payload.size());
      if (pn < 0) {
        rr.reason = "cannot read " + path + ": " + sys_error(errno);
        return rr;
      }
      payload.resize(static_cast<size_t>(pn));
    }
    std::string why;
    auto entry = decode_entry_parts(std::span<const uint8_t>(header, static_cast<size_t>(hn)),
                                    std::move(payload), level, &key, &why);
    if (!entry) return refuse(why);
    if (touch && static_cast<int64_t>(now_unix()) - st.st_mtim.tv_sec >= kTouchAfterSeconds) {
      ::futimens(fd.get(), nullptr);  // best effort: a read-only store still serves hits
    }
    rr.kind = ReadResult::ok;
    rr.entry = std::move(entry);
    return rr;
  }

  // Every *.zce under <root>/v1 (and with `temps`, every tmp.* in the shard directories).
  std::vector<ScannedFile> scan(bool temps) const {
    std::vector<ScannedFile> out;
    if (!broken_.empty()) return out;
    for (Level level : kLevels) {
      std::string ldir = level_dir(level);
      for_each_in_dir(ldir, [&](std::string_view shard) {
        std::string sdir = ldir + "/" + std::string(shard);
        for_each_in_dir(sdir, [&](std::string_view name) {
          bool temp = name.starts_with(kTempPrefix);
          if (temp ? !temps : !ends_with(name, kEntrySuffix)) return;
          ScannedFile f;
          f.path = sdir + "/" + std::string(name);
          struct stat st;
          if (::lstat(f.path.c_str(), &st) != 0) return;  // removed meanwhile
          f.name = name;
          f.level = level;
          f.shard = shard;
          f.size = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
          f.mtime = st.st_mtim;
          f.regular = S_ISREG(st.st_mode);
          f.temp = temp;
          out.push_back(std::move(f));
        });
      });
    }
    return out;
  }

  void after_put(uint64_t stored) {
    if (opt_.max_bytes == 0) return;
    std::lock_guard lock(evict_mu_);
    if (!approx_total_) {
      uint64_t total = 0;
      for (const ScannedFile& f : scan(false)) total += f.size;
      approx_total_ = total;  // includes the entry just written
    } else {
      *approx_total_ += stored;
    }
    if (*approx_total_ <= opt_.max_bytes) return;
    std::vector<ScannedFile> entries = scan(false);
    uint64_t total = 0;
    for (const ScannedFile& f : entries) total += f.size;
    approx_total_ = evict_locked(std::move(entries), total, nullptr);
  }

  // Removes least recently used entries until `total` is at most the low-water mark; returns
  // the new total. Holds evict_mu_.
  uint64_t evict_locked(std::vector<ScannedFile> entries, uint64_t total, GcReport* rep) {
    if (opt_.max_bytes == 0 || total <= opt_.max_bytes) return total;
    auto target = static_cast<uint64_t>(static_cast<double>(opt_.max_bytes) * kLowWater);
    std::sort(entries.begin(), entries.end(),
              [](const ScannedFile& a, const ScannedFile& b) { return older(a.mtime, b.mtime); });
    uint64_t evicted = 0;
    for (const ScannedFile& f : entries) {
      if (total <= target) break;
      struct stat st;
      if (::lstat(f.path.c_str(), &st) != 0) {
        total -= f.size;  // gone already
        continue;
      }
      // Used (or rewritten) by another process since the scan: no longer the oldest.
      if (st.st_mtim.tv_sec != f.mtime.tv_sec || st.st_mtim.tv_nsec != f.mtime.tv_nsec) continue;
      std::error_code ec;
      bool removed = f.regular ? std::filesystem::remove(f.path, ec)
                               : std::filesystem::remove_all(f.path, ec) > 0;
      if (!removed) continue;
      total -= f.size;
      ++evicted;
      if (rep) {
        ++rep->entries_evicted;
        rep->removed.push_back(RemovedFile{f.path, "least recently used", f.size});
      }
    }
    ZC_LOG(cache) << "disk: evicted " << evicted << " entries, " << total << " bytes left (cap "
                  << opt_.max_bytes << ")";
    return total;
  }

  std::optional<LifetimeStats> read_stats(std::string* why) const {
    if (!broken_.empty()) {
      *why = broken_;
      return std::nullopt;
    }
    Fd fd(::open((root_ + "/stats").c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      if (errno != ENOENT) *why = sys_error(errno);
      return std::nullopt;
    }
    uint8_t buf[kLifetimeStatsFileSize + 1];
    ssize_t n = read_full(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      *why = sys_error(errno);
      return std::nullopt;
    }
    return decode_lifetime_stats(std::span<const uint8_t>(buf, static_cast<size_t>(n)), why);
  }

  // Read-modify-write of the statistics under an exclusive lock on a separate lock file: the
  // statistics file itself is replaced by rename, and a lock on a replaced file locks nothing.
  template <class F>
  void update_stats(F&& modify) {
    auto warn = [&](const std::string& what) {
      ZC_LOG(cache) << "disk: lifetime statistics not updated: " << what;
    };
    if (!broken_.empty()) return warn(broken_);
    if (int e = make_dirs(root_)) return warn("cannot create " + root_ + ": " + sys_error(e));
    std::string lock_path = root_ + "/stats.lock";
    Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (lock.get() < 0) return warn("cannot open " + lock_path + ": " + sys_error(errno));
    while (::flock(lock.get(), LOCK_EX) != 0) {
      if (errno != EINTR) return warn("cannot lock " + lock_path + ": " + sys_error(errno));
    }
    std::string why;
    std::optional<LifetimeStats> s = read_stats(&why);
    if (!s) {
      if (!why.empty()) {
        ZC_LOG(cache) << "disk: lifetime statistics corrupt (" << why << "), reset";
      }
      s = LifetimeStats{.zeroed_unix = now_unix()};
    }
    modify(*s);
    std::vector<uint8_t> bytes = encode_lifetime_stats(*s);
    std::string tmp = temp_name(root_, "stats.");
    Fd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (out.get() < 0) return warn("cannot create " + tmp + ": " + sys_error(errno));
    int e = write_full(out.get(), bytes, {});
    if (::close(out.release()) != 0 && e == 0) e = errno;
    if (e == 0 && ::rename(tmp.c_str(), (root_ + "/stats").c_str()) != 0) e = errno;
    if (e != 0) {
      ::unlink(tmp.c_str());
      warn(sys_error(e));
    }
  }

  const DiskTierOptions opt_;
  std::string root_;
  std::string broken_;  // set when the root cannot hold a store: every operation says why
  std::string temp_tag_;
  std::atomic<uint64_t> counter_{0};
  std::mutex evict_mu_;
  std::optional<uint64_t> approx_total_;  // entries' bytes as this process believes; unset: unknown
};

}  // namespace

std::unique_ptr<DiskTier> open_disk_tier(const DiskTierOptions& options) {
  return std::make_unique<DiskTierImpl>(options);
}

}  // namespace zc::cache
