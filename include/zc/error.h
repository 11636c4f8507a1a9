// zc::Error: the one exception type for user-facing errors. Its message names the cause and
// what was expected ("matmul: [2,3] @ [4,5]: inner dimensions 3 and 4 differ").
#pragma once

#include <stdexcept>
#include <string>

namespace zc {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace zc
