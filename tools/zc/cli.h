// What the zc tool's subcommands share.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zc/onnx.h"
#include "zc/tensor.h"

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
int cmd_package(Args args);
int cmd_generate(Args args);

// `zc run FILE.zcpkg`: loads the package and runs it on the given inputs (.npy), else on
// generated ones of its first specialization's shapes.
int run_package(const std::string& path, const std::vector<std::string>& input_files, int repeats,
                const std::string& json_path, const std::string& out_dir);

// An ONNX input as declared, symbolic dims from `dims` (else 1): random normal floats,
// integers 0.
zc::Tensor generated_input(const zc::onnx::ValueInfo& v,
                           const std::map<std::string, int64_t>& dims);

}  // namespace zc_cli
