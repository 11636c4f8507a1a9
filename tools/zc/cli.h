// What the zc tool's subcommands share.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace zc_cli {

using Args = std::span<const std::string_view>;

// A usage mistake (unknown command or option): reported with a hint and exit code 2.
struct UsageError {
  std::string message;
};

// Exit codes: 0 success, 1 a zc::Error or failure at run time, 2 a usage mistake.
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

int cmd_cache(Args args);
int cmd_bench(Args args);
int cmd_run(Args args);

}  // namespace zc_cli
