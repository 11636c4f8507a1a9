// Bundle export and import: importing a bundle is part of a warm start's "import plus first
// call under 20 ms", so reading 100 typical entries must cost a small share of that.
// Payloads are 10 KB in 32-byte chunks, 40% noise and the rest drawn from a few patterns: they
// compress about 2.3x, like the object code and launch plans real entries hold.
//
// Figures: see the report that came with this benchmark; rerun with
//   cache_bundle --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "cache/bundle.h"
#include "zc/version.h"

namespace {

using namespace zc::cache;

const std::string kKey = "bench HMAC key shared by writers and readers";

std::span<const uint8_t> key_bytes(bool sign) {
  if (!sign) return {};
  return {reinterpret_cast<const uint8_t*>(kKey.data()), kKey.size()};
}

Provenance here() {
  return {zc::build_id(), "x86-64-v3", "g++ 13.3 /usr/bin/c++"};
}

std::vector<BundleItem> make_items(int n, size_t payload_size) {
  std::vector<BundleItem> items;
  std::mt19937 rng(42);
  for (int i = 0; i < n; ++i) {
    Entry e;
    e.level = kLevels[i % 4];
    e.key = zc::sha256("bench " + std::to_string(i));
    e.compile_ms = 40;
    e.created_unix = 1'700'000'000;
    e.payload.resize(payload_size);
    for (size_t chunk = 0; chunk < payload_size; chunk += 32) {
      const bool noise = rng() % 5 < 2;
      const uint32_t pattern = rng() % 16;
      for (size_t j = chunk; j < std::min(chunk + 32, payload_size); ++j) {
        e.payload[j] =
            noise ? static_cast<uint8_t>(rng()) : static_cast<uint8_t>(pattern * 31 + j % 32);
      }
    }
    items.push_back({std::move(e), here()});
  }
  return items;
}

void set_counters(benchmark::State& state, size_t bundle_bytes, size_t entries) {
  state.counters["bundle_KB"] = static_cast<double>(bundle_bytes) / 1024.0;
  state.counters["entries"] = static_cast<double>(entries);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(entries * 10 * 1000));
}

void BM_WriteBundle(benchmark::State& state) {
  const bool sign = state.range(0) != 0;
  const auto items = make_items(100, 10 * 1000);
  size_t size = 0;
  for (auto _ : state) {
    auto bytes = write_bundle(items, key_bytes(sign));
    size = bytes.size();
    benchmark::DoNotOptimize(bytes.data());
  }
  set_counters(state, size, items.size());
  state.SetLabel(sign ? "signed" : "unsigned");
}

void BM_ReadBundle(benchmark::State& state) {
  const bool sign = state.range(0) != 0;
  const auto items = make_items(100, 10 * 1000);
  const auto bytes = write_bundle(items, key_bytes(sign));
  for (auto _ : state) {
    BundleContents c = read_bundle(bytes, here(), key_bytes(sign));
    if (c.items.size() != items.size() || c.items.back().status != ItemStatus::ok) {
      state.SkipWithError("bundle did not read back");
      break;
    }
    benchmark::DoNotOptimize(c.items.data());
  }
  set_counters(state, bytes.size(), items.size());
  state.SetLabel(sign ? "signed" : "unsigned");
}

BENCHMARK(BM_WriteBundle)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadBundle)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
