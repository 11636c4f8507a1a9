#include "ops/meta_bytes.h"

#include <string>

#include "zc/error.h"

namespace zc::ops {

namespace {

constexpr uint64_t kMaxRank = 64;
constexpr uint32_t kMaxDeviceIndex = 64;
constexpr int64_t kMaxSize = int64_t{1} << 48;

}  // namespace

void write_meta(ByteWriter& w, const TensorMeta& m, bool sizes) {
  w.u8(static_cast<uint8_t>(m.dtype));
  w.u8(static_cast<uint8_t>(m.device.type));
  w.u32(static_cast<uint32_t>(m.device.index));
  w.u8(m.wrapped_number ? 1 : 0);
  if (sizes) {
    w.i64s(m.shape);
  } else {
    w.u64(m.shape.size());
  }
}

TensorMeta read_meta(ByteReader& r, std::string_view what) {
  auto malformed = [&](const std::string& field) { throw Error(std::string(what) + ": " + field); };
  TensorMeta m;
  const uint8_t dtype = r.u8();
  if (dtype >= kNumDTypes) malformed("dtype " + std::to_string(dtype) + " is not a zc dtype");
  m.dtype = static_cast<DType>(dtype);
  const uint8_t type = r.u8();
  if (type > static_cast<uint8_t>(Device::Type::cuda)) {
    malformed("device type " + std::to_string(type) + " is neither cpu (0) nor cuda (1)");
  }
  const uint32_t index = r.u32();
  if (index >= kMaxDeviceIndex || (type == 0 && index != 0)) {
    malformed("device index " + std::to_string(index) + " is not one of its device type");
  }
  m.device = Device{static_cast<Device::Type>(type), static_cast<int>(index)};
  const uint8_t wrapped = r.u8();
  if (wrapped > 1) malformed("wrapped-number flag " + std::to_string(wrapped) + " is not 0 or 1");
  m.wrapped_number = wrapped == 1;
  const uint64_t rank = r.u64();
  if (rank > kMaxRank) {
    malformed("rank " + std::to_string(rank) + " above " + std::to_string(kMaxRank));
  }
  for (uint64_t d = 0; d < rank; ++d) {
    const int64_t size = r.i64();
    if (size < 0 || size > kMaxSize)
      malformed("size " + std::to_string(size) + " is outside 0..2^48");
    m.shape.push_back(size);
  }
  return m;
}

}  // namespace zc::ops
