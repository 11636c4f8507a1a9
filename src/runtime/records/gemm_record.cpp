#if ZC_WITH_CUDA

#include "runtime/records/gemm_record.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "cache/cache.h"
#include "cuda/blaslt_descriptors.h"
#include "cuda/blaslt_library.h"
#include "cuda/blaslt_warm.h"
#include "cuda/driver.h"
#include "runtime/driver/compile_keys.h"
#include "runtime/records/codec.h"
#include "util/log.h"
#include "zc/cuda.h"
#include "zc/error.h"

namespace zc::runtime {

namespace {

bool same(const cuda::GemmUse& x, const cuda::GemmUse& y) {
  cuda::GemmProblem a = x.problem, b = y.problem;
  a.alpha = b.alpha = 1.0;
  return a == b && x.align == y.align;
}

bool contains(std::span<const cuda::GemmUse> in, const cuda::GemmUse& u) {
  for (const cuda::GemmUse& v : in) {
    if (same(u, v)) return true;
  }
  return false;
}

DType read_dtype(RecordReader& r) {
  const uint8_t v = r.u8();
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    if (static_cast<uint8_t>(t) == v) return t;
  }
  r.fail("dtype " + std::to_string(v) + " is not one cuBLASLt multiplies (f32, f64, f16, bf16)");
}

uint32_t read_alignment(RecordReader& r) {
  const uint32_t v = r.u32();
  if (v == 0 || v > 256 || (v & (v - 1)) != 0) {
    r.fail("alignment " + std::to_string(v) + " is not a power of two up to 256");
  }
  return v;
}

// A size or leading dimension (cuBLASLt takes at most 2^31 - 1), or a batch stride.
int64_t read_size(RecordReader& r, const char* what, bool stride) {
  const int64_t v = r.i64();
  const int64_t most = stride ? int64_t{1} << 48 : (int64_t{1} << 31) - 1;
  if (v < 0 || v > most) {
    r.fail(std::string(what) + " " + std::to_string(v) + " is outside 0.." + std::to_string(most));
  }
  return v;
}

// The cache key of the record for `device`'s kind of GPU.
cache::Key record_key(int device) {
  const cuda::DeviceProperties& props = cuda::device_properties(device);
  const std::string gpu = props.name + " sm_" + std::to_string(props.major) +
                          std::to_string(props.minor) + " " +
                          std::to_string(props.multiprocessor_count) + " SMs";
  const std::string libraries = "cuBLASLt " + std::to_string(cuda::blaslt().version) + ", driver " +
                                std::to_string(cuda::driver().version);
  return cublaslt_record_key(gpu, libraries);
}

// What each device's warm-up found, for the write at exit.
struct Found {
  std::mutex mu;
  std::vector<std::pair<int, std::vector<cuda::GemmUse>>> per_device;
};

Found& found() {
  static Found* const f = new Found();  // used by the exit handler: never destroyed
  return *f;
}

void write_records_at_exit() {
  Found& f = found();
  std::lock_guard<std::mutex> lock(f.mu);
  for (const auto& [device, before] : f.per_device) {
    try {
      const std::vector<cuda::GemmUse> after =
          merge_gemm_record(before, cuda::planned_products(device));
      if (std::equal(after.begin(), after.end(), before.begin(), before.end(), same)) continue;
      cache::process_cache().put(record_key(device), encode_gemm_record(after), 0);
      ZC_LOG(cache) << "cuBLASLt products record for cuda:" << device << ": " << after.size()
                    << " products";
    } catch (const std::exception& e) {
      ZC_LOG(cache) << "cuBLASLt products record for cuda:" << device
                    << " not written: " << e.what();
    }
  }
}

// The warm source (cuda/blaslt_warm.h): on the start's background thread.
std::vector<cuda::GemmUse> recorded_products(int device) {
  std::vector<cuda::GemmUse> products;
  try {
    cache::Cache& store = cache::process_cache();  // its exit handler is registered first
    if (auto e = store.get(record_key(device))) products = decode_gemm_record(e->payload);
  } catch (const std::exception& e) {
    ZC_LOG(cache) << "cuBLASLt products record for cuda:" << device << " unusable: " << e.what();
    products.clear();
  }
  Found& f = found();
  std::lock_guard<std::mutex> lock(f.mu);
  if (f.per_device.empty()) std::atexit(write_records_at_exit);  // runs before the cache's
  f.per_device.emplace_back(device, products);
  return products;
}

// Installed when libzc loads; asked only once cuBLASLt has started on a device.
[[maybe_unused]] const bool installed = [] {
  cuda::set_warm_source(&recorded_products);
  return true;
}();

}  // namespace

std::vector<uint8_t> encode_gemm_record(std::span<const cuda::GemmUse> products) {
  RecordWriter w(kGemmRecordFormat);
  w.u64(products.size());
  for (const cuda::GemmUse& u : products) {
    const cuda::GemmProblem& p = u.problem;
    w.u8(static_cast<uint8_t>(p.a));
    w.u8(static_cast<uint8_t>(p.b));
    w.u8(static_cast<uint8_t>(p.d));
    for (int64_t v :
         {p.M, p.N, p.K, p.lda, p.ldb, p.ldd, p.batch, p.stride_a, p.stride_b, p.stride_d}) {
      w.i64(v);
    }
    w.u8(static_cast<uint8_t>(p.trans_a) | static_cast<uint8_t>(p.trans_b) << 1 |
         static_cast<uint8_t>(p.allow_tf32) << 2);
    w.u8(static_cast<uint8_t>(p.epilogue));
    for (uint32_t a : {u.align.a, u.align.b, u.align.d, u.align.bias}) w.u32(a);
  }
  return w.take();
}

std::vector<cuda::GemmUse> decode_gemm_record(std::span<const uint8_t> bytes) {
  RecordReader r(bytes, kGemmRecordFormat);
  const uint64_t n = r.count(kMaxRecordedProducts, "products");
  std::vector<cuda::GemmUse> out;
  for (uint64_t i = 0; i < n; ++i) {
    cuda::GemmUse u;
    cuda::GemmProblem& p = u.problem;
    p.a = read_dtype(r), p.b = read_dtype(r), p.d = read_dtype(r);
    for (auto [field, what] : {std::pair{&p.M, "M"},
                               {&p.N, "N"},
                               {&p.K, "K"},
                               {&p.lda, "lda"},
                               {&p.ldb, "ldb"},
                               {&p.ldd, "ldd"},
                               {&p.batch, "batch"},
                               {&p.stride_a, "stride_a"},
                               {&p.stride_b, "stride_b"},
                               {&p.stride_d, "stride_d"}}) {
      *field = read_size(r, what, what[0] == 's');
    }
    const uint8_t flags = r.u8();
    if (flags > 7) r.fail("unknown flags");
    p.trans_a = flags & 1, p.trans_b = flags & 2, p.allow_tf32 = flags & 4;
    const uint8_t epilogue = r.u8();
    if (epilogue > static_cast<uint8_t>(cuda::Epilogue::bias_relu)) {
      r.fail("unknown epilogue " + std::to_string(epilogue));
    }
    p.epilogue = static_cast<cuda::Epilogue>(epilogue);
    u.align.a = read_alignment(r), u.align.b = read_alignment(r);
    u.align.d = read_alignment(r), u.align.bias = read_alignment(r);
    // What gemm() would refuse as a caller's bug is a bad record here, and so is an empty
    // product, which never makes a plan.
    if (p.M == 0 || p.N == 0 || p.K == 0 || p.batch == 0) {
      r.fail("an invalid product, empty: " + cuda::describe(p));
    }
    if (const std::string fault = cuda::gemm_problem_fault(p); !fault.empty()) {
      r.fail("an invalid product, " + fault);
    }
    out.push_back(u);
  }
  r.finish("product");
  return out;
}

std::vector<cuda::GemmUse> merge_gemm_record(std::span<const cuda::GemmUse> found,
                                             std::span<const cuda::GemmUse> planned) {
  std::vector<cuda::GemmUse> ran;
  for (const cuda::GemmUse& u : planned) {
    if (u.ran && !contains(ran, u)) ran.push_back(u);
  }
  bool anything_new = false;
  for (const cuda::GemmUse& u : ran) anything_new = anything_new || !contains(found, u);
  if (!anything_new) return {found.begin(), found.end()};
  std::vector<cuda::GemmUse> out = std::move(ran);
  for (const cuda::GemmUse& u : found) {
    if (!contains(out, u)) out.push_back(u);
  }
  if (out.size() > kMaxRecordedProducts) out.resize(kMaxRecordedProducts);
  for (cuda::GemmUse& u : out) u.ran = false, u.problem.alpha = 1.0;
  return out;
}

}  // namespace zc::runtime

#endif  // ZC_WITH_CUDA
