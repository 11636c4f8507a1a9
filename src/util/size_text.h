// Memory sizes for people: "512 B", "1.5 KiB", "79.6 GiB" (powers of 1024, as GPU memory is
// quoted), for messages and reports.
#pragma once

#include <cstdint>
#include <string>

namespace zc {

std::string binary_size(uint64_t bytes);

}  // namespace zc
