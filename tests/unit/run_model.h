// Runs the run_model tool (tests/tools) as a fresh process and parses what it prints, for the
// tests of behaviour that spans processes (persistent caches, the remote tier, single flight).
#pragma once

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>

namespace zc::test {

struct ProcessRun {
  int rc = -1;
  double ms = 0;  // the process's wall time
  std::string out;
  std::map<std::string, std::string> lines;  // first word -> rest of the line
  // A number from a JSON line: the value after "\"name\":", or -1.
  double num(const std::string& line, const std::string& name) const {
    auto it = lines.find(line);
    if (it == lines.end()) return -1;
    size_t at = it->second.find("\"" + name + "\":");
    return at == std::string::npos ? -1 : std::stod(it->second.substr(at + name.size() + 3));
  }
  // A counter (`what`) of one cache level and tier from the "cache" JSON line, or -1.
  double cache_count(const std::string& level, const std::string& tier,
                     const std::string& what) const {
    auto it = lines.find("cache");
    if (it == lines.end()) return -1;
    size_t at = it->second.find("\"level\":\"" + level + "\",\"tier\":\"" + tier + "\"");
    if (at == std::string::npos) return -1;
    size_t v = it->second.find("\"" + what + "\":", at);
    return v == std::string::npos ? -1 : std::stod(it->second.substr(v + what.size() + 3));
  }
};

// `env` prefixes the command (VAR=value ...); `args` are run_model's flags.
inline ProcessRun run_model(const std::string& env, const std::string& args = "") {
  std::string cmd = env + " " + ZC_TEST_TOOLS_DIR + "/run_model " + args + " 2>&1";
  ProcessRun r;
  auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 1 << 16> buf{};
  while (p && fgets(buf.data(), buf.size(), p)) {
    std::string line(buf.data());
    r.out += line;
    line.erase(line.find_last_not_of('\n') + 1);
    size_t sp = line.find(' ');
    if (sp != std::string::npos) r.lines.emplace(line.substr(0, sp), line.substr(sp + 1));
  }
  int status = p ? pclose(p) : -1;
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace zc::test
