#include "codegen/size_template.h"

#include "zc/tensor.h"

namespace zc::codegen {

std::string instantiate_sizes(std::string_view text, std::span<const SizePoly> polys,
                              const std::string& sym) {
  std::string out;
  out.reserve(text.size() + polys.size() * 8);
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != SizeRecorder::kOpen) {
      out += text[i];
      continue;
    }
    size_t end = text.find(SizeRecorder::kClose, i);
    if (end == std::string_view::npos || end == i + 1) break;
    size_t index = 0;
    for (size_t j = i + 1; j < end; ++j) {
      if (text[j] < '0' || text[j] > '9') throw Error("size template: a malformed marker");
      index = index * 10 + static_cast<size_t>(text[j] - '0');
    }
    if (index >= polys.size()) {
      throw Error("size template: its text names size " + std::to_string(index) + " of " +
                  std::to_string(polys.size()));
    }
    out += polys[index].c_expr(sym);
    i = end;
  }
  return out;
}

}  // namespace zc::codegen
