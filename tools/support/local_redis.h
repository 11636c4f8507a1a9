// A private redis-server for tests, benchmarks and `zc bench`: started on a free 127.0.0.1
// port with no persistence, stopped (SIGKILL) when the object goes away. It never listens on
// any other address, and nothing here contacts any other address.
//
// Not part of libzc: the cache's Redis tier is a client and never starts servers.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "util/env.h"

namespace zc_support {

// A loopback port nothing listens on right now (the kernel's pick, closed again at once).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

inline bool can_connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// The path of a program on PATH or in the usual system directories, or "" when there is none.
inline std::string find_program(const std::string& name) {
  std::string dirs =
      zc::env::get(zc::env::Var::path).value_or("") + ":/usr/bin:/usr/local/bin:/usr/sbin";
  for (size_t at = 0; at <= dirs.size();) {
    size_t end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(at, end - at);
    at = end + 1;
    if (dir.empty() || dir[0] != '/') continue;  // relative entries are not searched
    std::string p = dir + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

class LocalRedis {
 public:
  // Starts the server and waits (at most 5 s) until it accepts connections; running() says
  // whether it did.
  explicit LocalRedis(const std::string& password = "") : port_(free_port()), password_(password) {
    std::string exe = find_program("redis-server");
    if (exe.empty()) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      if (!std::freopen("/dev/null", "w", stdout)) _exit(127);
      std::string port = std::to_string(port_);
      std::vector<const char*> argv{exe.c_str(), "--port",      port.c_str(), "--bind",
                                    "127.0.0.1", "--save",      "",           "--appendonly",
                                    "no",        "--daemonize", "no"};
      if (!password.empty()) {
        argv.push_back("--requirepass");
        argv.push_back(password.c_str());
      }
      argv.push_back(nullptr);
      ::execv(exe.c_str(), const_cast<char* const*>(argv.data()));
      _exit(127);
    }
    for (int i = 0; i < 500 && !can_connect(port_); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    running_ = can_connect(port_);
  }
  LocalRedis(const LocalRedis&) = delete;
  LocalRedis& operator=(const LocalRedis&) = delete;
  ~LocalRedis() { stop(); }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    running_ = false;
  }
  bool running() const { return running_; }
  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  const std::string& password() const { return password_; }

 private:
  int port_;
  std::string password_;
  pid_t pid_ = -1;
  bool running_ = false;
};

}  // namespace zc_support
