// Little-endian byte encoding for canonical forms and serialized artifacts. The encoding is
// fixed-width and explicit so the same value gives the same bytes on every machine.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zc/error.h"

namespace zc {

class ByteWriter {
 public:
  void u8(uint8_t v) { buf_.push_back(v); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void str(std::string_view s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void i64s(std::span<const int64_t> v) {
    u64(v.size());
    for (int64_t x : v) i64(x);
  }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  const std::vector<uint8_t>& bytes() const { return buf_; }
  std::vector<uint8_t> take() { return std::move(buf_); }

 private:
  static_assert(std::endian::native == std::endian::little, "zc assumes a little-endian host");
  std::vector<uint8_t> buf_;
};

// Reads what ByteWriter wrote; any read past the end raises zc::Error naming `what`, so a
// truncated or corrupted artifact is an error, never an out-of-bounds read.
class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> bytes, std::string what)
      : b_(bytes), what_(std::move(what)) {}
  uint8_t u8() { return get<uint8_t>(); }
  uint32_t u32() { return get<uint32_t>(); }
  uint64_t u64() { return get<uint64_t>(); }
  int64_t i64() { return get<int64_t>(); }
  double f64() { return get<double>(); }
  std::string str() {
    uint64_t n = u64();
    need(n);
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  std::vector<int64_t> i64s() {
    uint64_t n = u64();
    need(n * 8);
    std::vector<int64_t> v(n);
    for (auto& x : v) x = i64();
    return v;
  }
  std::span<const uint8_t> raw(size_t n) {
    need(n);
    auto s = b_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  size_t remaining() const { return b_.size() - pos_; }
  size_t position() const { return pos_; }

 private:
  template <class T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  void need(uint64_t n) {
    if (n > remaining()) {
      throw Error(what_ + ": truncated data (needed " + std::to_string(n) + " bytes at offset " +
                  std::to_string(pos_) + ", " + std::to_string(remaining()) + " left)");
    }
  }
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
  std::string what_;
};

}  // namespace zc
