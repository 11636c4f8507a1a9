// The ways one library product can run, and the problem it computes: what Mode::MaxAutotune
// chooses among per call site (runtime/products/autotune.h times them; generated code passes the
// chosen code to its services, codegen/backends/cpp/abi.h).
//
// A choice is a library (oneDNN or OpenBLAS for f32, or oneDNN's matmul on a B kept packed
// across calls where B is a weight, cpu/onednn_matmul.h; OpenBLAS for f64), a share of the call's
// thread team (all of it, half, a quarter, or one thread: a product too small to split wastes
// the other threads' time in synchronization), and for a batch of products whether they run
// one per thread or one after another on the team. Code 0 is the default: what a product runs
// as without tuning (the process's library, the whole team, cpu::share_batch_out's rule). A
// share, not a count, so a choice made alone still fits when concurrent calls split the pool
// (cpu/threads.h).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cpu/onednn_matmul.h"
#include "zc/dtype.h"

namespace zc::cpu {

struct GemmChoice {
  // onednn_packed: only for an unbatched f32 product whose B is a weight (GemmProblem::
  // b_weight); elsewhere it runs as onednn.
  enum class Library : uint8_t { standard, openblas, onednn, onednn_packed };
  enum class Batch : uint8_t { standard, shared_out, in_turn };
  // Threads: the team >> shift (at least one); kOneThread: one thread whatever the team.
  static constexpr uint8_t kOneThread = 7;

  Library library = Library::standard;
  uint8_t shift = 0;  // 0..7
  Batch batch = Batch::standard;
  // f32 with bf16 operands (cpu/bf16_gemm.h) on oneDNN for a product where bf16_pays, where
  // this process can; f32 otherwise. Set by CompileOptions::matmul_precision, never by tuning:
  // it changes results.
  bool bf16 = false;

  // One byte: bits 0-1 library, 2-4 shift, 5-6 batch, 7 bf16. Decoding rejects codes no
  // encoding makes (batch 3) with zc::Error.
  uint8_t code() const;
  static GemmChoice from_code(uint8_t code);
  // The threads it runs on out of a team of `team`.
  int threads(int team) const;
  // "oneDNN, 8 of 16 threads, one product per thread".
  std::string str(int team) const;
  bool operator==(const GemmChoice&) const = default;
};

// Row-major C[m, n] = op(A) op(B), repeated over the batch dims (each {count, stride of A, of
// B, of C} in elements, as generated code passes them; empty: one product).
struct GemmProblem {
  DType dtype = DType::f32;  // f32 or f64
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  std::vector<std::array<int64_t, 4>> batch;
  // B is what a call site reads from a graph input or constant (a weight, the same from call to
  // call in inference), so a packed copy of it can be kept: only for unbatched f32 products.
  bool b_weight = false;

  int64_t products() const;
  // "f32 NT 512x768x256 ld 256,256,768 batch 4x4 (s 32768,32768,16384 ...)": stable, and the
  // autotune record's key, so every field that can change a timing is in it.
  std::string str() const;
  // Elements each operand spans (A, B, C), for buffers to run it on.
  std::array<int64_t, 3> extents() const;
  bool operator==(const GemmProblem&) const = default;
};

// Whether bf16 operands pay for an f32 product of m x n x k (MatmulPrecision::Bf16): at least
// 2^22 multiply-adds. Below that (attention's 128x128x64 heads) converting the operands costs
// more than the faster product saves: half the f32 rate on the GPU host. Applied per call, with
// the call's sizes, so that code serving many sizes follows it too.
bool bf16_pays(int64_t m, int64_t n, int64_t k);

// The choices worth timing for `p` with a team of `team`, the default first, each distinct.
std::vector<GemmChoice> gemm_candidates(const GemmProblem& p, int team);

// Runs `p` as `choice` says, again and again (the tuner times it, the tests check it): a packed
// choice converts B at the first run and reuses it while the run is alive, as a compiled call
// site does for a weight, so B must not change between runs.
class GemmRun {
 public:
  GemmRun(const GemmProblem& p, GemmChoice choice);
  // On buffers of the problem's extents.
  void operator()(const void* a, const void* b, void* c) const;

 private:
  std::vector<int64_t> batch_dims() const;  // as generated code passes them (cpu/blas.h)

  GemmProblem p_;
  GemmChoice choice_;
  std::unique_ptr<OnednnMatmul> site_;
};

// GemmRun once.
void run_gemm(const GemmProblem& p, GemmChoice choice, const void* a, const void* b, void* c);

}  // namespace zc::cpu
