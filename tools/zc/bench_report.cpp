// The report of `zc bench`: its table, its JSON and the medians of an earlier run to compare
// with. CPU rows keep the JSON fields they had when the published figures were taken; rows of
// another device add "device" and what NVRTC took of their processes.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "bench.h"
#include "util/json_quote.h"
#include "zc/zc.h"

namespace zc_cli::bench {

namespace {

// A start's share spent in NVRTC: the median over repeats of build / value. The build time
// sums the kernels built, which run side by side for a hierarchical compile, so it can pass 1.
bool has_share(const Row& r) {
  return r.device != "cpu" && (r.metric == "first_ms" || r.metric == "ready_ms");
}

double build_share(const Row& r) {
  std::vector<double> shares;
  for (size_t i = 0; i < r.values.size() && i < r.build_ms.size(); ++i) {
    if (r.values[i] > 0) shares.push_back(r.build_ms[i] / r.values[i]);
  }
  return median_of(shares);
}

std::string row_json(const Row& r) {
  std::vector<double> v = r.values;
  std::sort(v.begin(), v.end());
  std::ostringstream os;
  os << "{\"key\":\"" << r.key() << "\",\"scenario\":\"" << r.scenario << "\",\"model\":\""
     << r.model << "\",\"layers\":" << r.layers << ",\"regions\":\"" << r.regions
     << "\",\"cache\":\"" << r.cache << "\",\"metric\":\"" << r.metric
     << "\",\"median\":" << median_of(v) << ",\"min\":" << (v.empty() ? 0 : v.front())
     << ",\"max\":" << (v.empty() ? 0 : v.back()) << ",\"repeats\":" << v.size()
     << ",\"compiler_invocations\":" << r.compiles;
  if (r.device != "cpu") {
    os << ",\"device\":\"" << r.device << "\",\"nvrtc_ms\":" << median_of(r.build_ms);
    if (has_share(r)) os << ",\"nvrtc_share\":" << build_share(r);
  }
  os << "}";
  return os.str();
}

}  // namespace

std::map<std::string, double> read_medians(const std::string& path) {
  std::ifstream f(path);
  if (!f) {
    throw zc::Error("zc bench --compare: cannot read " + path +
                    "; pass a file that `zc bench --json FILE` wrote");
  }
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::map<std::string, double> out;
  size_t at = 0;
  while ((at = text.find("\"key\":\"", at)) != std::string::npos) {
    size_t start = at + 7, end = text.find('"', start);
    size_t m = text.find("\"median\":", end);
    if (end == std::string::npos || m == std::string::npos) break;
    out[text.substr(start, end - start)] = std::strtod(text.c_str() + m + 9, nullptr);
    at = m;
  }
  if (out.empty()) {
    throw zc::Error("zc bench --compare: " + path +
                    " holds no zc bench rows; pass a file that `zc bench --json FILE` wrote");
  }
  return out;
}

std::string machine() {
  std::string cpu = "unknown CPU";
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  return cpu + ", " + std::to_string(std::thread::hardware_concurrency()) + " cores";
}

void print_table(const std::vector<Row>& rows, const std::map<std::string, double>& baseline,
                 const std::string& gpu) {
  std::printf("zc bench: zc %s, build %s, %s; %s%s\n", zc::version().c_str(),
              zc::build_id().substr(0, 16).c_str(), zc::compiler_id().c_str(), machine().c_str(),
              gpu.empty() ? "" : ("; " + gpu).c_str());
  // The NVRTC column only when some row ran on a GPU: a CPU-only table stays as it was.
  const bool nvrtc =
      std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.device != "cpu"; });
  std::printf("%-6s %-7s %-10s %6s %-7s %-16s %-12s %11s %11s %11s %8s%s%s\n", "device", "what",
              "model", "layers", "regions", "cache", "metric", "median", "min", "max", "compiles",
              nvrtc ? "  nvrtc ms (share)" : "", baseline.empty() ? "" : "  vs baseline");
  for (const Row& r : rows) {
    std::vector<double> v = r.values;
    std::sort(v.begin(), v.end());
    std::printf("%-6s %-7s %-10s %6lld %-7s %-16s %-12s %11.2f %11.2f %11.2f %8lld",
                r.device.c_str(), r.scenario.c_str(), r.model.c_str(),
                static_cast<long long>(r.layers), r.regions.c_str(), r.cache.c_str(),
                r.metric.c_str(), median_of(v), v.front(), v.back(), r.compiles);
    if (nvrtc) {
      char cell[64] = "";
      if (r.device != "cpu" && has_share(r)) {
        std::snprintf(cell, sizeof cell, "%.1f (%.0f%%)", median_of(r.build_ms),
                      100 * build_share(r));
      } else if (r.device != "cpu") {
        std::snprintf(cell, sizeof cell, "%.1f", median_of(r.build_ms));
      }
      // Padded only when the baseline column follows it.
      std::printf("  %-*s", baseline.empty() ? 0 : 16, cell);
    }
    auto b = baseline.find(r.key());
    if (b != baseline.end() && b->second > 0) std::printf("  %.2fx", median_of(v) / b->second);
    std::printf("\n");
  }
}

void write_json(const std::string& path, const std::vector<Row>& rows, int repeats,
                const std::string& gpu) {
  std::ofstream f(path);
  if (!f) {
    throw zc::Error("zc bench --json: cannot write " + path +
                    "; name a file in a directory that exists and is writable");
  }
  f << "{\"zc_version\":" << zc::json::quote(zc::version())
    << ",\"build_id\":" << zc::json::quote(zc::build_id())
    << ",\"compiler\":" << zc::json::quote(zc::compiler_id())
    << ",\"machine\":" << zc::json::quote(machine()) << ",\"repeats\":" << repeats;
  if (!gpu.empty()) f << ",\"gpu\":" << zc::json::quote(gpu);
  f << ",\"rows\":[";
  for (size_t i = 0; i < rows.size(); ++i) f << (i ? "," : "") << row_json(rows[i]);
  f << "]}\n";
}

}  // namespace zc_cli::bench
