#include "cpu/gemm_choice.h"

#include <algorithm>

#include "cpu/blas.h"
#include "util/check.h"

namespace zc::cpu {

uint8_t GemmChoice::code() const {
  return static_cast<uint8_t>(static_cast<uint8_t>(library) | (shift & 7) << 2 |
                              static_cast<uint8_t>(batch) << 5 | (bf16 ? 0x80 : 0));
}

GemmChoice GemmChoice::from_code(uint8_t code) {
  const uint8_t lib = code & 3, batch = (code >> 5) & 3;
  if (batch == 3) {
    throw Error("GEMM choice code " + std::to_string(code) +
                " is not one zc makes (library 0-3 in bits 0-1, thread shift in 2-4, batch 0-2 "
                "in 5-6, bf16 in 7)");
  }
  GemmChoice c;
  c.library = static_cast<Library>(lib);
  c.shift = (code >> 2) & 7;
  c.batch = static_cast<Batch>(batch);
  c.bf16 = (code & 0x80) != 0;
  return c;
}

int GemmChoice::threads(int team) const {
  if (shift == kOneThread) return 1;
  return std::max(1, team >> shift);
}

std::string GemmChoice::str(int team) const {
  std::string s;
  switch (library) {
    case Library::standard:
      s = "default library";
      break;
    case Library::openblas:
      s = "OpenBLAS";
      break;
    case Library::onednn:
      s = "oneDNN";
      break;
    case Library::onednn_packed:
      s = "oneDNN on a kept packed B";
      break;
  }
  s += ", " + std::to_string(threads(team)) + " of " + std::to_string(team) + " threads";
  if (batch == Batch::shared_out) s += ", one product per thread";
  if (batch == Batch::in_turn) s += ", products in turn";
  if (bf16) s += ", bf16 operands";
  return s;
}

int64_t GemmProblem::products() const {
  int64_t n = 1;
  for (const auto& d : batch) n *= d[0];
  return n;
}

std::string GemmProblem::str() const {
  std::string s = std::string(dtype == DType::f64 ? "f64 " : "f32 ") + (ta ? "T" : "N") +
                  (tb ? "T" : "N") + " " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                  std::to_string(k) + " ld " + std::to_string(lda) + "," + std::to_string(ldb) +
                  "," + std::to_string(ldc);
  if (!batch.empty()) {
    s += " batch";
    for (const auto& d : batch) {
      s += " " + std::to_string(d[0]) + "(" + std::to_string(d[1]) + "," + std::to_string(d[2]) +
           "," + std::to_string(d[3]) + ")";
    }
  }
  if (b_weight) s += " B weight";
  return s;
}

std::array<int64_t, 3> GemmProblem::extents() const {
  // One matrix's span: its last row's start plus a row, stored row-major with leading dim ld.
  auto matrix = [](bool t, int64_t rows, int64_t cols, int64_t ld) {
    if (t) std::swap(rows, cols);
    return rows <= 0 || cols <= 0 ? 0 : (rows - 1) * ld + cols;
  };
  std::array<int64_t, 3> e{matrix(ta, m, k, lda), matrix(tb, k, n, ldb), matrix(false, m, n, ldc)};
  for (const auto& d : batch) {
    for (int x = 0; x < 3; ++x) e[x] += (d[0] - 1) * d[1 + x];
  }
  return e;
}

bool bf16_pays(int64_t m, int64_t n, int64_t k) {
  return m * n * k >= (int64_t{1} << 22);
}

std::vector<GemmChoice> gemm_candidates(const GemmProblem& p, int team) {
  std::vector<GemmChoice::Library> libraries;
  if (p.dtype == DType::f32) {
    const bool dnnl = default_f32_library() == GemmLibrary::onednn;
    libraries.push_back(dnnl ? GemmChoice::Library::onednn : GemmChoice::Library::openblas);
    if (has_gemm_library(GemmLibrary::onednn)) {
      libraries.push_back(dnnl ? GemmChoice::Library::openblas : GemmChoice::Library::onednn);
    }
  } else {
    libraries.push_back(GemmChoice::Library::openblas);
  }
  // Whole team, half, a quarter, one thread: the shares that differ for this team.
  std::vector<uint8_t> shifts;
  std::vector<int> seen;
  for (uint8_t shift : {uint8_t{0}, uint8_t{1}, uint8_t{2}, GemmChoice::kOneThread}) {
    GemmChoice c;
    c.shift = shift;
    const int t = c.threads(team);
    if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
    seen.push_back(t);
    shifts.push_back(shift);
  }
  std::vector<GemmChoice::Batch> batches{GemmChoice::Batch::standard};
  if (p.products() > 1) batches = {GemmChoice::Batch::shared_out, GemmChoice::Batch::in_turn};
  std::vector<GemmChoice> out;
  // B kept packed, after the others: where it only ties, a library on B as given wins.
  if (p.dtype == DType::f32 && p.b_weight && p.batch.empty() && onednn_matmul_available()) {
    libraries.push_back(GemmChoice::Library::onednn_packed);
  }
  for (auto lib : libraries) {
    for (uint8_t shift : shifts) {
      for (auto b : batches) out.push_back(GemmChoice{lib, shift, b});
    }
  }
  // The default first: what the product runs as untuned, so a tie keeps it.
  if (p.products() > 1) {
    const bool shared = share_batch_out(p.products(), p.m * p.n * p.k);
    auto standard =
        std::find(out.begin(), out.end(),
                  GemmChoice{libraries[0], 0,
                             shared ? GemmChoice::Batch::shared_out : GemmChoice::Batch::in_turn});
    std::rotate(out.begin(), standard, standard + 1);
  }
  return out;
}

GemmRun::GemmRun(const GemmProblem& p, GemmChoice choice) : p_(p), choice_(choice) {
  if (choice.library == GemmChoice::Library::onednn_packed && p.dtype == DType::f32 &&
      p.batch.empty()) {
    site_ = std::make_unique<OnednnMatmul>(OnednnMatmul::Keep::first_sight);
  }
}

void GemmRun::operator()(const void* a, const void* b, void* c) const {
  const GemmProblem& p = p_;
  if (p.dtype == DType::f32) {
    auto* A = static_cast<const float*>(a);
    auto* B = static_cast<const float*>(b);
    auto* C = static_cast<float*>(c);
    if (site_) {
      // One B for the run's life: any fixed identity keeps it.
      return sgemm_ex(choice_, site_.get(), WeightIdentity{1, 0}, p.ta, p.tb, p.m, p.n, p.k, A,
                      p.lda, B, p.ldb, C, p.ldc, GemmEpilogue{});
    }
    if (p.batch.empty())
      return sgemm_as(choice_, p.ta, p.tb, p.m, p.n, p.k, A, p.lda, B, p.ldb, C, p.ldc);
    return sgemm_batch_as(choice_, p.ta, p.tb, p.m, p.n, p.k, A, p.lda, B, p.ldb, C, p.ldc,
                          batch_dims().data());
  }
  ZC_CHECK(p.dtype == DType::f64, "a GEMM problem of dtype " << dtype_name(p.dtype));
  auto* A = static_cast<const double*>(a);
  auto* B = static_cast<const double*>(b);
  auto* C = static_cast<double*>(c);
  if (p.batch.empty())
    return dgemm_as(choice_, p.ta, p.tb, p.m, p.n, p.k, A, p.lda, B, p.ldb, C, p.ldc);
  dgemm_batch_as(choice_, p.ta, p.tb, p.m, p.n, p.k, A, p.lda, B, p.ldb, C, p.ldc,
                 batch_dims().data());
}

std::vector<int64_t> GemmRun::batch_dims() const {
  std::vector<int64_t> dims{static_cast<int64_t>(p_.batch.size())};
  for (const auto& d : p_.batch) dims.insert(dims.end(), d.begin(), d.end());
  return dims;
}

void run_gemm(const GemmProblem& p, GemmChoice choice, const void* a, const void* b, void* c) {
  GemmRun(p, choice)(a, b, c);
}

}  // namespace zc::cpu
