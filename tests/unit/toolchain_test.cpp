#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "toolchain/compiler.h"
#include "toolchain/shared_library.h"
#include "toolchain/target.h"
#include "unit/test_support.h"
#include "zc/error.h"

namespace {

using zc::test::contains;
using zc::test::error_message;

namespace fs = std::filesystem;
using namespace zc::toolchain;

std::string test_dir() {
  return zc::test::test_dir("toolchain");
}

const CompilerInfo& cxx() {
  static const CompilerInfo info = [] {
    auto found = find_cxx();
    if (!found) throw std::runtime_error("no C++ compiler on this machine");
    return *found;
  }();
  return info;
}

const Target& native() {
  static const Target t = make_target("native");
  return t;
}

constexpr std::string_view kAddSource = R"(
#include <math.h>
#include <stdint.h>
extern "C" int zc_add(int a, int b) { return a + b; }
)";

// Without the memo, so that these tests run the real `--version` probe.
CompilerSearch search_with(std::optional<std::string> zc_cxx, std::optional<std::string> cxx_var) {
  CompilerSearch s = CompilerSearch::from_env();
  s.zc_cxx = std::move(zc_cxx);
  s.cxx = std::move(cxx_var);
  s.memo_dir.clear();
  return s;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_text(const std::string& path, std::string_view text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// A shell script that answers `--version` like a compiler and counts how often it was asked.
struct FakeCxx {
  std::string dir;
  std::string script = dir + "/fake-c++";
  std::string counter = dir + "/probes";

  void write(std::string_view version, const std::string& at = "") const {
    std::string path = at.empty() ? script : at;
    std::string text = "#!/bin/sh\nif [ \"$1\" = --version ]; then\n";
    text += "  echo probe >> '" + counter + "'\n";
    text += "  echo '" + std::string(version) + "'\n";
    text += "  echo 'a second line that is not the version'\n  exit 0\nfi\nexit 1\n";
    write_text(path, text);
    fs::permissions(path, fs::perms::owner_all);
  }
  int probes() const {
    std::string text = read_text(counter);
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }
  // ZC_CXX names the script (or `path`), with the given memo directory.
  CompilerSearch search(const std::string& memo_dir, const std::string& path = "") const {
    return CompilerSearch{path.empty() ? script : path, std::nullopt, "/usr/bin:/bin", memo_dir};
  }
  std::string version_of(const CompilerSearch& s) const {
    auto info = discover_cxx(s);
    return info ? info->version : "(not found)";
  }
};

// Every file in `dir`: memos and any temp file left behind.
std::vector<std::string> memo_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().string());
  return out;
}

TEST(ToolchainCompiler, FindsCxxWithStableIdentity) {
  ASSERT_TRUE(compiler_available());
  auto a = find_cxx();
  auto b = find_cxx();
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(fs::path(a->path).is_absolute()) << a->path;
  EXPECT_TRUE(fs::exists(a->real_path)) << a->real_path;
  EXPECT_GT(a->size, 0u);
  EXPECT_GT(a->mtime_ns, 0);
  EXPECT_EQ(a->identity(), b->identity());
  EXPECT_TRUE(contains(a->identity(), a->real_path));
  EXPECT_TRUE(contains(a->identity(), std::string("family=") + family_name(a->family)));

  // An uncached discovery of the same compiler names it the same way.
  auto again = discover_cxx(search_with(a->path, std::nullopt));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->identity(), a->identity());
}

TEST(ToolchainCompiler, FindsGxxByName) {
  auto gxx = discover_cxx(search_with("g++", std::nullopt));
  ASSERT_TRUE(gxx);
  EXPECT_TRUE(contains(gxx->path, "/g++")) << gxx->path;
  EXPECT_EQ(gxx->family, CompilerFamily::gcc);
  // Its file says what it is (a binary named ...g++...), so it was not asked.
  EXPECT_TRUE(gxx->version.empty()) << gxx->version;
}

TEST(ToolchainCompiler, IdentityChangesWithTheBinary) {
  CompilerInfo a = cxx();
  CompilerInfo b = a;
  b.mtime_ns += 1;
  EXPECT_NE(a.identity(), b.identity());
  b = a;
  b.size += 1;
  EXPECT_NE(a.identity(), b.identity());
  b = a;
  b.version += "-1";
  EXPECT_NE(a.identity(), b.identity());
  b = a;
  b.family = a.family == CompilerFamily::gcc ? CompilerFamily::clang : CompilerFamily::gcc;
  EXPECT_NE(a.identity(), b.identity());
}

// A compiled program that counts its runs in a file next to it, under `name` in `dir`.
std::string counting_binary(const std::string& dir, const std::string& name) {
  std::string src = dir + "/counter.cpp", exe = dir + "/" + name;
  std::ofstream(src) << "#include <stdio.h>\nint main() {\n  FILE* f = fopen(\"" << dir
                     << "/runs\", \"a\");\n  if (f) { fputs(\"run\\n\", f); fclose(f); }\n"
                     << "  puts(\"counting-compiler 1.0\");\n  return 0;\n}\n";
  ProcessResult r = run_process({cxx().path, "-O0", "-o", exe, src});
  if (r.exit_code != 0) throw std::runtime_error(r.output);
  return exe;
}

int runs_in(const std::string& dir) {
  std::ifstream f(dir + "/runs");
  int n = 0;
  for (std::string line; std::getline(f, line);) ++n;
  return n;
}

TEST(ToolchainCompiler, ACompilerKnownByItsFileIsNeverRun) {
  std::string dir = test_dir();
  std::string gxx = counting_binary(dir, "x86_64-linux-gnu-g++-99");
  auto found = discover_cxx(search_with(gxx, std::nullopt));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->family, CompilerFamily::gcc);
  EXPECT_TRUE(found->version.empty());
  std::string clang = counting_binary(dir, "clang++-99");
  ASSERT_TRUE(discover_cxx(search_with(clang, std::nullopt)));
  EXPECT_EQ(discover_cxx(search_with(clang, std::nullopt))->family, CompilerFamily::clang);
  EXPECT_EQ(runs_in(dir), 0);
  // A link named after a family does not make its target one: the resolved file is judged.
  fs::create_symlink(dir + "/x86_64-linux-gnu-g++-99", dir + "/c++");
  EXPECT_EQ(discover_cxx(search_with(dir + "/c++", std::nullopt))->family, CompilerFamily::gcc);
  EXPECT_EQ(runs_in(dir), 0);
}

TEST(ToolchainCompiler, WrappersAndUnnamedFilesAreAsked) {
  std::string dir = test_dir();
  for (std::string name : {"ccache", "cxx-unknown"}) {
    std::string exe = counting_binary(dir, name);
    CompilerSearch s = search_with(exe, std::nullopt);
    auto found = discover_cxx(s);
    ASSERT_TRUE(found) << name;
    EXPECT_EQ(found->version, "counting-compiler 1.0") << name;
    EXPECT_TRUE(contains(found->identity(), "version=counting-compiler 1.0")) << name;
  }
  EXPECT_EQ(runs_in(dir), 2);
}

TEST(ToolchainCompiler, MissingZcCxxIsAnErrorNamingIt) {
  std::string msg = error_message([] { discover_cxx(search_with("/nonexistent/bin/c++", "g++")); });
  EXPECT_TRUE(contains(msg, "ZC_CXX")) << msg;
  EXPECT_TRUE(contains(msg, "/nonexistent/bin/c++")) << msg;

  msg = error_message([] { discover_cxx(search_with("no-such-compiler-zc", std::nullopt)); });
  EXPECT_TRUE(contains(msg, "ZC_CXX=no-such-compiler-zc")) << msg;
}

TEST(ToolchainCompiler, ZcCxxThatIsNotACompilerIsAnError) {
  std::string msg = error_message([] { discover_cxx(search_with("/bin/false", std::nullopt)); });
  EXPECT_TRUE(contains(msg, "ZC_CXX")) << msg;
  EXPECT_TRUE(contains(msg, "--version")) << msg;
}

TEST(ToolchainCompiler, UnusableCxxFallsBackAndNoCompilerIsNullopt) {
  auto found = discover_cxx(search_with(std::nullopt, "/nonexistent/c++"));
  ASSERT_TRUE(found);
  EXPECT_NE(found->path, "/nonexistent/c++");

  CompilerSearch empty{std::nullopt, std::nullopt, "/nonexistent-dir"};
  EXPECT_FALSE(discover_cxx(empty));
}

TEST(ToolchainCompiler, RunProcessCapturesOutputAndStatus) {
  ProcessResult r = run_process({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_TRUE(contains(r.output, "out")) << r.output;
  EXPECT_TRUE(contains(r.output, "err")) << r.output;
  std::string msg = error_message([] { run_process({"/nonexistent/program"}); });
  EXPECT_TRUE(contains(msg, "/nonexistent/program")) << msg;
}

TEST(ToolchainCompilerMemo, SecondDiscoveryDoesNotRunTheCompiler) {
  FakeCxx fake{test_dir()};
  fake.write("fake-c++ (zc test) 1.0");
  std::string memo_dir = fake.dir + "/memo";
  auto a = discover_cxx(fake.search(memo_dir));
  auto b = discover_cxx(fake.search(memo_dir));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(fake.probes(), 1);
  EXPECT_EQ(a->version, "fake-c++ (zc test) 1.0");
  EXPECT_EQ(b->identity(), a->identity());
  std::vector<std::string> files = memo_files(memo_dir);
  ASSERT_EQ(files.size(), 1u);  // the memo, and no temp file left behind
  EXPECT_TRUE(contains(files[0], "/cxx-")) << files[0];
  EXPECT_EQ(read_text(files[0]), "zc-cxx-probe v1\nfake-c++ (zc test) 1.0\n");
}

TEST(ToolchainCompilerMemo, ChangedCompilerIsProbedAgain) {
  FakeCxx fake{test_dir()};
  std::string memo_dir = fake.dir + "/memo";
  fake.write("fake-c++ 1.0");
  EXPECT_EQ(fake.version_of(fake.search(memo_dir)), "fake-c++ 1.0");

  fake.write("fake-c++ 2.0, rebuilt");  // another size
  EXPECT_EQ(fake.version_of(fake.search(memo_dir)), "fake-c++ 2.0, rebuilt");
  EXPECT_EQ(fake.probes(), 2);

  // Same bytes, but touched: the mtime alone is enough.
  fs::last_write_time(fake.script, fs::last_write_time(fake.script) + std::chrono::seconds(10));
  EXPECT_EQ(fake.version_of(fake.search(memo_dir)), "fake-c++ 2.0, rebuilt");
  EXPECT_EQ(fake.probes(), 3);
  EXPECT_EQ(fake.version_of(fake.search(memo_dir)), "fake-c++ 2.0, rebuilt");
  EXPECT_EQ(fake.probes(), 3);

  // A symlink repointed at another compiler: the link's own file changes, and its target.
  std::string link = fake.dir + "/c++";
  std::string other = fake.dir + "/other-c++";
  fake.write("other-c++ 3.0", other);
  fs::create_symlink(fake.script, link);
  EXPECT_EQ(fake.version_of(fake.search(memo_dir, link)), "fake-c++ 2.0, rebuilt");
  fs::remove(link);
  fs::create_symlink(other, link);
  EXPECT_EQ(fake.version_of(fake.search(memo_dir, link)), "other-c++ 3.0");
  EXPECT_EQ(fake.probes(), 5);
}

TEST(ToolchainCompilerMemo, MalformedMemoIsIgnoredAndReplaced) {
  FakeCxx fake{test_dir()};
  fake.write("fake-c++ 1.0");
  std::string memo_dir = fake.dir + "/memo";
  ASSERT_EQ(fake.version_of(fake.search(memo_dir)), "fake-c++ 1.0");
  std::vector<std::string> files = memo_files(memo_dir);
  ASSERT_EQ(files.size(), 1u);
  const std::string memo = files[0];
  const std::string good = read_text(memo);
  int probes = fake.probes();
  for (std::string_view bad :
       {"", "garbage\n", "zc-cxx-probe v1\n", "zc-cxx-probe v1\nfake-c++", "zc-cxx-probe v1\n\n",
        "zc-cxx-probe v2\nfake-c++ 9.0\n", "zc-cxx-probe v1\nfake-c++ 9.0\nmore\n", "zc-cxx-pro"}) {
    write_text(memo, bad);
    EXPECT_EQ(fake.version_of(fake.search(memo_dir)), "fake-c++ 1.0") << "memo: " << bad;
    EXPECT_EQ(fake.probes(), ++probes) << "memo: " << bad;
    EXPECT_EQ(read_text(memo), good) << "memo: " << bad;
  }
  // Over the size limit, even with a valid start.
  write_text(memo, "zc-cxx-probe v1\n" + std::string(10000, 'x') + "\n");
  EXPECT_EQ(fake.version_of(fake.search(memo_dir)), "fake-c++ 1.0");
  EXPECT_EQ(fake.probes(), ++probes);
  EXPECT_EQ(memo_files(memo_dir).size(), 1u);
}

TEST(ToolchainCompilerMemo, NoMemoDirProbesEveryTime) {
  FakeCxx fake{test_dir()};
  fake.write("fake-c++ 1.0");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(fake.version_of(fake.search("")), "fake-c++ 1.0");
  EXPECT_EQ(fake.probes(), 3);
}

TEST(ToolchainCompilerMemo, UnwritableMemoDirStillProbes) {
  FakeCxx fake{test_dir()};
  fake.write("fake-c++ 1.0");
  // A file where a directory should be: refused even to root.
  std::string file = fake.dir + "/not-a-dir";
  write_text(file, "x");
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(fake.version_of(fake.search(file + "/memo")), "fake-c++ 1.0");
  EXPECT_EQ(fake.probes(), 2);
  // A directory without write permission (which root writes anyway).
  std::string ro = fake.dir + "/read-only";
  fs::create_directories(ro);
  fs::permissions(ro, fs::perms(0555));
  for (int i = 0; i < 2; ++i) EXPECT_EQ(fake.version_of(fake.search(ro)), "fake-c++ 1.0");
  if (::geteuid() != 0) {
    EXPECT_EQ(fake.probes(), 4);
  }
  fs::permissions(ro, fs::perms(0755));
}

TEST(ToolchainTarget, FlagsForEachIsaLevel) {
  for (const std::string& isa : valid_isas()) {
    Target t = make_target(isa);
    EXPECT_EQ(t.isa, isa);
    std::vector<std::string> expected{"-O2",
                                      "-fPIC",
                                      "-shared",
                                      "-march=" + isa,
                                      "-fopenmp",
                                      "-fno-math-errno",
                                      "-fno-trapping-math",
                                      "-std=c++17",
                                      "-w"};
    for (const auto& f : expected) {
      EXPECT_NE(std::find(t.flags.begin(), t.flags.end(), f), t.flags.end()) << isa << " " << f;
    }
    for (const auto& f : t.flags) EXPECT_NE(f, "-ffast-math");
    EXPECT_TRUE(contains(t.fingerprint(), "isa=" + isa)) << t.fingerprint();
    EXPECT_EQ(t.fingerprint(), make_target(isa).fingerprint());
  }
  EXPECT_NE(make_target("x86-64-v2").fingerprint(), make_target("x86-64-v3").fingerprint());
  EXPECT_NE(make_target("x86-64-v3").fingerprint(), make_target("native").fingerprint());
}

TEST(ToolchainTarget, NativeFingerprintNamesThisCpu) {
  Target t = native();
  EXPECT_TRUE(contains(t.native, "cpu=")) << t.native;
  EXPECT_TRUE(contains(t.native, "cpuid=")) << t.native;
  EXPECT_TRUE(contains(t.fingerprint(), t.native));
  // A portable level must not depend on the machine that built it.
  EXPECT_TRUE(make_target("x86-64-v3").native.empty());
}

TEST(ToolchainTarget, FlagsFollowTheCompilerFamily) {
  CompilerInfo gcc = cxx();
  gcc.family = CompilerFamily::gcc;
  CompilerInfo clang = cxx();
  clang.family = CompilerFamily::clang;
  auto has = [](const Target& t, std::string_view prefix) {
    return std::any_of(t.flags.begin(), t.flags.end(),
                       [&](const std::string& f) { return f.starts_with(prefix); });
  };
  EXPECT_TRUE(has(make_target("x86-64-v3", &gcc), "-fvect-cost-model="));
  EXPECT_FALSE(has(make_target("x86-64-v3", &clang), "-fvect-cost-model="));
  EXPECT_TRUE(has(make_target("x86-64-v3", &clang), "-O2"));
  // gcc links generated code without libstdc++ (which it never calls): OpenMP's and C's
  // libraries instead, after the sources; other compilers keep their own defaults.
  const Target g = make_target("x86-64-v3", &gcc);
  EXPECT_NE(std::find(g.libs.begin(), g.libs.end(), "-nodefaultlibs"), g.libs.end());
  EXPECT_NE(std::find(g.libs.begin(), g.libs.end(), "-lgomp"), g.libs.end());
  EXPECT_TRUE(contains(g.fingerprint(), "libs=")) << g.fingerprint();
  EXPECT_TRUE(make_target("x86-64-v3", &clang).libs.empty());
}

TEST(ToolchainCompile, ClangCompilesWithItsOwnFlags) {
  std::optional<CompilerInfo> clang;
  try {
    clang = discover_cxx(search_with("clang++", std::nullopt));
  } catch (const zc::Error&) {
  }
  if (!clang) GTEST_SKIP() << "no clang++ on PATH";
  std::string dir = test_dir();
  CompileResult r = compile_shared_object(*clang, make_target("native", &*clang), kAddSource, dir);
  auto lib = SharedLibrary::open(r.so_path);
  EXPECT_EQ(lib->function<int(int, int)>("zc_add")(20, 22), 42);
}

TEST(ToolchainTarget, BadIsaListsValidValues) {
  std::string msg = error_message([] { make_target("x86-64-v5"); });
  EXPECT_TRUE(contains(msg, "x86-64-v5")) << msg;
  for (const auto& isa : valid_isas()) EXPECT_TRUE(contains(msg, isa)) << msg;
  EXPECT_TRUE(contains(error_message([] { make_target(""); }), "native"));
}

TEST(ToolchainTarget, HostSupportsIsMonotonic) {
  EXPECT_TRUE(host_supports("native"));
  EXPECT_FALSE(host_supports("pentium"));
  if (host_supports("x86-64-v4")) {
    EXPECT_TRUE(host_supports("x86-64-v3"));
  }
  if (host_supports("x86-64-v3")) {
    EXPECT_TRUE(host_supports("x86-64-v2"));
  }
  // The process target (ZC_CPU_ISA, unset in tests) resolves to native.
  if (std::getenv("ZC_CPU_ISA") == nullptr) {
    EXPECT_EQ(cpu_target().fingerprint(), native().fingerprint());
  }
}

TEST(ToolchainCompile, TinyKernelCompilesLoadsAndRuns) {
  std::string dir = test_dir();
  CompileResult r = compile_shared_object(cxx(), native(), kAddSource, dir);
  EXPECT_TRUE(fs::exists(r.so_path)) << r.so_path;
  EXPECT_TRUE(r.source_path.empty());
  EXPECT_GT(r.seconds, 0.0);
  // Only the shared object is left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);

  auto lib = SharedLibrary::open(r.so_path);
  auto* add = lib->function<int(int, int)>("zc_add");
  EXPECT_EQ(add(2, 40), 42);

  std::vector<uint8_t> bytes = read_file_bytes(r.so_path);
  fs::remove(r.so_path);
  auto from_memory = SharedLibrary::from_bytes(bytes);
  auto* add2 = from_memory->function<int(int, int)>("zc_add");
  EXPECT_EQ(add2(-5, 3), -2);
  EXPECT_NE(reinterpret_cast<void*>(add), reinterpret_cast<void*>(add2));
}

TEST(ToolchainCompile, KeepSourceKeepsIt) {
  std::string dir = test_dir();
  CompileResult r = compile_shared_object(cxx(), make_target("x86-64-v2"), kAddSource, dir,
                                          /*keep_source=*/true);
  ASSERT_TRUE(fs::exists(r.source_path)) << r.source_path;
  std::vector<uint8_t> kept = read_file_bytes(r.source_path);
  EXPECT_EQ(std::string(kept.begin(), kept.end()), kAddSource);
}

TEST(ToolchainCompile, SyntaxErrorReportsCompilerOutputAndKeepsSource) {
  std::string dir = test_dir();
  std::string msg = error_message([&] {
    compile_shared_object(cxx(), native(), "extern \"C\" int zc_bad( { return 1; }\n", dir);
  });
  EXPECT_TRUE(contains(msg, "error")) << msg;
  EXPECT_TRUE(contains(msg, "zc_bad")) << msg;  // the compiler quotes the offending line
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u) << "the source is kept and no partial object is left";
  EXPECT_EQ(files[0].extension(), ".cpp");
  EXPECT_TRUE(contains(msg, files[0].string())) << msg;
}

TEST(ToolchainCompile, UnitsCompileSideBySideIntoOneLibrary) {
  std::string dir = test_dir();
  const std::string head = "static inline int twice(int x) { return 2 * x; }\n";
  std::vector<std::string> units;
  for (int i = 0; i < 3; ++i) {
    units.push_back(head + "extern \"C\" int zc_u" + std::to_string(i) +
                    "(int x) { return twice(x) + " + std::to_string(i) + "; }\n");
  }
  CompileResult r = compile_shared_object_units(cxx(), native(), units, dir);
  // Only the shared object is left: no unit's source or object.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  auto lib = SharedLibrary::open(r.so_path);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(lib->function<int(int)>(("zc_u" + std::to_string(i)).c_str())(20), 40 + i);
  }
}

TEST(ToolchainCompile, AFailingUnitKeepsItsSourceAndLeavesNoObjects) {
  std::string dir = test_dir();
  std::vector<std::string> units{"extern \"C\" int zc_ok() { return 1; }\n",
                                 "extern \"C\" int zc_bad( { return 1; }\n"};
  std::string msg =
      error_message([&] { compile_shared_object_units(cxx(), native(), units, dir); });
  EXPECT_TRUE(contains(msg, "zc_bad")) << msg;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  for (const fs::path& f : files) EXPECT_EQ(f.extension(), ".cpp") << f;
  EXPECT_EQ(files.size(), 2u) << "both units' sources are kept, no object or library";
  EXPECT_TRUE(std::any_of(files.begin(), files.end(), [&](const fs::path& f) {
    return contains(msg, f.string());
  })) << msg;
}

TEST(ToolchainCompile, SweepRemovesOnlyWhatGoneProcessesLeft) {
  std::string dir = test_dir();
  pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  const std::string dead = "zc_" + std::to_string(gone), alive = "zc_" + std::to_string(getpid());
  auto touch = [&](const std::string& name) {
    std::ofstream(dir + "/" + name) << "x";
    return dir + "/" + name;
  };
  auto age = [](const std::string& path, std::chrono::hours h) {
    fs::last_write_time(path, fs::file_time_type::clock::now() - h);
  };
  age(touch(dead + "_0_0123456789abcdef.so"), std::chrono::hours(2));  // a killed compile's
  touch(dead + "_3_0123456789abcdef.so");   // maybe another container's compile, running now
  touch(dead + "_1_0123456789abcdef.cpp");  // a failure's source, fresh
  age(touch(dead + "_2_0123456789abcdef.cpp"), std::chrono::hours(24 * 8));
  touch(alive + "_0_0123456789abcdef.so");  // this process's, in use
  touch("notes.txt");
  touch("zc_notapid_0.so");
  EXPECT_EQ(sweep_work_dir(dir), 2);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  std::vector<std::string> want{dead + "_1_0123456789abcdef.cpp", dead + "_3_0123456789abcdef.so",
                                alive + "_0_0123456789abcdef.so", "notes.txt", "zc_notapid_0.so"};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(left, want);
  EXPECT_EQ(sweep_work_dir(dir + "/missing"), 0);
}

TEST(ToolchainCompile, ConcurrentCompilesAllSucceed) {
  std::string dir = test_dir();
  constexpr int kThreads = 4;
  std::vector<std::string> so(kThreads), errors(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      std::string src = "extern \"C\" int zc_id() { return " + std::to_string(100 + i) + "; }\n";
      try {
        so[i] = compile_shared_object(cxx(), native(), src, dir).so_path;
      } catch (const zc::Error& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(errors[i].empty()) << errors[i];
    auto lib = SharedLibrary::open(so[i]);
    EXPECT_EQ(lib->function<int()>("zc_id")(), 100 + i);
  }
}

TEST(ToolchainSharedLibrary, FromBytesGivesIndependentCopies) {
  std::string dir = test_dir();
  std::vector<std::vector<uint8_t>> binaries;
  for (int i = 0; i < 2; ++i) {
    std::string src = "extern \"C\" int zc_id() { return " + std::to_string(i) + "; }\n";
    binaries.push_back(read_file_bytes(compile_shared_object(cxx(), native(), src, dir).so_path));
  }
  // Load and unload repeatedly: a reused descriptor must never return a stale library.
  for (int round = 0; round < 3; ++round) {
    std::vector<std::shared_ptr<SharedLibrary>> live;
    for (int i = 0; i < 2; ++i) {
      live.push_back(SharedLibrary::from_bytes(binaries[i]));
      EXPECT_EQ(live.back()->function<int()>("zc_id")(), i) << "round " << round;
    }
    auto first = SharedLibrary::from_bytes(binaries[0]);
    live.clear();
    auto second = SharedLibrary::from_bytes(binaries[1]);
    EXPECT_EQ(first->function<int()>("zc_id")(), 0);
    EXPECT_EQ(second->function<int()>("zc_id")(), 1);
  }
}

TEST(ToolchainSharedLibrary, ErrorsNameTheCause) {
  std::string dir = test_dir();
  std::string so = compile_shared_object(cxx(), native(), kAddSource, dir).so_path;
  auto lib = SharedLibrary::open(so);
  std::string msg = error_message([&] { lib->symbol("zc_missing"); });
  EXPECT_TRUE(contains(msg, "zc_missing")) << msg;

  msg = error_message([] { SharedLibrary::open("/nonexistent/lib.so"); });
  EXPECT_TRUE(contains(msg, "/nonexistent/lib.so")) << msg;

  std::vector<uint8_t> junk{'n', 'o', 't', ' ', 'e', 'l', 'f'};
  msg = error_message([&] { SharedLibrary::from_bytes(junk); });
  EXPECT_TRUE(contains(msg, "ELF")) << msg;

  std::vector<uint8_t> truncated = read_file_bytes(so);
  truncated.resize(64);
  msg = error_message([&] { SharedLibrary::from_bytes(truncated); });
  EXPECT_TRUE(contains(msg, "cannot load")) << msg;

  msg = error_message([] { read_file_bytes("/nonexistent/file"); });
  EXPECT_TRUE(contains(msg, "/nonexistent/file")) << msg;
}

}  // namespace
