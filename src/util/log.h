// ZC_LOGS=cache,graph,output_code,timing,recompiles,regions,fusion,kernels,roi,accuracy: what to
// log to stderr, each line prefixed "[zc:<topic>]". Topics are read from the environment once; a
// disabled topic costs one predictable branch and builds no message. `all` is every topic but
// kernels and roi: timing each CUDA kernel changes how compiled graphs run (no CUDA graphs, a
// wait per call; codegen/backends/cuda/kernel_profile.h; the CPU's steps are timed by the wall
// clock, codegen/backends/cpp/kernel_profile.h), and roi runs a few calls eagerly to
// time them (runtime/debug/roi.h), which a debugging log should not do unasked.
// Timing lines also say when: "[zc:timing] [812.40 ms] ...", ms since libzc was loaded, so work
// that overlaps (a background start, a wait for it) shows as such.
#pragma once

#include <cstdint>
#include <sstream>
#include <string_view>

namespace zc::logging {

enum class Topic : uint8_t {
  cache,
  graph,
  output_code,
  timing,
  recompiles,
  regions,
  fusion,
  kernels,
  roi,  // compiled modules' return on the compile time (runtime/debug/roi.h)
  accuracy,
  count
};

bool enabled(Topic t);
std::string_view topic_name(Topic t);
void write(Topic t, std::string_view message);  // one line (or block) to stderr
// Overrides the environment (tests and the CLI).
void set_enabled(Topic t, bool on);

// Collects one message and writes it when destroyed.
class Line {
 public:
  explicit Line(Topic t) : topic_(t) {}
  ~Line() { write(topic_, os_.str()); }
  template <class T>
  Line& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  Topic topic_;
  std::ostringstream os_;
};

// Turns `Voidify() & line << a << b` into a void expression: & binds looser than <<, so
// the whole message is built first. What lets ZC_LOG be one expression, safe after an `if`.
struct Voidify {
  void operator&(const Line&) const {}
};

}  // namespace zc::logging

// An expression statement (no dangling else); a disabled topic builds no message.
#define ZC_LOG(topic)                                  \
  !::zc::logging::enabled(::zc::logging::Topic::topic) \
      ? (void)0                                        \
      : ::zc::logging::Voidify() & ::zc::logging::Line(::zc::logging::Topic::topic)
