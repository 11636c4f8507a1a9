// Generated code that serves many sizes of one graph: a size template.
//
// A graph whose sizes vary (a sequence length, a batch) is generated at one size like any
// graph, with every integer that derives from sizes printed through a SizeRecorder: instead of
// the number, a marker, and the number kept in a list. The source with its markers is the
// template's text; two sizes of the graph that give the same text differ only in those
// numbers. Fitting them over a few sizes (size_poly.h) turns each number into a polynomial in
// the graph's symbols, and the text with each marker replaced by its polynomial over the
// symbol values the kernel receives is source that serves every size on which the text and
// the numbers agree. That is checked for each size before its first run, by generating it
// again (which compiles nothing): code never runs at a size it was not verified for.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/size_poly.h"

namespace zc::codegen {

class SizeRecorder {
 public:
  // A marker is kOpen, the size's number in the list, kClose: emitters build strings in an
  // order C++ leaves unspecified (argument evaluation), so the text's order is not the list's.
  static constexpr char kOpen = '\x01', kClose = '\x02';
  explicit SizeRecorder(bool recording) : recording_(recording) {}

  // `n` itself, or, when recording, its marker (and `n` is recorded).
  std::string operator()(int64_t n) {
    if (!recording_) return std::to_string(n);
    values_.push_back(n);
    return kOpen + std::to_string(values_.size() - 1) + kClose;
  }
  bool recording() const { return recording_; }
  const std::vector<int64_t>& values() const { return values_; }
  std::vector<int64_t> take() { return std::move(values_); }

 private:
  bool recording_;
  std::vector<int64_t> values_;
};

// `text` with the marker of size i replaced by polys[i] over the symbol array `sym` (an int64_t
// array expression in the generated code). Raises zc::Error for a marker without a polynomial.
std::string instantiate_sizes(std::string_view text, std::span<const SizePoly> polys,
                              const std::string& sym);

}  // namespace zc::codegen
