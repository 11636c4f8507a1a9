// JSON string literals, for every JSON that zc writes (the CLI's --json output, statistics,
// bundle reports, safetensors headers): paths, reasons and names can hold any byte.
#pragma once

#include <string>
#include <string_view>

namespace zc::json {

// `s` as a JSON string literal, quotes included; control characters as \u escapes.
std::string quote(std::string_view s);

}  // namespace zc::json
