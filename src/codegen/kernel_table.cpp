#include "codegen/kernel_table.h"

#include "ops/registry.h"
#include "util/log.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <vector>

namespace zc::codegen {

std::string member_ops(const Schedule& s, const Kernel& K) {
  std::string out;
  std::set<std::string_view> seen;
  int shown = 0;
  for (int32_t n : K.nodes) {
    const std::string_view name = ops::op_def(s.graph.nodes[n].op).name;
    if (!seen.insert(name).second) continue;
    if (shown++ == 8) return out + " ...";
    out += " ";
    out += name;
  }
  return out;
}

void KernelTable::log(std::string_view title) const {
  if (!empty()) logging::write(logging::Topic::kernels, str(title));
}

std::string KernelTable::str(std::string_view title) const {
  std::vector<std::pair<std::string, Entry>> rows(rows_.begin(), rows_.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double total = 0;
  std::map<std::string, double> by_kind;  // the label's first word
  for (const auto& [label, e] : rows) {
    total += e.ms;
    by_kind[label.substr(0, label.find(' '))] += e.ms;
  }
  std::ostringstream os;
  os << title << "\n";
  char line[160];
  std::snprintf(line, sizeof line, "%10s %7s %9s %9s %6s  %s\n", "total ms", "launches", "first us",
                "then us", "share", "kernel");
  os << line;
  for (const auto& [label, e] : rows) {
    // "then": the mean of the launches after the first (the first's when there is no other).
    const double then = e.launches > 1
                            ? 1e3 * (e.ms - e.first_ms) / static_cast<double>(e.launches - 1)
                            : 1e3 * e.first_ms;
    std::snprintf(line, sizeof line, "%10.3f %7lld %9.1f %9.1f %5.1f%%  ", e.ms,
                  static_cast<long long>(e.launches), 1e3 * e.first_ms, then,
                  total > 0 ? 100 * e.ms / total : 0.0);
    os << line << label << "\n";
  }
  os << "by kind:";
  for (const auto& [kind, ms] : by_kind) {
    std::snprintf(line, sizeof line, " %s %.3f ms (%.1f%%);", kind.c_str(), ms,
                  total > 0 ? 100 * ms / total : 0.0);
    os << line;
  }
  std::snprintf(line, sizeof line, " total %.3f ms", total);
  os << line;
  return os.str();
}

}  // namespace zc::codegen
