// What a compiled function keeps for the next process (runtime/records/call_record.h): the record's
// bytes round-trip and anything else is refused with the reason; a call goes first and the record
// stays bounded; and a function of the same name and context prepares the recorded calls on a
// background thread, so its first such call traces nothing itself.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache.h"
#include "runtime/call/compiled_function.h"
#include "runtime/records/call_record.h"
#include "test_support.h"
#include "zc/error.h"
#include "zc/factories.h"
#include "zc/ops.h"

namespace zc {
namespace {

using runtime::CallMetas;

CallMetas call(int64_t n) {
  return {ops::TensorMeta{{n}, DType::f32, Device::cpu(), false},
          ops::TensorMeta{{}, DType::f64, Device::cpu(), true}};
}

std::string refusal(const std::vector<uint8_t>& bytes) {
  return test::error_message([&] { (void)runtime::decode_call_record(bytes); });
}

TEST(CallRecord, RoundTripsEveryField) {
  CallMetas a = call(5);
  a.push_back(ops::TensorMeta{{2, 0, 7}, DType::bf16, Device::cuda(3), false});
  const std::vector<CallMetas> in{a, call(1), {}};
  EXPECT_EQ(runtime::decode_call_record(runtime::encode_call_record(in)), in);
  EXPECT_TRUE(runtime::decode_call_record(runtime::encode_call_record({})).empty());
}

TEST(CallRecord, RefusesWhatIsNotARecordWithTheReason) {
  const std::vector<CallMetas> one{call(5)};
  std::vector<uint8_t> bytes = runtime::encode_call_record(one);
  // Layout: version u32, calls u64, inputs u64, then the first meta (ops/meta_bytes.h): dtype
  // u8, device type u8, device index u32, wrapped flag u8, rank u64, sizes i64...
  const size_t dtype = 4 + 8 + 8, rank = dtype + 1 + 1 + 4 + 1;
  auto with = [&](size_t at, uint8_t v) {
    std::vector<uint8_t> b = bytes;
    b[at] = v;
    return b;
  };
  EXPECT_NE(refusal(with(0, 9)).find("version 9"), std::string::npos);
  EXPECT_NE(refusal(with(4, 5)).find("5 calls, at most 4"), std::string::npos);
  EXPECT_NE(refusal(with(rank, 65)).find("rank 65"), std::string::npos);
  EXPECT_NE(refusal(with(rank + 15, 0x80)).find("outside 0..2^48"), std::string::npos);
  EXPECT_NE(refusal(with(dtype, kNumDTypes)).find("dtype " + std::to_string(kNumDTypes)),
            std::string::npos);
  EXPECT_NE(refusal(with(dtype + 1, 2)).find("device type 2"), std::string::npos);
  EXPECT_NE(refusal(with(dtype + 2, 1)).find("device index 1"), std::string::npos);
  EXPECT_NE(refusal(with(dtype + 6, 2)).find("wrapped-number flag 2"), std::string::npos);
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_NE(refusal(longer).find("1 bytes after the last call"), std::string::npos);
  bytes.pop_back();
  EXPECT_NE(refusal(bytes).find("truncated"), std::string::npos);
}

TEST(CallRecord, TheNewestCallGoesFirstAndTheRecordStaysBounded) {
  std::vector<CallMetas> r = runtime::note_call({}, call(1));
  r = runtime::note_call(r, call(2));
  r = runtime::note_call(r, call(1));
  EXPECT_EQ(r, (std::vector<CallMetas>{call(1), call(2)}));
  for (int64_t n = 3; n < 10; ++n) r = runtime::note_call(r, call(n));
  EXPECT_EQ(r.size(), runtime::kMaxRecordedCalls);
  EXPECT_EQ(r.front(), call(9));
  EXPECT_EQ(r.back(), call(6));
}

// A function that notes on which thread each of its traces ran, by input length.
struct Traced {
  std::mutex mu;
  std::vector<std::pair<int64_t, std::thread::id>> traces;
  runtime::CompiledFunction::Fn fn() {
    return [this](std::span<const Tensor> in) {
      std::lock_guard lock(mu);
      traces.emplace_back(in[0].shape()[0], std::this_thread::get_id());
      return std::vector<Tensor>{in[0] * in[1] + 1.0};
    };
  }
  std::thread::id thread_of(int64_t n) {
    std::lock_guard lock(mu);
    for (const auto& [length, id] : traces) {
      if (length == n) return id;
    }
    return {};
  }
};

TEST(CompiledFunctionRecord, TheNextFunctionOfTheNamePreparesTheRecordedCallsAhead) {
  // A name of this run alone: the record lives in the process's cache, which may persist.
  const std::string name =
      "test.call_record " +
      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  auto inputs = [](int64_t n) {
    return std::vector<Tensor>{arange(n, DType::f32), scalar_tensor(2.0, DType::f64)};
  };
  {
    Traced first;
    runtime::CompiledFunction f(first.fn(), name);
    f.prepare("context");
    EXPECT_TRUE(allclose(f(inputs(5))[0], arange(5, DType::f32) * 2.0 + 1.0));
    EXPECT_EQ(first.thread_of(5), std::this_thread::get_id());  // nothing recorded yet
  }
  auto record = [&](const std::string& context) {
    std::optional<cache::Entry> e =
        cache::process_cache().get(runtime::call_record_key(name, context));
    return e ? runtime::decode_call_record(e->payload) : std::vector<CallMetas>{};
  };
  const CallMetas five = runtime::call_metas(inputs(5));
  const CallMetas seven = runtime::call_metas(inputs(7));
  EXPECT_EQ(record("context"), (std::vector<CallMetas>{five}));

  Traced second;
  runtime::CompiledFunction g(second.fn(), name);
  g.prepare("context");
  EXPECT_TRUE(allclose(g(inputs(5))[0], arange(5, DType::f32) * 2.0 + 1.0));
  EXPECT_NE(second.thread_of(5), std::thread::id{});
  EXPECT_NE(second.thread_of(5), std::this_thread::get_id());  // prepared on its own thread
  EXPECT_TRUE(allclose(g(inputs(7))[0], arange(7, DType::f32) * 2.0 + 1.0));
  EXPECT_EQ(second.thread_of(7), std::this_thread::get_id());
  EXPECT_EQ(record("context"), (std::vector<CallMetas>{seven, five}));

  // Another context, or no name: nothing is prepared.
  Traced third;
  runtime::CompiledFunction h(third.fn(), name);
  h.prepare("another context");
  (void)h(inputs(5));
  EXPECT_EQ(third.thread_of(5), std::this_thread::get_id());
  Traced fourth;
  runtime::CompiledFunction unnamed(fourth.fn());
  unnamed.prepare("context");
  (void)unnamed(inputs(5));
  EXPECT_EQ(fourth.thread_of(5), std::this_thread::get_id());
}

}  // namespace
}  // namespace zc
