// Runs programs as fresh processes for the tests of behaviour that spans processes (persistent
// caches, the remote tier, single flight, the command line): any shell command, the zc command
// line, and the tools of tests/tools (run_model, train_step), whose output it parses.
#pragma once

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
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

// Runs `cmd` through the shell with stderr joined to stdout: exit code, output and wall time
// (`lines` left empty).
inline ProcessRun run_shell(const std::string& cmd) {
  ProcessRun r;
  auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::array<char, 1 << 16> buf{};
  while (p && fgets(buf.data(), buf.size(), p)) r.out += buf.data();
  int status = p ? pclose(p) : -1;
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// The zc command line of this build; `env` prefixes it (VAR=value ...).
inline ProcessRun zc_cli(const std::string& env, const std::string& args) {
  return run_shell(env + " " + ZC_TEST_TOOLS_DIR + "/../../zc " + args);
}

// A tool of tests/tools (run_model, train_step); `env` prefixes the command, `args` are its
// flags. `lines` maps the first word of each output line to the rest of it.
inline ProcessRun run_tool(const std::string& tool, const std::string& env,
                           const std::string& args = "") {
  ProcessRun r = run_shell(env + " " + ZC_TEST_TOOLS_DIR + "/" + tool + " " + args);
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    size_t sp = line.find(' ');
    if (sp != std::string::npos) r.lines.emplace(line.substr(0, sp), line.substr(sp + 1));
  }
  return r;
}

inline ProcessRun run_model(const std::string& env, const std::string& args = "") {
  return run_tool("run_model", env, args);
}

}  // namespace zc::test
