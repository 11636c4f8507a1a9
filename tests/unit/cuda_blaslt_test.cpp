// cuBLASLt without a GPU: the library is found by its file and not loaded until a product needs
// it, a missing or broken one is an error naming it, every descriptor of every kind of problem
// is accepted by the real library (attribute types and sizes; no GPU is needed for those), and
// a product on a machine without a GPU names the reason and loads nothing. The products
// themselves are checked on a GPU (cuda_blaslt_gemm_test.cpp).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "unit/test_support.h"
#include "zc/cuda.h"

#ifdef ZC_WITH_CUDA
#include "cuda/blaslt.h"
#include "cuda/blaslt_descriptors.h"
#include "cuda/blaslt_library.h"
#include "toolchain/library_file.h"
#endif

namespace {

#ifdef ZC_WITH_CUDA

using zc::DType;
using zc::cuda::Epilogue;
using zc::cuda::GemmProblem;
using zc::test::contains;
using zc::test::error_message;

// Whether a file whose name contains `name` is mapped into this process.
bool mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream all;
  all << maps.rdbuf();
  return contains(all.str(), name);
}

void touch(const std::string& path) {
  std::ofstream(path) << "";
}

// A dense row-major problem: A [M, K], B [K, N], D [M, N].
GemmProblem dense(DType t, int64_t m, int64_t n, int64_t k) {
  GemmProblem p;
  p.a = p.b = p.d = t;
  p.M = m;
  p.N = n;
  p.K = k;
  p.lda = k;
  p.ldb = n;
  p.ldd = n;
  return p;
}

TEST(CudaBlasLt, FoundByItsFileWithoutLoadingIt) {
  if (zc::cuda::blaslt_loaded()) {
    GTEST_SKIP() << "an earlier test of this process loaded cuBLASLt (CTest runs this alone)";
  }
  std::string why;
  if (!zc::cuda::blaslt_found(&why)) GTEST_SKIP() << "no cuBLASLt here: " << why;
  const auto file = zc::cuda::find_blaslt();
  ASSERT_TRUE(file.has_value());
  EXPECT_TRUE(contains(file->path, "libcublasLt.so")) << file->path;
  EXPECT_TRUE(std::filesystem::is_regular_file(file->real_path)) << file->real_path;
  EXPECT_GT(file->size, 0u);
  const std::string id = zc::cuda::blaslt_identity();
  EXPECT_TRUE(contains(id, "cublaslt{path=" + file->path + ";file=" + file->real_path)) << id;
  EXPECT_TRUE(contains(id, "size=" + std::to_string(file->size))) << id;
  EXPECT_TRUE(contains(id, "mtime_ns=")) << id;
  EXPECT_FALSE(zc::cuda::blaslt_loaded());
  EXPECT_FALSE(mapped("libcublasLt")) << "finding cuBLASLt mapped it";
}

TEST(CudaBlasLt, MissingLibraryIsAnErrorNamingItAndTheFix) {
  const std::string dir = zc::test::test_dir("blaslt");
  std::string why;
  EXPECT_FALSE(zc::cuda::find_blaslt_in({dir, dir + "/nowhere"}, &why).has_value());
  EXPECT_TRUE(contains(why, "cuBLASLt (libcublasLt.so.13")) << why;
  EXPECT_TRUE(contains(why, dir + "/nowhere")) << why;
  EXPECT_TRUE(contains(why, "CUDA_HOME")) << why;
  EXPECT_FALSE(zc::cuda::find_blaslt_in({}, &why).has_value());
  EXPECT_TRUE(contains(why, "not found in any directory")) << why;
}

TEST(CudaBlasLt, SearchTakesTheFirstDirectoryThenTheNewestName) {
  const std::string first = zc::test::fresh_dir("blaslt", "search-first");
  const std::string second = zc::test::fresh_dir("blaslt", "search-second");
  touch(second + "/libcublasLt.so.13");
  touch(first + "/libcublasLt.so");
  touch(first + "/libcublasLt.so.12");
  auto found = zc::cuda::find_blaslt_in({first, second});
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->path, first + "/libcublasLt.so.12");
  EXPECT_EQ(found->size, 0u);
  std::filesystem::create_symlink(first + "/libcublasLt.so.12", first + "/libcublasLt.so.13");
  found = zc::cuda::find_blaslt_in({first, second});
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->path, first + "/libcublasLt.so.13");
  EXPECT_EQ(found->real_path, std::filesystem::canonical(first + "/libcublasLt.so.12").string());
  // A directory of that name is no library.
  const std::string third = zc::test::fresh_dir("blaslt", "search-third");
  std::filesystem::create_directory(third + "/libcublasLt.so.13");
  EXPECT_FALSE(zc::cuda::find_blaslt_in({third}).has_value());
}

TEST(CudaBlasLt, ABrokenLibraryIsAnErrorNamingIt) {
  const std::string dir = zc::test::test_dir("blaslt");
  const std::string path = dir + "/libcublasLt.so.13";
  std::ofstream(path) << "not a shared object";
  const std::string msg = error_message([&] { zc::cuda::load_blaslt(path); });
  EXPECT_TRUE(contains(msg, "cuBLASLt at " + path + " could not be loaded")) << msg;
  EXPECT_TRUE(contains(msg, "CUDA_HOME")) << msg;
}

TEST(CudaBlasLt, CudaHomeIsSearchedFirst) {
  const char* old = std::getenv("CUDA_HOME");
  const std::string saved = old ? old : "";
  setenv("CUDA_HOME", "/opt/zc-test-cuda", 1);
  const std::vector<std::string> dirs = zc::toolchain::cuda_library_dirs();
  if (old) {
    setenv("CUDA_HOME", saved.c_str(), 1);
  } else {
    unsetenv("CUDA_HOME");
  }
  ASSERT_GE(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], "/opt/zc-test-cuda/lib64");
  EXPECT_EQ(dirs[1], "/opt/zc-test-cuda/lib");
  bool has_default = false;
  for (const std::string& d : dirs) has_default |= d == "/usr/local/cuda/lib64";
  EXPECT_TRUE(has_default);
}

TEST(CudaBlasLt, ProblemsAreDescribedAndLimitsNamed) {
  GemmProblem p = dense(DType::f16, 17, 64, 300);
  p.trans_a = true;
  p.lda = 17;
  p.batch = 3;
  p.stride_b = 19200;
  p.stride_d = 1088;
  p.epilogue = Epilogue::bias_relu;
  EXPECT_EQ(zc::cuda::describe(p),
            "f16 M=17 N=64 K=300 A^T lda=17 B ldb=64 ldd=64 batch=3 strides=0,19200,1088 "
            "bias_relu");
  GemmProblem mixed = dense(DType::bf16, 1, 2, 3);
  mixed.d = DType::f32;
  mixed.allow_tf32 = true;
  EXPECT_EQ(zc::cuda::describe(mixed), "bf16->f32 M=1 N=2 K=3 A lda=3 B ldb=2 ldd=2 tf32");

  GemmProblem huge = dense(DType::f32, int64_t{1} << 31, 4, 4);
  const std::string msg = error_message([&] { zc::cuda::check_gemm_problem(huge); });
  EXPECT_TRUE(contains(msg, "too large for cuBLASLt")) << msg;
  EXPECT_TRUE(contains(msg, "M=2147483648")) << msg;
  EXPECT_NO_THROW(zc::cuda::check_gemm_problem(dense(DType::f32, 0, 0, 0)));
  // K=0 reads neither operand: their leading dimensions do not matter.
  GemmProblem empty_sum = dense(DType::f32, 5, 6, 0);
  empty_sum.lda = empty_sum.ldb = 0;
  EXPECT_NO_THROW(zc::cuda::check_gemm_problem(empty_sum));
}

TEST(CudaBlasLt, AlignmentClassesCountPointersAndBatchStrides) {
  GemmProblem p = dense(DType::f16, 8, 8, 8);
  p.epilogue = Epilogue::bias;
  auto al = zc::cuda::gemm_alignment(p, 0x10000, 0x10002, 0x10010, 0x10004);
  EXPECT_EQ(al, (zc::cuda::GemmAlignment{256, 2, 16, 4}));
  p.epilogue = Epilogue::relu;  // no bias: its pointer does not count
  al = zc::cuda::gemm_alignment(p, 0x10000, 0x10000, 0x10000, 0x10002);
  EXPECT_EQ(al, (zc::cuda::GemmAlignment{256, 256, 256, 256}));
  p.batch = 2;
  p.stride_a = 3;  // item 1 of A starts 6 bytes on
  p.stride_b = 0;  // broadcast: every item at the pointer itself
  p.stride_d = 64;
  al = zc::cuda::gemm_alignment(p, 0x10000, 0x10000, 0x10000, 0);
  EXPECT_EQ(al, (zc::cuda::GemmAlignment{2, 256, 128, 256}));
}

// Every attribute zc sets, for every kind of problem, with the real library: a wrong type or
// size is refused by cuBLASLt (CUBLAS_STATUS_INVALID_VALUE) here, where no GPU is needed.
TEST(CudaBlasLt, TheLibraryAcceptsEveryDescriptor) {
  std::string why;
  if (!zc::cuda::blaslt_found(&why)) GTEST_SKIP() << "no cuBLASLt here: " << why;
  const zc::cuda::BlasLt& lt = zc::cuda::blaslt();
  EXPECT_GE(lt.version, 120000u) << lt.path;
  EXPECT_TRUE(zc::cuda::blaslt_loaded());
  struct Kinds {
    DType in, out;
  };
  int made = 0;
  for (const Kinds k : {Kinds{DType::f32, DType::f32}, Kinds{DType::f64, DType::f64},
                        Kinds{DType::f16, DType::f16}, Kinds{DType::bf16, DType::bf16},
                        Kinds{DType::f16, DType::f32}, Kinds{DType::bf16, DType::f32}}) {
    for (int trans = 0; trans < 4; ++trans) {
      for (const Epilogue e :
           {Epilogue::none, Epilogue::bias, Epilogue::relu, Epilogue::bias_relu}) {
        GemmProblem p = dense(k.in, 17, 64, 300);
        p.d = k.out;
        p.trans_a = (trans & 1) != 0;
        p.trans_b = (trans & 2) != 0;
        p.lda = (p.trans_a ? p.M : p.K) + 3;
        p.ldb = (p.trans_b ? p.K : p.N) + 5;
        p.ldd = p.N + 7;
        p.epilogue = e;
        p.allow_tf32 = k.in == DType::f32 && e == Epilogue::none;
        if (trans == 3) {
          p.batch = 4;
          p.stride_a = 0;
          p.stride_b = p.ldb * (p.trans_b ? p.N : p.K);
          p.stride_d = p.ldd * p.M;
        }
        SCOPED_TRACE(zc::cuda::describe(p));
        const zc::cuda::GemmAlignment align{2, 4, 16, 8};
        EXPECT_NO_THROW({ zc::cuda::GemmDescriptors d(lt, p, align, 0x10008); });
        ++made;
      }
    }
  }
  EXPECT_EQ(made, 6 * 4 * 4);
  const std::string text = zc::cuda::blaslt_status_text(CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_TRUE(contains(text, "CUBLAS_STATUS_NOT_SUPPORTED (15): ")) << text;
}

TEST(CudaBlasLt, WithoutAGpuAProductNamesTheReasonAndLoadsNothing) {
  if (zc::cuda::is_available()) GTEST_SKIP() << "a CUDA device is present";
  const bool loaded_before = zc::cuda::blaslt_loaded();
  const GemmProblem p = dense(DType::f32, 4, 4, 4);
  const std::string msg =
      error_message([&] { zc::cuda::gemm(p, 0x1000, 0x1000, 0x1000, 0, 0, nullptr); });
  EXPECT_TRUE(contains(msg, zc::cuda::unavailable_reason())) << msg;
  EXPECT_EQ(zc::cuda::blaslt_loaded(), loaded_before);
  const zc::cuda::BlasLtStats s = zc::cuda::blaslt_stats();
  EXPECT_EQ(s.products, 0u);
  EXPECT_EQ(s.heuristic_runs, 0u);
  EXPECT_EQ(s.plans, 0u);
}

#else

TEST(CudaBlasLt, NotBuilt) {
  GTEST_SKIP() << "built without the CUDA backend: " << zc::cuda::unavailable_reason();
}

#endif

}  // namespace
