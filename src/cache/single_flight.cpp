#include "cache/single_flight.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "util/log.h"

namespace zc::cache {

namespace {

using SteadyClock = std::chrono::steady_clock;

std::string new_flight_token() {
  static std::atomic<uint64_t> counter{0};
  return zc::hex(sha256(std::to_string(getpid()) + ":" +
                        std::to_string(SteadyClock::now().time_since_epoch().count()) + ":" +
                        std::to_string(counter++)))
      .substr(0, 32);
}

}  // namespace

SingleFlight::SingleFlight(Options options, Tier* disk, Tier* remote)
    : options_(std::move(options)), disk_(disk), remote_(remote) {}

int SingleFlight::lock_local(Level level, const Digest& d) {
  std::error_code ec;
  std::filesystem::create_directories(options_.lock_dir, ec);
  const std::string path = options_.lock_dir + "/" + level_name(level) + "-" + zc::hex(d) + ".lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    ZC_LOG(cache) << "no local compile lock (" << path << ": " << std::strerror(errno)
                  << "); compiling without waiting";
    return -1;
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
  if (errno != EWOULDBLOCK) {
    ::close(fd);
    return -1;
  }
  ZC_LOG(cache) << "waiting for another process compiling " << level_name(level)
                << " key=" << zc::hex(d).substr(0, 16) << " (local)";
  // flock has no timeout, and one made of signals would disturb the host program: poll.
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(options_.local_lock_ms);
  while (SteadyClock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
  }
  ZC_LOG(cache) << "gave up waiting for " << level_name(level)
                << " key=" << zc::hex(d).substr(0, 16) << " (local); compiling";
  ::close(fd);
  return -1;
}

SingleFlight::Flight SingleFlight::begin(Level level, const Digest& d, const Adopt& adopt) {
  Flight f;
  const std::string token = new_flight_token();
  HeldLocks held;
  // Local first: of the processes sharing this cache directory only the holder goes on to the
  // remote lock and compiles; the others wait here, then find its entry on disk.
  if (disk_ && options_.local_lock_ms > 0) {
    held.fd = lock_local(level, d);
    if (held.fd >= 0) {
      // The previous holder may have stored the entry between this process's lookup and its
      // lock (always so after a wait): look once more rather than compile it again.
      GetResult r = disk_->get(level, d);
      if (r.outcome == Outcome::hit && (f.entry = adopt(*disk_, std::move(r)))) {
        ::close(held.fd);
        return f;
      }
    }
  }
  auto release_local = [&] {
    if (held.fd >= 0) ::close(held.fd);
    held.fd = -1;
  };
  if (remote_ && options_.remote_lock_ms > 0) {
    const auto deadline = SteadyClock::now() + std::chrono::milliseconds(options_.remote_lock_ms);
    for (bool waited = false;; waited = true) {
      LockState state = remote_->try_lock(level, d, token, options_.remote_lock_ms);
      if (state == LockState::unavailable) break;
      const bool ours = state == LockState::acquired;
      if (!ours) {
        if (!waited) {
          ZC_LOG(cache) << "waiting for another process compiling " << level_name(level)
                        << " key=" << zc::hex(d).substr(0, 16);
        }
        if (SteadyClock::now() >= deadline) {
          ZC_LOG(cache) << "gave up waiting for " << level_name(level)
                        << " key=" << zc::hex(d).substr(0, 16) << "; compiling";
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      // Polls are not counted as misses: they would drown the lookups that matter. With the
      // lock ours, this is the look once more after the previous holder's release.
      GetResult r = remote_->get(level, d);
      if (r.outcome == Outcome::hit) {
        if (ours) remote_->unlock(level, d, token);
        release_local();
        // An unusable value leaves f.entry empty: this process compiles, holding no lock.
        f.entry = adopt(*remote_, std::move(r));
        return f;
      }
      if (ours) {
        held.remote = true;
        break;
      }
    }
  }
  if (held.fd >= 0 || held.remote) {
    std::lock_guard lock(mu_);
    held_.emplace_back(token, held);
    f.token = token;
  }
  return f;
}

void SingleFlight::end(Level level, const Digest& key, const std::string& token) {
  if (token.empty()) return;
  HeldLocks held;
  {
    std::lock_guard lock(mu_);
    auto it =
        std::find_if(held_.begin(), held_.end(), [&](const auto& h) { return h.first == token; });
    if (it == held_.end()) return;
    held = it->second;
    held_.erase(it);
  }
  if (remote_ && held.remote) remote_->unlock(level, key, token);
  // Closing the file releases its lock; waiters then find the entry on disk.
  if (held.fd >= 0) ::close(held.fd);
}

}  // namespace zc::cache
