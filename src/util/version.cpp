// Version and build identity, and the CPU features the machine offers at run time (what the
// CPU kernel library makes of them is cpu/machine_info.cpp).
#include "zc/version.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include "zc_build_id.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace zc {

std::string version() {
  return ZC_VERSION;
}

std::string build_id() {
  return ZC_BUILD_ID;
}

std::string compiler_id() {
  return ZC_CXX_ID;
}

namespace {

#if defined(__x86_64__) || defined(__i386__)

// Read with cpuid rather than __builtin_cpu_supports: compilers disagree on which feature
// names that builtin accepts, and an unknown name is a compile error.
struct CpuidRegs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegs cpuid(unsigned leaf, unsigned subleaf = 0) {
  CpuidRegs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) return CpuidRegs{};
  return r;
}

uint64_t xgetbv0() {
  unsigned eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

bool bit(unsigned reg, int b) {
  return (reg >> b) & 1u;
}

std::string detect_cpu_features() {
  unsigned max_leaf = static_cast<unsigned>(__get_cpuid_max(0, nullptr));
  unsigned max_ext = static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr));
  CpuidRegs l1 = cpuid(1);
  CpuidRegs l7 = max_leaf >= 7 ? cpuid(7, 0) : CpuidRegs{};
  CpuidRegs l7s1 = (max_leaf >= 7 && l7.eax >= 1) ? cpuid(7, 1) : CpuidRegs{};
  CpuidRegs ext = max_ext >= 0x80000001u ? cpuid(0x80000001u) : CpuidRegs{};

  // A CPU can have AVX or AVX-512 while the OS does not save their registers; then they
  // must not be used, so each group also needs its XCR0 state bits.
  uint64_t xcr0 = bit(l1.ecx, 27) ? xgetbv0() : 0;
  bool os_avx = (xcr0 & 0x6) == 0x6;
  bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
  bool os_amx = (xcr0 & 0x60000) == 0x60000;

  struct Feature {
    const char* name;
    bool present;
  };
  const Feature features[] = {
      {"sse4.2", bit(l1.ecx, 20)},
      {"popcnt", bit(l1.ecx, 23)},
      {"avx", os_avx && bit(l1.ecx, 28)},
      {"avx2", os_avx && bit(l7.ebx, 5)},
      {"fma", os_avx && bit(l1.ecx, 12)},
      {"f16c", os_avx && bit(l1.ecx, 29)},
      {"bmi1", bit(l7.ebx, 3)},
      {"bmi2", bit(l7.ebx, 8)},
      {"lzcnt", bit(ext.ecx, 5)},
      {"movbe", bit(l1.ecx, 22)},
      {"avx_vnni", os_avx && bit(l7s1.eax, 4)},
      {"avx512f", os_avx512 && bit(l7.ebx, 16)},
      {"avx512dq", os_avx512 && bit(l7.ebx, 17)},
      {"avx512cd", os_avx512 && bit(l7.ebx, 28)},
      {"avx512bw", os_avx512 && bit(l7.ebx, 30)},
      {"avx512vl", os_avx512 && bit(l7.ebx, 31)},
      {"avx512_vnni", os_avx512 && bit(l7.ecx, 11)},
      {"avx512_bf16", os_avx512 && bit(l7s1.eax, 5)},
      {"avx512_fp16", os_avx512 && bit(l7.edx, 23)},
      {"amx_tile", os_amx && bit(l7.edx, 24)},
      {"amx_bf16", os_amx && bit(l7.edx, 22)},
      {"amx_int8", os_amx && bit(l7.edx, 25)},
  };
  std::string out;
  for (const Feature& f : features) {
    if (!f.present) continue;
    if (!out.empty()) out += ' ';
    out += f.name;
  }
  return out;
}

#elif defined(__aarch64__) && defined(__linux__)

std::string detect_cpu_features() {
  unsigned long hw = getauxval(AT_HWCAP);
  std::string out = "neon";
  if (hw & HWCAP_FPHP) out += " fp16";
  if (hw & HWCAP_ASIMDDP) out += " dotprod";
  if (hw & HWCAP_SVE) out += " sve";
  return out;
}

#else

std::string detect_cpu_features() {
  return "";
}

#endif

}  // namespace

std::string cpu_features() {
  static const std::string features = detect_cpu_features();
  return features;
}

}  // namespace zc
