#include "runtime/debug/roi.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

#include "util/log.h"

namespace zc::runtime {

namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<RoiRecord>> records;
  int64_t next = 0;
  // With ZC_LOGS=roi, the report is written when the process exits.
  ~Registry();
};
Registry& registry() {
  static Registry r;
  return r;
}

compiler::Report report_of(const std::vector<std::shared_ptr<RoiRecord>>& records) {
  compiler::Report out;
  for (const auto& rec : records) out.modules.push_back(rec->snapshot());
  return out;
}

Registry::~Registry() {
  if (!logging::enabled(logging::Topic::roi) || records.empty()) return;
  logging::write(logging::Topic::roi, report_of(records).str());
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

}  // namespace

void RoiRecord::add_compile(double ms) {
  std::lock_guard lock(mu_);
  ++compiles_;
  compile_ms_ += ms;
}

void RoiRecord::add_compiled_call(double ms) {
  const auto ns = static_cast<int64_t>(ms * 1e6);
  const int64_t n = compiled_calls_.fetch_add(1, std::memory_order_relaxed);
  recent_ns_[static_cast<size_t>(n) % recent_ns_.size()].store(ns, std::memory_order_relaxed);
}

void RoiRecord::add_eager_call(double ms, bool sample) {
  std::lock_guard lock(mu_);
  ++eager_calls_;
  eager_samples_ += sample;
  // Eager calls are few unless roi_guard gave up; then the first thousand say enough.
  if (eager_ms_.size() < 1024) eager_ms_.push_back(ms);
}

bool RoiRecord::is_sample(int64_t n) {
  if (n == 2) return true;
  if (n < 10) return false;
  while (n % 10 == 0) n /= 10;
  return n == 1;
}

double RoiRecord::compiled_median_ms() const {
  const int64_t n = compiled_calls_.load(std::memory_order_relaxed);
  std::vector<double> v;
  for (int64_t i = 0; i < std::min<int64_t>(n, recent_ns_.size()); ++i) {
    v.push_back(static_cast<double>(recent_ns_[i].load(std::memory_order_relaxed)) * 1e-6);
  }
  return median(v);
}

double RoiRecord::eager_median_ms() const {
  return median(eager_ms_);
}

bool RoiRecord::gain_is_negative() const {
  std::lock_guard lock(mu_);
  if (eager_calls_ < 2 || compiled_calls_.load() < 5) return false;
  return eager_median_ms() < 0.95 * compiled_median_ms();
}

void RoiRecord::give_up() {
  std::lock_guard lock(mu_);
  gave_up_ = true;
}

compiler::ModuleRoi RoiRecord::snapshot() const {
  std::lock_guard lock(mu_);
  compiler::ModuleRoi r;
  r.module = name_;
  r.compiles = compiles_;
  r.compile_ms = compile_ms_;
  r.compiled_calls = compiled_calls_.load();
  r.compiled_ms_per_call = compiled_median_ms();
  r.eager_calls = eager_calls_;
  r.eager_samples = eager_samples_;
  r.eager_ms_per_call = eager_median_ms();
  r.gave_up = gave_up_;
  if (eager_calls_ > 0 && r.compiled_calls > 0) {
    r.gain_ms_per_call = r.eager_ms_per_call - r.compiled_ms_per_call;
    r.net_ms = r.gain_ms_per_call * static_cast<double>(r.compiled_calls) - compile_ms_;
    if (r.gain_ms_per_call > 0) {
      r.break_even_calls = static_cast<int64_t>(std::ceil(compile_ms_ / r.gain_ms_per_call));
    }
  }
  return r;
}

std::shared_ptr<RoiRecord> new_roi_record(const std::string& type_name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto rec = std::make_shared<RoiRecord>(type_name + "#" + std::to_string(++r.next));
  r.records.push_back(rec);
  return rec;
}

bool roi_logging() {
  return logging::enabled(logging::Topic::roi);
}

}  // namespace zc::runtime

namespace zc::compiler {

std::string ModuleRoi::str() const {
  char buf[512];
  std::ostringstream os;
  std::snprintf(buf, sizeof buf, "%s: %lld compile(s) %.1f ms; %lld calls at %.3f ms compiled",
                module.c_str(), static_cast<long long>(compiles), compile_ms,
                static_cast<long long>(compiled_calls), compiled_ms_per_call);
  os << buf;
  if (eager_calls == 0) {
    os << "; eager not measured (CompileOptions::roi_sampling or ZC_LOGS=roi samples it)";
  } else {
    std::snprintf(buf, sizeof buf,
                  " vs %.3f ms eager (medians; %lld eager calls, %lld of them samples)",
                  eager_ms_per_call, static_cast<long long>(eager_calls),
                  static_cast<long long>(eager_samples));
    os << buf;
    if (compiled_calls == 0) {
      os << "; no compiled call yet";
    } else if (break_even_calls >= 0) {
      std::snprintf(buf, sizeof buf,
                    ": saves %.3f ms a call, breaks even after %lld calls, net %+.1f ms",
                    gain_ms_per_call, static_cast<long long>(break_even_calls), net_ms);
      os << buf;
    } else {
      std::snprintf(buf, sizeof buf, ": compiled is %.3f ms a call slower, never breaks even",
                    -gain_ms_per_call);
      os << buf;
    }
  }
  if (gave_up) os << "; runs eagerly (roi_guard)";
  return os.str();
}

std::string Report::str() const {
  std::string s = "zc ROI report (" + std::to_string(modules.size()) + " compiled modules)\n";
  for (const ModuleRoi& m : modules) s += "  " + m.str() + "\n";
  return s;
}

std::string Report::json() const {
  std::ostringstream os;
  os << "{\"modules\":[";
  for (size_t i = 0; i < modules.size(); ++i) {
    const ModuleRoi& m = modules[i];
    os << (i ? "," : "") << "{\"module\":\"" << m.module << "\",\"compiles\":" << m.compiles
       << ",\"compile_ms\":" << m.compile_ms << ",\"compiled_calls\":" << m.compiled_calls
       << ",\"compiled_ms_per_call\":" << m.compiled_ms_per_call
       << ",\"eager_calls\":" << m.eager_calls << ",\"eager_samples\":" << m.eager_samples
       << ",\"eager_ms_per_call\":" << m.eager_ms_per_call
       << ",\"gain_ms_per_call\":" << m.gain_ms_per_call
       << ",\"break_even_calls\":" << m.break_even_calls << ",\"net_ms\":" << m.net_ms
       << ",\"gave_up\":" << (m.gave_up ? "true" : "false") << "}";
  }
  os << "]}";
  return os.str();
}

Report report() {
  auto& r = runtime::registry();
  std::vector<std::shared_ptr<runtime::RoiRecord>> records;
  {
    std::lock_guard lock(r.mu);
    records = r.records;
  }
  return runtime::report_of(records);
}

}  // namespace zc::compiler
