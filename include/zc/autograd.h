// Grad mode: whether ops called on this thread record what backward() needs. It is on by
// default; a NoGradGuard turns it off for its scope (inference, optimizer updates), as
// torch::NoGradGuard does.
#pragma once

namespace zc {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace zc
