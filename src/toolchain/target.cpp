#include "toolchain/target.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define ZC_X86 1
#endif

#include "toolchain/compiler.h"
#include "util/env.h"
#include "zc/error.h"

namespace zc::toolchain {
namespace {

// Whether the compiler takes gcc's own options. Clang-based compilers (clang, Apple clang,
// Intel icpx) reject the vectorizer cost-model option, and their -O2 already vectorizes with a
// full cost model.
bool is_gcc(const CompilerInfo& cxx) {
  return cxx.family == CompilerFamily::gcc;
}

// g++ links libstdc++ into every shared object, which generated code never calls: resolving
// against it was 20 ms of each compile (a quarter of a small graph's). The libraries are
// gcc's C link (libgcc, libm, libc) and OpenMP's; other compilers keep their defaults.
std::vector<std::string> libs_for(bool gcc) {
  if (!gcc) return {};
  return {"-nodefaultlibs", "-lgomp", "-lm", "-lgcc_s", "-lgcc", "-lc"};
}

std::vector<std::string> flags_for(const std::string& isa, bool gcc) {
  std::vector<std::string> flags{"-O2"};
  if (gcc) flags.insert(flags.end(), {"-ftree-vectorize", "-fvect-cost-model=cheap"});
  flags.insert(flags.end(),
               {"-fPIC", "-shared", "-march=" + isa, "-fno-math-errno", "-fno-trapping-math",
                "-fopenmp", "-std=c++17", "-w", "-D_GLIBCXX_INCLUDE_NEXT_C_HEADERS"});
  return flags;
}

// The cpuid words that decide which instructions this CPU runs, and whether the operating
// system saves the vector registers they need (XCR0).
struct CpuId {
  std::string brand;
  uint32_t l1_eax = 0, l1_ecx = 0, l1_edx = 0;  // not ebx: it holds the core's APIC id
  uint32_t l7_ebx = 0, l7_ecx = 0, l7_edx = 0;
  uint32_t e1_ecx = 0, e1_edx = 0;
  uint64_t xcr0 = 0;
};

CpuId read_cpuid() {
  CpuId id;
#ifdef ZC_X86
  unsigned a = 0, b = 0, c = 0, d = 0;
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf >= 1 && __get_cpuid(1, &a, &b, &c, &d)) {
    id.l1_eax = a, id.l1_ecx = c, id.l1_edx = d;
  }
  if (max_leaf >= 7 && __get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    id.l7_ebx = b, id.l7_ecx = c, id.l7_edx = d;
  }
  unsigned max_ext = __get_cpuid_max(0x80000000u, nullptr);
  if (max_ext >= 0x80000001u && __get_cpuid(0x80000001u, &a, &b, &c, &d)) {
    id.e1_ecx = c, id.e1_edx = d;
  }
  if (max_ext >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      unsigned r[4] = {};  // __get_cpuid leaves it unwritten for a missing leaf
      __get_cpuid(0x80000002u + i, &r[0], &r[1], &r[2], &r[3]);
      std::memcpy(brand + 16 * i, r, 16);
    }
    id.brand = brand;
    size_t first = id.brand.find_first_not_of(' ');
    size_t last = id.brand.find_last_not_of(' ');
    id.brand = first == std::string::npos ? "" : id.brand.substr(first, last - first + 1);
  }
  if (id.l1_ecx & (1u << 27)) {  // OSXSAVE: xgetbv is available
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    id.xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
  }
#endif
  return id;
}

const CpuId& host_cpuid() {
  static const CpuId id = read_cpuid();
  return id;
}

bool bit(uint32_t word, int b) {
  return (word >> b) & 1u;
}

std::string cpuid_description(const CpuId& id) {
  char words[160];
  std::snprintf(words, sizeof words, "%08x.%08x.%08x.%08x.%08x.%08x.%08x.%08x.%llx", id.l1_eax,
                id.l1_ecx, id.l1_edx, id.l7_ebx, id.l7_ecx, id.l7_edx, id.e1_ecx, id.e1_edx,
                static_cast<unsigned long long>(id.xcr0));
  return "cpu=" + (id.brand.empty() ? std::string("unknown") : id.brand) + ";cpuid=" + words;
}

// What native resolves to is a function of the compiler and the CPU. The compiler's identity
// is already part of every key that holds a binary, so the CPU's cpuid words complete the
// fingerprint. Asking the compiler what -march=native means (-Q --help=target, ~20 ms) would
// put a process start on the warm path, which must take milliseconds.
std::string resolve_native(const CompilerInfo* cxx) {
  (void)cxx;
  return cpuid_description(host_cpuid());
}

std::string valid_list() {
  std::string s;
  for (const auto& isa : valid_isas()) s += (s.empty() ? "" : ", ") + isa;
  return s;
}

struct EnvTarget {
  Target target;
  std::string error;  // non-empty: raise this instead
};

}  // namespace

const std::vector<std::string>& valid_isas() {
  static const std::vector<std::string> isas{"native", "x86-64-v2", "x86-64-v3", "x86-64-v4"};
  return isas;
}

std::string Target::fingerprint() const {
  std::string s = "target{isa=" + isa + ";flags=";
  for (size_t i = 0; i < flags.size(); ++i) s += (i ? " " : "") + flags[i];
  if (!libs.empty()) s += ";libs=";
  for (size_t i = 0; i < libs.size(); ++i) s += (i ? " " : "") + libs[i];
  if (!native.empty()) s += ";native={" + native + "}";
  return s + "}";
}

Target make_target(std::string isa, const CompilerInfo* cxx) {
  bool known = false;
  for (const auto& v : valid_isas()) known = known || v == isa;
  if (!known) {
    throw Error("unknown CPU ISA level '" + isa + "'; valid values: " + valid_list() +
                " (native: the best code for this CPU; the x86-64 levels: portable binaries "
                "for a fleet of mixed machines)");
  }
  std::optional<CompilerInfo> found;
  if (cxx == nullptr) {
    try {
      found = find_cxx();
    } catch (const Error&) {
      // A bad ZC_CXX is reported by the compile that needs it; the target alone still stands.
    }
    if (found) cxx = &*found;
  }
  Target t;
  const bool gcc = cxx == nullptr || is_gcc(*cxx);
  t.flags = flags_for(isa, gcc);
  t.libs = libs_for(gcc);
  if (isa == "native") t.native = resolve_native(cxx);
  t.isa = std::move(isa);
  return t;
}

const Target& cpu_target() {
  static const EnvTarget cached = [] {
    EnvTarget r;
    std::string isa = env::non_empty(env::Var::cpu_isa).value_or("native");
    try {
      r.target = make_target(isa);
      if (!host_supports(isa)) {
        r.error = "ZC_CPU_ISA=" + isa + ": this CPU (" + host_cpuid().brand +
                  ") cannot run code built for that level; it would stop with an illegal "
                  "instruction. Set ZC_CPU_ISA to native or a lower level.";
      }
    } catch (const Error& e) {
      r.error = "ZC_CPU_ISA=" + isa + ": " + e.what();
    }
    return r;
  }();
  if (!cached.error.empty()) throw Error(cached.error);
  return cached.target;
}

std::string host_cpu_fingerprint() {
  return cpuid_description(host_cpuid());
}

bool host_supports(std::string_view isa) {
  if (isa == "native") return true;
  const CpuId& id = host_cpuid();
  // The feature lists of the x86-64 psABI levels, plus the XCR0 bits without which the
  // operating system does not preserve the registers those features use.
  bool v2 = bit(id.l1_ecx, 0) && bit(id.l1_ecx, 9) && bit(id.l1_ecx, 13) && bit(id.l1_ecx, 19) &&
            bit(id.l1_ecx, 20) && bit(id.l1_ecx, 23) && bit(id.e1_ecx, 0);
  bool v3 = v2 && bit(id.l1_ecx, 12) && bit(id.l1_ecx, 22) && bit(id.l1_ecx, 28) &&
            bit(id.l1_ecx, 29) && bit(id.l7_ebx, 3) && bit(id.l7_ebx, 5) && bit(id.l7_ebx, 8) &&
            bit(id.e1_ecx, 5) && (id.xcr0 & 0x6) == 0x6;
  bool v4 = v3 && bit(id.l7_ebx, 16) && bit(id.l7_ebx, 17) && bit(id.l7_ebx, 28) &&
            bit(id.l7_ebx, 30) && bit(id.l7_ebx, 31) && (id.xcr0 & 0xe0) == 0xe0;
  if (isa == "x86-64-v2") return v2;
  if (isa == "x86-64-v3") return v3;
  if (isa == "x86-64-v4") return v4;
  return false;
}

std::string host_isa_level() {
#ifdef ZC_X86
  for (const char* level : {"x86-64-v4", "x86-64-v3", "x86-64-v2"}) {
    if (host_supports(level)) return level;
  }
  return "x86-64";
#else
  return "";
#endif
}

}  // namespace zc::toolchain
