#include "codegen/backends/cuda/programs.h"

#include <algorithm>
#include <cstring>

#include "util/bytes.h"
#include "zc/error.h"

namespace zc::codegen::cuda {

namespace {

// A container's first bytes; an ELF file (a cubin) starts with 0x7f 'E' 'L' 'F'.
constexpr char kMagic[8] = {'Z', 'C', 'C', 'U', 'B', 'I', 'N', 'S'};

size_t padding_to_8(size_t n) {
  return (8 - n % 8) % 8;
}

}  // namespace

std::vector<std::string> split_programs(std::string_view source) {
  // Where each kernel starts: a line that begins with the marker.
  std::vector<size_t> starts;
  const std::string at_line = "\n" + std::string(kKernelMarker);
  for (size_t p = source.find(at_line); p != std::string_view::npos;
       p = source.find(at_line, p + 1)) {
    starts.push_back(p + 1);
  }
  if (starts.size() < 2) return {std::string(source)};
  const size_t kernel_bytes = source.size() - starts[0];
  if (kernel_bytes < 2 * kProgramBytes) return {std::string(source)};
  const size_t programs =
      std::min({kMaxPrograms, starts.size(), (kernel_bytes + kProgramBytes - 1) / kProgramBytes});
  const std::string_view head = source.substr(0, starts[0]);
  starts.push_back(source.size());
  // Kernels in source order, a program closed once it holds its share of the bytes (measured
  // from the first kernel, so that one large kernel does not leave the rest to one program).
  std::vector<std::string> out;
  size_t begin = 0;  // index into starts of the program's first kernel
  for (size_t k = 0; k + 1 < starts.size(); ++k) {
    const size_t done = starts[k + 1] - starts[0];
    const bool last_kernel = k + 2 == starts.size();
    const bool full = done * programs >= kernel_bytes * (out.size() + 1);
    if (last_kernel || (full && out.size() + 1 < programs)) {
      std::string program(head);
      program += source.substr(starts[begin], starts[k + 1] - starts[begin]);
      out.push_back(std::move(program));
      begin = k + 1;
    }
  }
  return out;
}

std::vector<uint8_t> pack_cubins(const std::vector<std::vector<uint8_t>>& cubins) {
  if (cubins.size() == 1) return cubins[0];
  ByteWriter w;
  w.raw(kMagic, sizeof(kMagic));
  w.u64(cubins.size());
  for (const std::vector<uint8_t>& c : cubins) {
    w.u64(c.size());
    w.raw(c.data(), c.size());
    const uint64_t zero = 0;
    w.raw(&zero, padding_to_8(c.size()));  // each cubin starts 8-aligned in the container
  }
  return w.take();
}

std::vector<std::vector<uint8_t>> unpack_cubins(std::span<const uint8_t> binary) {
  if (binary.empty()) return {};
  if (binary.size() < sizeof(kMagic) || std::memcmp(binary.data(), kMagic, sizeof(kMagic)) != 0) {
    return {std::vector<uint8_t>(binary.begin(), binary.end())};
  }
  ByteReader r(binary, "a compiled graph's cubins");
  r.raw(sizeof(kMagic));
  const uint64_t n = r.u64();
  if (n < 2 || n > kMaxPrograms) {
    throw Error("a compiled graph's cubins: the container says " + std::to_string(n) +
                " cubins, expected 2 to " + std::to_string(kMaxPrograms) + " (a garbled binary)");
  }
  std::vector<std::vector<uint8_t>> out;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t size = r.u64();
    std::span<const uint8_t> c = r.raw(size);
    out.emplace_back(c.begin(), c.end());
    r.raw(padding_to_8(size));
  }
  if (r.remaining() != 0) {
    throw Error("a compiled graph's cubins: " + std::to_string(r.remaining()) +
                " bytes after the last cubin (a garbled binary)");
  }
  return out;
}

}  // namespace zc::codegen::cuda
