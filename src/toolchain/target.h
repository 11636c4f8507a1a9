// The CPU target of generated code: the instruction-set level it is compiled for and the full
// set of compiler flags, with a fingerprint that changes whenever the binary could change.
//
// ZC_CPU_ISA picks the level: `native` (the default: the best code for this machine, never
// reused on another CPU) or a portable x86-64 level (`x86-64-v2`, `x86-64-v3`, `x86-64-v4`)
// so that one cache bundle serves a fleet of mixed machines.
//
// Flag choices (measured with bench/toolchain.cpp; the figures are in its header):
//  - -O2 plus, for gcc, -ftree-vectorize -fvect-cost-model=cheap. Plain -O2 in gcc vectorizes
//    only loops that need no epilogue and no runtime check, which leaves typical generated
//    kernels (reductions, loops outlined by OpenMP) scalar and 3x slower than -O3. The cheap
//    cost model gets -O3's run time for less compile time: on a 200-line source (gcc 13, Xeon)
//    plain -O2 compiles in 220-260 ms, the cheap model in 275-290 ms, -O3 in 300-370 ms.
//    Clang's -O2 already vectorizes with a full cost model, and clang rejects the option.
//  - -fno-math-errno -fno-trapping-math, never -ffast-math: those two let sqrtf and friends
//    inline and loops vectorize, while -ffast-math would reassociate reductions and break the
//    1e-5 agreement with the eager reference.
//  - -D_GLIBCXX_INCLUDE_NEXT_C_HEADERS: with libstdc++, <math.h> in C++ pulls in <cmath> and
//    most of <type_traits> (about 20,000 lines); the macro makes it the plain C header, which
//    cuts a small kernel's compile time from about 130 ms to 50 ms. Generated code must
//    therefore call the C names (expf, fabsf), not the C++ overloads (exp(float), abs(float)).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zc::toolchain {

struct CompilerInfo;

struct Target {
  // "native", "x86-64-v2", "x86-64-v3" or "x86-64-v4".
  std::string isa;
  // Every flag passed to the compiler, in order, before "-o <output> <source>".
  std::vector<std::string> flags;
  // What the link adds after the sources (the libraries, whose order matters there).
  std::vector<std::string> libs;
  // For `native`: the CPU it resolves to (brand, the cpuid words that list its instruction set
  // extensions, and which register states the operating system saves). What the compiler makes
  // of -march=native is a function of these and of the compiler, whose identity is in every key
  // that holds a binary. Empty for a portable level, whose binaries are meant to move between
  // machines.
  std::string native;

  // A stable, human-readable string of everything above. Two targets with equal fingerprints
  // produce the same binary from the same source with the same compiler; a `native` target's
  // fingerprint differs between CPUs whose features differ.
  std::string fingerprint() const;
};

// The target for `isa`, with flags for the compiler `cxx` (nullptr: find_cxx()'s, or gcc's
// when there is none). Raises zc::Error naming the valid values when `isa` is not one of them.
// For `native`, the resolution reads cpuid and runs no process, so it stays off the warm path.
// Does not check that this CPU can run the level (see host_supports).
Target make_target(std::string isa, const CompilerInfo* cxx = nullptr);

// The target from ZC_CPU_ISA (unset or empty: native), computed once per process. Raises
// zc::Error (on every call) when the value is invalid or names a level this CPU cannot run,
// since code built for it would die of an illegal instruction. The reference stays valid for
// the life of the process.
const Target& cpu_target();

// Whether this CPU (and its operating system) can execute code compiled for `isa`. True for
// `native`; false for a name that is not an ISA level.
bool host_supports(std::string_view isa);

// The highest x86-64 level this CPU (and its operating system) runs: "x86-64-v4", "-v3",
// "-v2", or "x86-64" below those; empty on another architecture. What `zc env` reports, by
// the same test as host_supports.
std::string host_isa_level();

// This CPU: its brand and the cpuid words of its instruction set extensions, whatever the
// target's ISA level. What a timing measured here is valid for (max_autotune's records), where
// Target::fingerprint says what a binary is valid for.
std::string host_cpu_fingerprint();

// The ISA names make_target accepts, in increasing order of capability after "native".
const std::vector<std::string>& valid_isas();

}  // namespace zc::toolchain
