// ZC_LOGS=cache,graph,output_code,timing,recompiles,regions: what to log to stderr, each
// line prefixed "[zc:<topic>]". Topics are read from the environment once; a disabled topic
// costs one predictable branch and builds no message.
#pragma once

#include <cstdint>
#include <sstream>
#include <string_view>

namespace zc::logging {

enum class Topic : uint8_t { cache, graph, output_code, timing, recompiles, regions, count };

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

}  // namespace zc::logging

#define ZC_LOG(topic)                                         \
  if (!::zc::logging::enabled(::zc::logging::Topic::topic)) { \
  } else                                                      \
    ::zc::logging::Line(::zc::logging::Topic::topic)
