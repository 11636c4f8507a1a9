// Grad mode: whether ops called on this thread record what backward() needs. It is on by
// default; a NoGradGuard turns it off for its scope (inference, optimizer updates), as
// torch::NoGradGuard does; an AutoGradMode sets it either way for its scope
// (torch::AutoGradMode: a backward, which runs with it off, that runs forward code again with
// gradients, as nn::checkpoint's does).
#pragma once

namespace zc {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : previous_(GradMode::is_enabled()) {
    GradMode::set_enabled(enabled);
  }
  ~AutoGradMode() { GradMode::set_enabled(previous_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool previous_;
};

class NoGradGuard : public AutoGradMode {
 public:
  NoGradGuard() : AutoGradMode(false) {}
};

}  // namespace zc
