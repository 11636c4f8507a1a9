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

// The weight a kernel's marker line gives it (programs.h): 1 unless it ends in one.
size_t weight_of(std::string_view marker_line) {
  const size_t at = marker_line.rfind(kWeightMarker);
  if (at == std::string_view::npos) return 1;
  size_t w = 0;
  for (char c : marker_line.substr(at + kWeightMarker.size())) {
    if (c < '0' || c > '9') return 1;  // not a weight: the line says something else
    w = w * 10 + static_cast<size_t>(c - '0');
  }
  return std::max<size_t>(w, 1);
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
  const std::string_view head = source.substr(0, starts[0]);
  starts.push_back(source.size());
  const size_t kernels = starts.size() - 1;
  std::vector<size_t> cost(kernels);
  size_t total = 0;
  for (size_t k = 0; k < kernels; ++k) {
    const size_t line_end = source.find('\n', starts[k]);
    cost[k] =
        (starts[k + 1] - starts[k]) * weight_of(source.substr(starts[k], line_end - starts[k]));
    total += cost[k];
  }
  if (total < 2 * kProgramBytes) return {std::string(source)};
  const size_t programs =
      std::min({kMaxPrograms, kernels, (total + kProgramBytes - 1) / kProgramBytes});
  // Programs filled in source order up to a limit, a kernel that costs more than the limit
  // alone in its own, with the least limit that needs no more than `programs` of them (found
  // by bisection): the costliest program is then as cheap as the cut can make it (what the
  // build waits for, the programs being compiled side by side), and the other programs share
  // the rest of the kernels rather than filling up to a heavy kernel's cost.
  auto cut_under = [&](size_t limit) {
    std::vector<size_t> ends;  // one past each program's last kernel
    size_t held = 0;
    for (size_t k = 0; k < kernels; ++k) {
      if (held > 0 && held + cost[k] > limit) {
        ends.push_back(k);
        held = 0;
      }
      held += cost[k];
    }
    ends.push_back(kernels);
    return ends;
  };
  size_t lo = 1, hi = total;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (cut_under(mid).size() <= programs)
      hi = mid;
    else
      lo = mid + 1;
  }
  std::vector<std::string> out;
  size_t begin = 0;  // the program's first kernel
  for (size_t end : cut_under(lo)) {
    std::string program(head);
    program += source.substr(starts[begin], starts[end] - starts[begin]);
    out.push_back(std::move(program));
    begin = end;
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
