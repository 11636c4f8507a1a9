// CodeWriter: owns indentation and line structure of emitted source, so emitters say what to
// write, not how to lay it out.
#pragma once

#include <string>
#include <string_view>

namespace zc::codegen {

class CodeWriter {
 public:
  explicit CodeWriter(int indent = 0) : indent_(indent) {}
  void line(std::string_view s) {
    out_.append(static_cast<size_t>(indent_) * 2, ' ');
    out_.append(s);
    out_.push_back('\n');
  }
  void blank() { out_.push_back('\n'); }
  // `head {` and one level deeper.
  void open(std::string_view head) {
    line(std::string(head) + " {");
    ++indent_;
  }
  void close(std::string_view tail = "") {
    --indent_;
    line("}" + std::string(tail));
  }
  void raw(std::string_view text) { out_.append(text); }
  const std::string& str() const { return out_; }
  int indent() const { return indent_; }

 private:
  std::string out_;
  int indent_ = 0;
};

}  // namespace zc::codegen
