// The CUDA runtime: what every build says without a GPU (refusals that name the reason, zero
// statistics, zc env), and with one: tensors copied to and from devices bit for bit, the caching
// allocator's reuse, bounds and out-of-memory error, and modules moved in place. Tests that need
// the other case skip, saying why, so CTest reports them as skipped rather than passed.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tensor/assign.h"
#include "unit/run_model.h"
#include "unit/test_support.h"
#include "zc/cuda.h"
#include "zc/factories.h"
#include "zc/nn.h"
#include "zc/ops.h"
#include "zc/tensor.h"

#ifdef ZC_WITH_CUDA
#include "cuda/allocator.h"
#include "cuda/driver.h"
#include "cuda/memory.h"
#include "cuda/stream.h"
#include "cuda/tensors.h"
#endif

namespace {

using zc::Device;
using zc::DType;
using zc::Shape;
using zc::Storage;
using zc::Tensor;
using zc::test::contains;
using zc::test::error_message;

#define REQUIRE_NO_GPU()                                                             \
  do {                                                                               \
    if (zc::cuda::is_available())                                                    \
      GTEST_SKIP() << "a CUDA device is present; the CudaRuntimeGpu tests cover it"; \
  } while (0)

const std::vector<DType> kAllDTypes{DType::f32, DType::f64, DType::f16,    DType::bf16,
                                    DType::i64, DType::i32, DType::boolean};

const Device kGpu = Device::cuda(0);

bool all_zero(const zc::cuda::MemoryStats& s) {
  return s.allocated_bytes == 0 && s.peak_allocated_bytes == 0 && s.reserved_bytes == 0 &&
         s.peak_reserved_bytes == 0 && s.allocations == 0 && s.cache_hits == 0 &&
         s.device_mallocs == 0 && s.device_frees == 0;
}

// Distinct values of each dtype (random integers, normals, both booleans), made on the CPU.
Tensor sample(const Shape& shape, DType dtype) {
  if (dtype == DType::boolean) return zc::randint(0, 2, shape).to(DType::boolean);
  if (dtype == DType::i64 || dtype == DType::i32) {
    return zc::randint(-1'000'000, 1'000'000, shape).to(dtype);
  }
  return zc::randn(shape).to(dtype);
}

// The bytes of a CPU tensor's elements in row-major order.
std::vector<unsigned char> bytes_of(const Tensor& t) {
  EXPECT_TRUE(t.device().is_cpu());
  const Tensor c = t.contiguous();
  const size_t n = static_cast<size_t>(c.numel()) * zc::dtype_size(c.dtype());
  const auto* p = static_cast<const unsigned char*>(c.raw_data());
  return std::vector<unsigned char>(p, p + n);
}

// The allocator's documented rounding: to 512 bytes up to 1 MiB, to 2 MiB above.
uint64_t rounded(uint64_t nbytes) {
  const uint64_t unit = nbytes <= (uint64_t{1} << 20) ? 512 : uint64_t{2} << 20;
  return (nbytes + unit - 1) / unit * unit;
}

// The same view (shape, strides, offset) of another tensor's storage.
Tensor same_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset) {
  return Tensor::view_of(base.unsafe_impl()->storage, shape, strides, offset, base.dtype());
}

// ---- without a GPU: these run in CI ----

TEST(CudaRuntimeNoGpu, ReportsNoDevice) {
  REQUIRE_NO_GPU();
  EXPECT_FALSE(zc::cuda::is_available());
  EXPECT_EQ(zc::cuda::device_count(), 0);
  EXPECT_FALSE(zc::cuda::unavailable_reason().empty());
  EXPECT_NO_THROW(zc::cuda::synchronize());
  EXPECT_NO_THROW(zc::cuda::empty_cache());
  EXPECT_TRUE(contains(error_message([] { zc::cuda::device_properties(0); }),
                       zc::cuda::unavailable_reason()));
}

TEST(CudaRuntimeNoGpu, TensorToCudaNamesTheReason) {
  REQUIRE_NO_GPU();
  const std::string reason = zc::cuda::unavailable_reason();
  const Tensor x = zc::ones({2, 3});
  for (const Device d : {Device::cuda(0), Device::cuda(1)}) {
    const std::string msg = error_message([&] { x.to(d); });
    EXPECT_TRUE(contains(msg, reason)) << msg;
    EXPECT_TRUE(contains(msg, d.str())) << msg;
  }
  EXPECT_TRUE(contains(error_message([] { Tensor::empty({2}, DType::f32, kGpu); }), reason));
  // Even an empty tensor needs a usable device.
  EXPECT_TRUE(contains(error_message([] { Tensor::empty({0}, DType::f32, kGpu); }), reason));
  EXPECT_TRUE(contains(error_message([&] { x.t().to(kGpu); }), reason));
  EXPECT_TRUE(contains(error_message([] { zc::zeros({2}, DType::f32, kGpu); }), reason));
}

TEST(CudaRuntimeNoGpu, ModuleToCudaRaisesAndStaysOnCpu) {
  REQUIRE_NO_GPU();
  zc::manual_seed(3);
  zc::nn::Linear lin(4, 3);
  const Tensor x = zc::randn({2, 4});
  const Tensor before = lin(x);
  const std::string msg = error_message([&] { lin.to(kGpu); });
  EXPECT_TRUE(contains(msg, zc::cuda::unavailable_reason())) << msg;
  EXPECT_TRUE(contains(msg, "weight")) << msg;
  for (const auto& [name, p] : lin.named_parameters()) EXPECT_TRUE(p.device().is_cpu()) << name;
  EXPECT_TRUE(zc::allclose(lin(x), before, 0, 0));
}

TEST(CudaRuntimeNoGpu, MemoryStatsAreZero) {
  REQUIRE_NO_GPU();
  EXPECT_TRUE(all_zero(zc::cuda::memory_stats()));
  EXPECT_TRUE(all_zero(zc::cuda::memory_stats(0)));
  EXPECT_TRUE(all_zero(zc::cuda::memory_stats(7)));
}

TEST(CudaRuntimeNoGpu, EnvSaysNoGpu) {
  REQUIRE_NO_GPU();
  const zc::test::ProcessRun json = zc::test::zc_cli("", "env --json");
  ASSERT_EQ(json.rc, 0) << json.out;
  EXPECT_TRUE(contains(json.out, "\"gpu\":{\"available\":false,\"count\":0,\"reason\":"))
      << json.out;
  EXPECT_TRUE(contains(json.out, "\"devices\":[]")) << json.out;
  const zc::test::ProcessRun text = zc::test::zc_cli("", "env");
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_TRUE(contains(text.out, "gpus           none: ")) << text.out;
}

#ifdef ZC_WITH_CUDA
TEST(CudaRuntimeNoGpu, DriverReasonIsTheSameEverywhere) {
  REQUIRE_NO_GPU();
  std::string why;
  if (zc::cuda::driver_available(&why)) {
    GTEST_SKIP() << "the driver loads (no device behind it)";
  }
  EXPECT_EQ(error_message([] { zc::cuda::driver(); }), why);
  EXPECT_EQ(zc::cuda::unavailable_reason(), why);
  EXPECT_EQ(zc::cuda::driver_version(), 0);
}
#endif

// ---- with a GPU: skipped without one ----

TEST(CudaRuntimeGpu, DevicesAndProperties) {
  ZC_SKIP_WITHOUT_GPU();
  const int n = zc::cuda::device_count();
  ASSERT_GE(n, 1);
  EXPECT_TRUE(zc::cuda::unavailable_reason().empty());
  EXPECT_GE(zc::cuda::driver_version(), 12000);
  const zc::cuda::DeviceProperties& p = zc::cuda::device_properties(0);
  EXPECT_FALSE(p.name.empty());
  EXPECT_GE(p.major, 5);
  EXPECT_GT(p.multiprocessor_count, 0);
  EXPECT_GT(p.total_memory, uint64_t{1} << 30);
  EXPECT_GT(p.l2_cache_bytes, 0);
  EXPECT_GE(p.max_shared_memory_per_block_optin, 48 * 1024);
  EXPECT_EQ(p.warp_size, 32);
  const std::string bad = error_message([&] { zc::cuda::device_properties(n); });
  EXPECT_TRUE(contains(bad, std::to_string(n) + " CUDA device")) << bad;
  EXPECT_TRUE(contains(error_message([&] { Tensor::empty({2}, DType::f32, Device::cuda(n)); }),
                       std::to_string(n) + " CUDA device"));
  EXPECT_TRUE(
      contains(error_message([] { Tensor::empty({2}, DType::f32, Device::cuda(-1)); }), "cuda:-1"));
  EXPECT_TRUE(contains(error_message([&] { zc::cuda::memory_stats(n); }), "CUDA device"));
}

TEST(CudaRuntimeGpu, RoundTripEveryDTypeBitExact) {
  ZC_SKIP_WITHOUT_GPU();
  zc::manual_seed(11);
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(std::string(zc::dtype_name(dtype)));
    const Tensor x = sample({5, 7}, dtype);
    const Tensor d = x.to(kGpu);
    EXPECT_EQ(d.device(), kGpu);
    EXPECT_EQ(d.dtype(), dtype);
    EXPECT_EQ(d.shape(), x.shape());
    EXPECT_TRUE(d.is_contiguous());
    const Tensor back = d.to(Device::cpu());
    EXPECT_TRUE(back.device().is_cpu());
    EXPECT_EQ(bytes_of(back), bytes_of(x));
    // A 0-dim tensor and an empty one.
    const Tensor s = sample({}, dtype);
    EXPECT_EQ(bytes_of(s.to(kGpu).to(Device::cpu())), bytes_of(s));
    const Tensor e = Tensor::empty({0, 3}, dtype);
    EXPECT_EQ(e.to(kGpu).to(Device::cpu()).shape(), (Shape{0, 3}));
  }
}

// Copies of up to 16 bytes (scalars) are queued as memsets of their bytes rather than waiting
// for the stream (cuda/memory.h): every size below, at and above that bound, in words or in
// single bytes, arrives bit-exact, and the host buffer may change the moment the copy returns,
// while the work queued before it still runs.
TEST(CudaRuntimeGpu, SmallCopiesAreQueuedAndExact) {
  ZC_SKIP_WITHOUT_GPU();
  zc::manual_seed(17);
  const Tensor a = zc::randn({1024, 1024}).to(kGpu);
  for (DType dtype : {DType::boolean, DType::f16, DType::f32, DType::f64}) {
    for (int64_t n = 1; n <= 9; ++n) {
      SCOPED_TRACE(std::string(zc::dtype_name(dtype)) + " x " + std::to_string(n));
      Tensor busy = zc::matmul(a, a);  // queued work the copy must not wait for nor overtake
      Tensor host = sample({n}, dtype).contiguous();
      const std::vector<unsigned char> sent = bytes_of(host);
      const Tensor d = host.to(kGpu);
      std::memset(host.raw_data(), 0x5a, sent.size());  // the copy took its bytes already
      EXPECT_EQ(bytes_of(d.to(Device::cpu())), sent);
      EXPECT_EQ(busy.shape(), (Shape{1024, 1024}));
    }
  }
}

// An upload into memory nothing uses (cuda/memory.h: a compiled graph's constants) goes through
// a stream of its own: it returns with the bytes on the device while the work queued on the
// device's stream still runs (hundreds of milliseconds of products, against microseconds).
TEST(CudaRuntimeGpu, AnUploadToUnusedMemoryDoesNotWaitForQueuedWork) {
  ZC_SKIP_WITHOUT_GPU();
  zc::manual_seed(5);
  const Tensor a = zc::randn({4096, 4096}).to(kGpu);
  std::vector<Tensor> busy;
  for (int i = 0; i < 40; ++i) busy.push_back(zc::matmul(a, a));
  std::vector<uint32_t> host(16384);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint32_t>(i * 2654435761u);
  CUdeviceptr ptr = 0;
  ASSERT_EQ(zc::cuda::driver().cuMemAlloc(&ptr, host.size() * 4), CUDA_SUCCESS);
  zc::cuda::upload_to_unused(ptr, host.data(), host.size() * 4, 0);
  EXPECT_EQ(zc::cuda::driver().cuStreamQuery(zc::cuda::current_stream(0)), CUDA_ERROR_NOT_READY)
      << "the upload waited for the products queued before it";
  std::vector<uint32_t> back(host.size());
  zc::cuda::copy_device_to_host(back.data(), ptr, back.size() * 4, 0);
  EXPECT_EQ(back, host);
  zc::cuda::synchronize(0);
  zc::cuda::driver().cuMemFree(ptr);
}

TEST(CudaRuntimeGpu, NonContiguousCpuSources) {
  ZC_SKIP_WITHOUT_GPU();
  zc::manual_seed(12);
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(std::string(zc::dtype_name(dtype)));
    const Tensor base = sample({6, 5, 4}, dtype);
    const Tensor row = sample({1, 4}, dtype);
    const std::vector<Tensor> views = {
        base.transpose(0, 2),                 // strides reversed
        base.slice(1, 1, 5, 2),               // a step
        base.slice(0, 0, 6, 3).select(2, 1),  // a step and an offset
        row.expand({3, 4}),                   // stride 0
        base.permute({1, 0, 2}).slice(2, 1, 4, 2),
    };
    for (const Tensor& v : views) {
      ASSERT_FALSE(v.is_contiguous());
      const Tensor d = v.to(kGpu);
      EXPECT_EQ(d.shape(), v.shape());
      EXPECT_TRUE(d.is_contiguous());
      EXPECT_EQ(bytes_of(d.to(Device::cpu())), bytes_of(v)) << zc::shape_str(v.shape());
    }
  }
}

TEST(CudaRuntimeGpu, NonContiguousCudaSources) {
  ZC_SKIP_WITHOUT_GPU();
  zc::manual_seed(13);
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(std::string(zc::dtype_name(dtype)));
    const Tensor host = sample({6, 7}, dtype);
    const Tensor dev = host.to(kGpu);
    // View ops on CUDA tensors are ops (not available yet), so the views are built directly.
    struct View {
      Shape shape, strides;
      int64_t offset;
    };
    const std::vector<View> views = {
        {{7, 6}, {1, 7}, 0},         // transposed
        {{3, 7}, {14, 1}, 0},        // every other row
        {{6, 2}, {7, 3}, 1},         // columns 1 and 4: a step and an offset
        {{4, 7}, {0, 1}, 14},        // row 2 expanded
        {{2, 3, 2}, {21, 2, 7}, 9},  // three dims, interleaved
        {{1, 1}, {100, 100}, 40},    // one element; strides of size-1 dims do not matter
    };
    for (const View& v : views) {
      const Tensor dv = same_view(dev, v.shape, v.strides, v.offset);
      const Tensor hv = same_view(host, v.shape, v.strides, v.offset);
      const Tensor back = dv.to(Device::cpu());
      EXPECT_TRUE(back.is_contiguous());
      EXPECT_EQ(bytes_of(back), bytes_of(hv)) << zc::shape_str(v.shape) << zc::shape_str(v.strides);
    }
  }
}

TEST(CudaRuntimeGpu, SameDeviceAndAcrossDevices) {
  ZC_SKIP_WITHOUT_GPU();
  const Tensor x = zc::arange(0.0, 24.0).reshape({4, 6});
  const Tensor d = x.to(kGpu);
  EXPECT_EQ(d.to(kGpu).unsafe_impl(), d.unsafe_impl());  // already there: no copy
  if (zc::cuda::device_count() < 2) GTEST_SKIP() << "a copy across devices needs two GPUs";
  const Tensor d1 = d.to(Device::cuda(1));
  EXPECT_EQ(d1.device(), Device::cuda(1));
  EXPECT_EQ(bytes_of(d1.to(Device::cpu())), bytes_of(x));
  const Tensor strided = same_view(d, {6, 4}, {1, 6}, 0).to(Device::cuda(1));
  EXPECT_EQ(bytes_of(strided.to(Device::cpu())), bytes_of(x.t()));
  EXPECT_EQ(bytes_of(d1.to(kGpu).to(Device::cpu())), bytes_of(x));
}

TEST(CudaRuntimeGpu, ItemStrAndHostAccess) {
  ZC_SKIP_WITHOUT_GPU();
  const Tensor d = zc::from_vector({1.5f, -2.0f, 3.25f}, {3}).to(kGpu);
  EXPECT_EQ(same_view(d, {}, {}, 1).item<float>(), -2.0f);
  EXPECT_EQ(zc::scalar_tensor(2.5, DType::f64).to(kGpu).item<double>(), 2.5);
  EXPECT_EQ(zc::full({1}, 7, DType::i64).to(kGpu).item<int64_t>(), 7);
  EXPECT_TRUE(contains(error_message([&] { d.item<float>(); }), "3 elements"));
  const std::string s = d.str();
  EXPECT_TRUE(contains(s, "device=cuda:0")) << s;
  EXPECT_TRUE(contains(s, "values=[1.5, -2, 3.25]")) << s;
  std::ostringstream os;
  os << same_view(d, {2}, {2}, 0);
  EXPECT_TRUE(contains(os.str(), "values=[1.5, 3.25]")) << os.str();
  // The CPU cannot address device memory: a clear error, not a crash.
  EXPECT_TRUE(contains(error_message([&] { d.data<float>(); }), ".to(Device::cpu())"));
  EXPECT_TRUE(contains(error_message([&] { d.raw_data(); }), "cuda:0"));
  // Ops on CUDA tensors run there and stay there.
  Tensor twice = zc::add(d, d);
  EXPECT_EQ(twice.device(), d.device());
  EXPECT_TRUE(zc::allclose(twice.to(Device::cpu()),
                           zc::add(d.to(Device::cpu()), d.to(Device::cpu())), 0, 0));
}

TEST(CudaRuntimeGpu, AllocatorReusesAFreedBlock) {
  ZC_SKIP_WITHOUT_GPU();
  zc::cuda::empty_cache();
  const zc::cuda::MemoryStats start = zc::cuda::memory_stats();
  { const Tensor a = Tensor::empty({1000}, DType::f32, kGpu); }
  const zc::cuda::MemoryStats first = zc::cuda::memory_stats();
  EXPECT_EQ(first.allocations, start.allocations + 1);
  EXPECT_EQ(first.device_mallocs, start.device_mallocs + 1);
  EXPECT_EQ(first.allocated_bytes, start.allocated_bytes);
  EXPECT_EQ(first.reserved_bytes, start.reserved_bytes + 4096);  // 4000 bytes, rounded to 512
  EXPECT_GE(first.peak_allocated_bytes, start.allocated_bytes + 4096);
  { const Tensor b = Tensor::empty({1000}, DType::f32, kGpu); }
  const zc::cuda::MemoryStats second = zc::cuda::memory_stats();
  EXPECT_EQ(second.allocations, first.allocations + 1);
  EXPECT_EQ(second.cache_hits, first.cache_hits + 1);
  EXPECT_EQ(second.device_mallocs, first.device_mallocs);
  EXPECT_EQ(second.reserved_bytes, first.reserved_bytes);
  // A large request takes a cached block up to twice its size, not more.
  { const Tensor c = Tensor::empty({int64_t{3} << 20}, DType::boolean, kGpu); }  // 4 MiB block
  const zc::cuda::MemoryStats third = zc::cuda::memory_stats();
  { const Tensor c = Tensor::empty({int64_t{2} << 20}, DType::boolean, kGpu); }  // fits in 4 MiB
  EXPECT_EQ(zc::cuda::memory_stats().device_mallocs, third.device_mallocs);
  { const Tensor c = Tensor::empty({int64_t{1} << 20}, DType::boolean, kGpu); }  // a small one
  EXPECT_EQ(zc::cuda::memory_stats().device_mallocs, third.device_mallocs + 1);
}

// Storage::allocate_together: one cuMemAlloc, blocks end to end (512-byte aligned), each freed
// on its own; a block freed while the others live serves a single request; once all are free the
// group is handed out whole again, at the same addresses, to the same layout.
TEST(CudaRuntimeGpu, BlocksAllocatedTogetherAreAdjacentAndReusedWhole) {
  ZC_SKIP_WITHOUT_GPU();
  zc::cuda::empty_cache();
  const std::vector<size_t> sizes{4000, 1, 0, 3 << 20, 700};
  auto addresses = [](const std::vector<std::shared_ptr<Storage>>& blocks) {
    std::vector<uintptr_t> out;
    for (const auto& b : blocks) out.push_back(reinterpret_cast<uintptr_t>(b->data()));
    return out;
  };
  const zc::cuda::MemoryStats start = zc::cuda::memory_stats();
  std::vector<std::shared_ptr<Storage>> blocks = Storage::allocate_together(sizes, kGpu);
  ASSERT_EQ(blocks.size(), sizes.size());
  EXPECT_EQ(zc::cuda::memory_stats().device_mallocs, start.device_mallocs + 1);
  const std::vector<uintptr_t> first = addresses(blocks);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(first[i] % 512, 0u) << "block " << i;
    EXPECT_EQ(blocks[i]->nbytes(), sizes[i]);
    EXPECT_NE(blocks[i]->group(), 0);
    EXPECT_EQ(blocks[i]->group(), blocks[0]->group());
    if (i > 0) {
      EXPECT_EQ(first[i] - first[i - 1], (std::max<size_t>(sizes[i - 1], 1) + 511) / 512 * 512)
          << "block " << i << " does not follow block " << i - 1;
    }
  }
  // Values written through one block stay there while the others are freed and reused.
  Tensor kept = Tensor::view_of(blocks[3], {int64_t{3} << 20}, {1}, 0, DType::boolean);
  zc::assign_values(kept, zc::ones({int64_t{3} << 20}, DType::boolean).to(kGpu));
  // A freed block of a live group serves a single request of its size...
  const uintptr_t freed = first[0];
  blocks[0].reset();
  {
    const Tensor single = Tensor::empty({1000}, DType::f32, kGpu);  // 4000 bytes
    EXPECT_EQ(reinterpret_cast<uintptr_t>(single.unsafe_impl()->storage->data()), freed);
    EXPECT_EQ(single.unsafe_impl()->storage->group(), 0);
  }
  EXPECT_EQ(zc::sum(kept.to(Device::cpu()).to(DType::i64)).item<int64_t>(), int64_t{3} << 20);
  kept = Tensor();
  // ...and once every block is free, the same layout gets the same addresses, without a malloc.
  blocks.clear();
  const zc::cuda::MemoryStats before = zc::cuda::memory_stats();
  blocks = Storage::allocate_together(sizes, kGpu);
  EXPECT_EQ(addresses(blocks), first);
  EXPECT_EQ(zc::cuda::memory_stats().device_mallocs, before.device_mallocs);
  // Another layout gets another allocation; empty_cache returns whole free groups only.
  std::vector<std::shared_ptr<Storage>> other =
      Storage::allocate_together(std::vector<size_t>{4000, 4000}, kGpu);
  EXPECT_EQ(zc::cuda::memory_stats().device_mallocs, before.device_mallocs + 1);
  EXPECT_NE(other[0]->group(), blocks[0]->group());
  other.clear();
  zc::cuda::empty_cache();
  EXPECT_EQ(addresses(blocks), first);  // still live, still there
  const zc::cuda::MemoryStats live = zc::cuda::memory_stats();
  blocks.clear();
  zc::cuda::empty_cache();
  EXPECT_LT(zc::cuda::memory_stats().reserved_bytes, live.reserved_bytes);
  EXPECT_EQ(zc::cuda::memory_stats().allocated_bytes, start.allocated_bytes);
}

// zeros on the device are made there (a memset), also in a reused block that held other values.
TEST(CudaRuntimeGpu, ZerosMadeOnTheDevice) {
  ZC_SKIP_WITHOUT_GPU();
  zc::cuda::empty_cache();
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::i64, DType::boolean}) {
    SCOPED_TRACE(std::string(zc::dtype_name(t)));
    { const Tensor dirty = zc::ones({1000}, t).to(kGpu); }
    const zc::cuda::MemoryStats before = zc::cuda::memory_stats();
    const Tensor z = zc::zeros({10, 100}, t, kGpu);
    EXPECT_EQ(zc::cuda::memory_stats().cache_hits, before.cache_hits + 1) << "not a reused block";
    EXPECT_EQ(z.device(), kGpu);
    EXPECT_EQ(z.shape(), (Shape{10, 100}));
    EXPECT_EQ(zc::dtype_name(z.dtype()), zc::dtype_name(t));
    EXPECT_TRUE(
        zc::allclose(z.to(Device::cpu()).to(DType::f64), zc::zeros({10, 100}, DType::f64), 0, 0));
  }
  EXPECT_EQ(zc::zeros({0, 4}, DType::f32, kGpu).numel(), 0);
}

TEST(CudaRuntimeGpu, ManyCyclesStayBounded) {
  ZC_SKIP_WITHOUT_GPU();
  zc::cuda::empty_cache();
  const zc::cuda::MemoryStats start = zc::cuda::memory_stats();
  const std::vector<int64_t> sizes = {1,       100,     511,           512,     513,          4096,
                                      100'000, 1 << 20, (1 << 20) + 1, 3 << 20, (5 << 20) + 7};
  constexpr size_t kMaxLive = 8;
  uint64_t size_classes = 0;
  for (int64_t s : sizes) size_classes += rounded(static_cast<uint64_t>(s));
  std::mt19937 rng(7);
  std::vector<Tensor> live;
  for (int i = 0; i < 10'000; ++i) {
    if (live.empty() || (live.size() < kMaxLive && rng() % 2 == 0)) {
      live.push_back(Tensor::empty({sizes[rng() % sizes.size()]}, DType::boolean, kGpu));
    } else {
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(rng() % live.size()));
    }
  }
  live.clear();
  const zc::cuda::MemoryStats end = zc::cuda::memory_stats();
  EXPECT_EQ(end.allocated_bytes, start.allocated_bytes);
  // A block of a size is made only when every block of that size is in use, and at most
  // kMaxLive are, so each size has at most kMaxLive blocks.
  EXPECT_LE(end.reserved_bytes - start.reserved_bytes, kMaxLive * size_classes);
  EXPECT_LE(end.device_mallocs - start.device_mallocs, kMaxLive * sizes.size());
  // Every request the driver did not serve was a cache hit.
  EXPECT_EQ(end.cache_hits - start.cache_hits,
            (end.allocations - start.allocations) - (end.device_mallocs - start.device_mallocs));
  EXPECT_GT(end.allocations - start.allocations, 4'000u);
  EXPECT_GT(end.reserved_bytes, end.allocated_bytes);  // the cache kept blocks

  zc::cuda::empty_cache();
  const zc::cuda::MemoryStats emptied = zc::cuda::memory_stats();
  EXPECT_EQ(emptied.reserved_bytes, emptied.allocated_bytes);
  if (start.allocated_bytes == 0) {
    EXPECT_EQ(emptied.reserved_bytes, 0u);
  }
  EXPECT_EQ(emptied.device_frees - end.device_frees, end.device_mallocs - start.device_mallocs);
}

// Each new thread has no current context until zc makes one current; the allocator is shared.
TEST(CudaRuntimeGpu, ThreadsCopyAndAllocateConcurrently) {
  ZC_SKIP_WITHOUT_GPU();
  const uint64_t allocated = zc::cuda::memory_stats().allocated_bytes;
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &mismatches] {
      for (int i = 0; i < 200; ++i) {
        const Tensor x = zc::full({16 + t * 100 + i}, t * 1000 + i, DType::i32);
        if (bytes_of(x.to(kGpu).to(Device::cpu())) != bytes_of(x)) mismatches += 1;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(zc::cuda::memory_stats().allocated_bytes, allocated);
}

TEST(CudaRuntimeGpu, ImpossibleAllocationRaisesAndRecovers) {
  ZC_SKIP_WITHOUT_GPU();
  const int64_t pebibyte = int64_t{1} << 50;
  { const Tensor warm = Tensor::empty({1 << 16}, DType::f32, kGpu); }  // something cached
  const std::string msg = error_message([&] { Tensor::empty({pebibyte}, DType::boolean, kGpu); });
  EXPECT_TRUE(contains(msg, std::to_string(pebibyte))) << msg;
  EXPECT_TRUE(contains(msg, "1.0 PiB")) << msg;
  EXPECT_TRUE(contains(msg, " free of ")) << msg;
  EXPECT_TRUE(contains(msg, " total")) << msg;
  EXPECT_TRUE(contains(msg, "cuda:0")) << msg;
  // The cache was returned to the driver before giving up.
  const zc::cuda::MemoryStats s = zc::cuda::memory_stats();
  EXPECT_EQ(s.reserved_bytes, s.allocated_bytes);
  // Sizes whose rounding would overflow are refused the same way.
  EXPECT_TRUE(
      contains(error_message([] { Tensor::empty({int64_t{1} << 62}, DType::boolean, kGpu); }),
               "cannot allocate"));
  const Tensor x = zc::randn({64, 64});
  EXPECT_EQ(bytes_of(x.to(kGpu).to(Device::cpu())), bytes_of(x));
}

TEST(CudaRuntimeGpu, ModuleToCudaAndBackInPlace) {
  ZC_SKIP_WITHOUT_GPU();
  zc::manual_seed(5);
  zc::nn::Linear lin(8, 3);
  const Tensor weight = lin.weight;  // a handle sharing the registered TensorImpl
  const Tensor before_w = lin.weight.clone(), before_b = lin.bias.clone();
  lin.to(kGpu);
  EXPECT_EQ(weight.device(), kGpu);
  EXPECT_EQ(lin.weight.unsafe_impl(), weight.unsafe_impl());
  for (const auto& [name, p] : lin.named_parameters()) EXPECT_EQ(p.device(), kGpu) << name;
  EXPECT_EQ(lin.named_parameters()[0].second.unsafe_impl(), weight.unsafe_impl());
  lin.to(Device::cpu());
  EXPECT_TRUE(weight.device().is_cpu());
  EXPECT_EQ(lin.weight.unsafe_impl(), weight.unsafe_impl());
  EXPECT_EQ(bytes_of(lin.weight), bytes_of(before_w));
  EXPECT_EQ(bytes_of(lin.bias), bytes_of(before_b));
  const Tensor x = zc::randn({2, 8});
  EXPECT_EQ(lin(x).shape(), (Shape{2, 3}));
}

TEST(CudaRuntimeGpu, TensorsFreedDuringExit) {
  ZC_SKIP_WITHOUT_GPU();
  const zc::test::ProcessRun r = zc::test::run_shell(std::string(ZC_TEST_TOOLS_DIR) + "/cuda_exit");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, "ok\n");
}

TEST(CudaRuntimeGpu, EnvListsTheGpus) {
  ZC_SKIP_WITHOUT_GPU();
  const zc::test::ProcessRun json = zc::test::zc_cli("", "env --json");
  ASSERT_EQ(json.rc, 0) << json.out;
  EXPECT_TRUE(contains(json.out, "\"gpu\":{\"available\":true,\"count\":" +
                                     std::to_string(zc::cuda::device_count())))
      << json.out;
  EXPECT_TRUE(contains(json.out, zc::cuda::device_properties(0).name)) << json.out;
  const zc::test::ProcessRun text = zc::test::zc_cli("", "env");
  EXPECT_TRUE(contains(text.out, "gpu 0          cuda:0 ")) << text.out;
}

#ifdef ZC_WITH_CUDA
// The internal runtime that kernels will use: device addresses, copies and fills on the
// current stream, and stream guards.
TEST(CudaRuntimeGpu, InternalMemoryAndStreams) {
  ZC_SKIP_WITHOUT_GPU();
  namespace cu = zc::cuda;
  const Tensor x = zc::arange(0.0, 16.0);
  const Tensor a = x.to(kGpu);
  const Tensor b = Tensor::empty({16}, DType::f32, kGpu);
  EXPECT_EQ(cu::device_address(same_view(a, {4}, {1}, 3)), cu::device_address(a) + 3 * 4);
  EXPECT_TRUE(contains(error_message([&] { cu::device_address(x); }), "cpu"));

  cu::copy_device_to_device(cu::device_address(b), cu::device_address(a), 64, 0);
  EXPECT_EQ(bytes_of(b.to(Device::cpu())), bytes_of(x));
  cu::fill_words(cu::device_address(b), 0x3f800000u, 16, 0);  // 1.0f
  EXPECT_EQ(bytes_of(b.to(Device::cpu())), bytes_of(zc::ones({16})));
  cu::fill_bytes(cu::device_address(b), 0, 64, 0);
  EXPECT_EQ(bytes_of(b.to(Device::cpu())), bytes_of(zc::zeros({16})));

  const CUstream main = cu::current_stream(0);
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(cu::current_stream(0), main);
  CUstream other = nullptr;
  cu::check(cu::driver().cuStreamCreate(&other, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  {
    cu::StreamGuard guard(0, other);
    EXPECT_EQ(cu::current_stream(0), other);
    const Tensor c = x.to(kGpu);  // allocated for, and copied on, `other`
    EXPECT_EQ(bytes_of(c.to(Device::cpu())), bytes_of(x));
    {
      cu::StreamGuard legacy(0, nullptr);  // the legacy default stream is a stream too
      EXPECT_EQ(cu::current_stream(0), nullptr);
    }
    EXPECT_EQ(cu::current_stream(0), other);
  }
  EXPECT_EQ(cu::current_stream(0), main);

  // Blocks are cached per stream: one freed on `other` serves `other` again, not `main`.
  EXPECT_EQ(cu::rounded_size(1), 512u);
  EXPECT_EQ(cu::rounded_size(size_t{1} << 20), size_t{1} << 20);
  EXPECT_EQ(cu::rounded_size((size_t{1} << 20) + 1), size_t{2} << 20);
  cu::empty_cache(0);
  const CUdeviceptr p = cu::allocate(1000, 0, other);
  cu::release(p);
  const uint64_t mallocs = zc::cuda::memory_stats().device_mallocs;
  const CUdeviceptr q = cu::allocate(1000, 0, main);
  EXPECT_NE(q, p);
  EXPECT_EQ(zc::cuda::memory_stats().device_mallocs, mallocs + 1);
  const CUdeviceptr r = cu::allocate(1000, 0, other);
  EXPECT_EQ(r, p);
  cu::release(q);
  cu::release(r);
  cu::release(0);  // ignored
  cu::synchronize(0);
  cu::check(cu::driver().cuStreamDestroy(other), "cuStreamDestroy");
  EXPECT_NO_THROW(zc::cuda::synchronize());
}
#endif

}  // namespace
