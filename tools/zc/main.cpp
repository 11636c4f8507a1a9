// The zc command-line tool. Each subcommand is one function in the table below; global
// options (--version, --help) are handled before dispatch.
#include <sys/utsname.h>

#include <cstdio>
#include <exception>
#include <initializer_list>
#include <iostream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "cli.h"
#include "toolchain/nvrtc.h"
#include "toolchain/nvrtc_workers.h"
#include "toolchain/target.h"
#include "util/env.h"
#include "util/json_quote.h"
#include "util/size_text.h"
#include "zc/cuda.h"
#include "zc/error.h"
#include "zc/version.h"

namespace {

using zc_cli::Args;
using zc_cli::cmd_bench;
using zc_cli::cmd_cache;
using zc_cli::kExitError;
using zc_cli::kExitUsage;
using zc_cli::UsageError;

struct Command {
  std::string_view name;
  std::string_view summary;
  std::string_view usage;
  int (*run)(Args args);
};

int cmd_env(Args args);
int cmd_help(Args args);

const Command kCommands[] = {
    {"env",
     "print version, build id, compiler, CPU features, BLAS, CPU threads and convolutions, and "
     "GPUs",
     "zc env [--json]", cmd_env},
    {"bench",
     "measure cold, warm, bundle, remote, fleet and steady-state figures in fresh processes",
     "zc bench [--repeats N] [--quick] [--json FILE] [--compare FILE] [--remote URL]\n"
     "         [--device cpu|cuda|all]\n"
     "  --remote URL  the Redis for the remote and fleet scenarios; its zc keys are cleared.\n"
     "                Default: a private redis-server on 127.0.0.1 when one is installed\n"
     "  --device D    cpu: the CPU rows; cuda: seed64 and gpt12 on cuda:0; all: both.\n"
     "                Default: all with a usable GPU, else cpu (saying why)",
     cmd_bench},
    {"run",
     "load an ONNX model, compile it, run it and report the load, first-call and per-call time",
     "zc run MODEL.onnx|FILE.zcpkg [--input FILE.npy]... [--dim NAME=SIZE]... [--repeats N]\n"
     "       [--check] [--device cpu|cuda] [--matmul-precision highest|tf32|bf16]\n"
     "       [--output DIR] [--json FILE|-]\n"
     "  FILE.zcpkg     a package (zc package): loaded and run with no compiler and no capture\n"
     "  --input FILE   the graph's inputs in order, as .npy arrays. Default: random normal\n"
     "                 floats, integer inputs 0, symbolic dims 1 unless --dim sets them\n"
     "  --check        also run it eagerly and print the largest difference\n"
     "  --device D     where it runs (cuda: the weights and inputs moved there first)\n"
     "  --matmul-precision P  CompileOptions::matmul_precision: tf32 lets a GPU's f32\n"
     "                 products and convolutions use TF32 (torch's default for convolutions),\n"
     "                 bf16 the CPU's large products bf16 operands. Default: highest\n"
     "  --output DIR   write the outputs as DIR/output_<i>.npy",
     zc_cli::cmd_run},
    {"package",
     "compile a model for example inputs into one file that runs with no compiler (a package)",
     "zc package MODEL.onnx|--model seed64|gpt-small [--layers N] [--input FILE.npy]...\n"
     "           [--shape DIMS]... [--dynamic-dim I:D:MIN:MAX]... [--regions auto|none]\n"
     "           -o OUT.zcpkg [--save-example DIR] [--json FILE|-]\n"
     "  --input FILE   one example call's inputs, in order, as .npy arrays\n"
     "  --shape DIMS   an example call of one generated input of shape DIMS (8x10); repeat it\n"
     "                 for each size the package must serve. Default: the model's own input\n"
     "  --dynamic-dim I:D:MIN:MAX  input I's dim D takes every size MIN..MAX (each example\n"
     "                 call's other dims fixed): 0:1:2:128 serves gpt-small's lengths 2..128\n"
     "  --save-example DIR  also write the first call's inputs and the module's eager outputs\n"
     "                 (DIR/input_<i>.npy, DIR/expected_<i>.npy)\n"
     "  Run it with `zc run OUT.zcpkg`; signed when ZC_CACHE_HMAC_KEY_FILE is set",
     zc_cli::cmd_package},
    {"generate",
     "generate token ids after a prompt with a transformers checkpoint and its KV cache",
     "zc generate DIR --prompt-ids ID,ID,... [--max-new-tokens N] [--temperature T]\n"
     "            [--top-k K] [--top-p P] [--seed S] [--eos ID] [--device cpu|cuda]\n"
     "            [--dtype f32|bf16|f16] [--eager] [--json FILE|-]\n"
     "  DIR            a checkpoint directory as transformers' save_pretrained writes it\n"
     "                 (the Llama family or GPT-2: docs/models.md)\n"
     "  --prompt-ids   the prompt's token ids (zc has no tokenizer); the new ids are printed\n"
     "                 comma-separated on stdout, the prefill, first token and decode speed\n"
     "                 on stderr\n"
     "  --temperature  0 (default): greedy; above 0 sampling, narrowed by --top-k and --top-p\n"
     "  --eager        run the model uncompiled",
     zc_cli::cmd_generate},
    {"cache", "inspect and manage the compile cache",
     "zc cache stats|ls [--remote]|clear [--remote --yes]|gc|verify|export FILE|import FILE "
     "[--json]",
     cmd_cache},
    {"help", "list commands, or describe one", "zc help [COMMAND]", cmd_help},
};

const Command* find_command(std::string_view name) {
  for (const Command& c : kCommands) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> words;
  std::istringstream in(s);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// A ZC_* variable that zc does not read is most likely misspelt, and what it was meant to set
// is silently not in force: the warning names the variable it probably meant.
std::string unknown_variable_text(const std::string& name) {
  const std::string_view meant = zc::env::closest_known(name);
  return name + " is set but zc reads no such variable" +
         (meant.empty() ? "" : "; did you mean " + std::string(meant) + "?");
}

std::string os_description() {
  utsname u{};
  if (uname(&u) != 0) return "unknown";
  return std::string(u.sysname) + " " + u.release + " " + u.machine;
}

// "13.0" from the driver's 13000.
std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::string gpu_json() {
  const int n = zc::cuda::device_count();
  std::string out = "{\"available\":" + std::string(n > 0 ? "true" : "false");
  out += ",\"count\":" + std::to_string(n);
  if (n == 0) out += ",\"reason\":" + zc::json::quote(zc::cuda::unavailable_reason());
  if (const int v = zc::cuda::driver_version(); v > 0) {
    out += ",\"driver_cuda_version\":" + zc::json::quote(cuda_version_text(v));
  }
  out += ",\"devices\":[";
  for (int i = 0; i < n; ++i) {
    const zc::cuda::DeviceProperties& p = zc::cuda::device_properties(i);
    if (i) out += ",";
    out += "{\"index\":" + std::to_string(i) + ",\"name\":" + zc::json::quote(p.name) +
           ",\"compute_capability\":" +
           zc::json::quote(std::to_string(p.major) + "." + std::to_string(p.minor)) +
           ",\"multiprocessors\":" + std::to_string(p.multiprocessor_count) +
           ",\"total_memory_bytes\":" + std::to_string(p.total_memory) + "}";
  }
  return out + "]}";
}

// One row per GPU, or one saying why there is none.
std::vector<std::pair<std::string, std::string>> gpu_rows() {
  std::vector<std::pair<std::string, std::string>> rows;
  const int n = zc::cuda::device_count();
  if (const int v = zc::cuda::driver_version(); v > 0) {
    rows.emplace_back("cuda driver", "supports CUDA " + cuda_version_text(v));
  }
  if (n == 0) rows.emplace_back("gpus", "none: " + zc::cuda::unavailable_reason());
  for (int i = 0; i < n; ++i) {
    const zc::cuda::DeviceProperties& p = zc::cuda::device_properties(i);
    rows.emplace_back("gpu " + std::to_string(i),
                      "cuda:" + std::to_string(i) + " " + p.name + ", compute capability " +
                          std::to_string(p.major) + "." + std::to_string(p.minor) + ", " +
                          zc::binary_size(p.total_memory) + ", " +
                          std::to_string(p.multiprocessor_count) + " multiprocessors");
  }
  return rows;
}

// NVRTC (the CUDA backend's compiler) and the helper processes that run it beside a process
// (docs/adr/0034), as fields: found, version, library, helpers, helper program; `why` when absent.
struct NvrtcRow {
  bool found = false;
  std::string why, version, path, helper;
  size_t helpers = 0;
};
NvrtcRow nvrtc_row() {
  NvrtcRow r;
  std::string why;
  auto info = zc::toolchain::find_nvrtc(&why);
  if (!info) {
    r.why = why;
    return r;
  }
  r.found = true;
  r.version = zc::toolchain::nvrtc_version();
  r.path = info->path;
  r.helper = zc::toolchain::nvrtc_helper_path();
  r.helpers = r.helper.empty() ? 0 : zc::toolchain::nvrtc_worker_count();
  return r;
}

std::string nvrtc_text(const NvrtcRow& r) {
  if (!r.found) return "none: " + r.why;
  std::string helpers = r.helper.empty() ? "no helper program found: compiles run in process"
                        : r.helpers == 0 ? "helpers off (ZC_NVRTC_WORKERS=0)"
                                         : std::to_string(r.helpers) + " helper process" +
                                               (r.helpers == 1 ? "" : "es") +
                                               ", started with a CUDA context (" + r.helper + ")";
  return (r.version.empty() ? "" : r.version + " ") + "at " + r.path + "; " + helpers;
}

int cmd_env(Args args) {
  bool json = false;
  for (std::string_view a : args) {
    if (a == "--json") {
      json = true;
    } else {
      throw UsageError{"zc env: unknown option '" + std::string(a) + "'"};
    }
  }
  const std::string features_str = zc::cpu_features();
  const std::vector<std::string> features = split_words(features_str);
  const std::string isa = zc::toolchain::host_isa_level();
  const unsigned cores = std::thread::hardware_concurrency();
  // Every ZC_* one set, known or not: they change what zc does, so a report of the environment
  // should carry them.
  const auto vars = zc::env::zc_variables_set();
  std::vector<std::string> unknown;
  for (const auto& var : vars) {
    if (!zc::env::known(var.first)) unknown.push_back(var.first);
  }

  if (json) {
    std::string out = "{";
    out += "\"version\":" + zc::json::quote(zc::version());
    out += ",\"build_id\":" + zc::json::quote(zc::build_id());
    out += ",\"compiler\":" + zc::json::quote(zc::compiler_id());
    out += ",\"os\":" + zc::json::quote(os_description());
    out += ",\"cpu_features\":[";
    for (size_t i = 0; i < features.size(); ++i) {
      if (i) out += ",";
      out += zc::json::quote(features[i]);
    }
    out += "]";
    if (!isa.empty()) out += ",\"cpu_isa_level\":" + zc::json::quote(isa);
    out += ",\"cores\":" + std::to_string(cores);
    out += ",\"blas\":" + zc::json::quote(zc::blas_info());
    out += ",\"cpu_threads\":" + zc::json::quote(zc::cpu_threads_info());
    out += ",\"cpu_conv\":" + zc::json::quote(zc::cpu_conv_info());
    out += ",\"gpu\":" + gpu_json();
    const NvrtcRow nv = nvrtc_row();
    out += ",\"nvrtc\":{\"found\":" + std::string(nv.found ? "true" : "false");
    if (nv.found) {
      out += ",\"version\":" + zc::json::quote(nv.version) +
             ",\"path\":" + zc::json::quote(nv.path) +
             ",\"helpers\":" + std::to_string(nv.helpers) +
             ",\"helper\":" + zc::json::quote(nv.helper);
    } else {
      out += ",\"why\":" + zc::json::quote(nv.why);
    }
    out += "}";
    out += ",\"variables\":{";
    for (size_t i = 0; i < vars.size(); ++i) {
      if (i) out += ",";
      out += zc::json::quote(vars[i].first) + ":" + zc::json::quote(vars[i].second);
    }
    out += "},\"unknown_variables\":[";
    for (size_t i = 0; i < unknown.size(); ++i) {
      if (i) out += ",";
      out += "{\"name\":" + zc::json::quote(unknown[i]);
      const std::string_view meant = zc::env::closest_known(unknown[i]);
      if (!meant.empty()) out += ",\"did_you_mean\":" + zc::json::quote(meant);
      out += "}";
    }
    out += "]}";
    std::cout << out << "\n";
    return 0;
  }
  auto row = [](std::string_view key, const std::string& value) {
    std::cout << key << std::string(key.size() < 15 ? 15 - key.size() : 1, ' ') << value << "\n";
  };
  row("version", zc::version());
  row("build id", zc::build_id());
  row("compiler", zc::compiler_id());
  row("os", os_description());
  row("cpu features", features_str.empty() ? "(none detected)" : features_str);
  if (!isa.empty()) row("cpu isa level", isa);
  row("cores", std::to_string(cores));
  row("blas", zc::blas_info());
  row("cpu threads", zc::cpu_threads_info());
  row("cpu conv", zc::cpu_conv_info());
  for (const auto& [key, value] : gpu_rows()) row(key, value);
  row("nvrtc", nvrtc_text(nvrtc_row()));
  std::string set_vars;
  for (const auto& [name, value] : vars) {
    set_vars += (set_vars.empty() ? "" : " ") + name + "=" + value;
  }
  row("variables", set_vars.empty() ? "(no ZC_* set)" : set_vars);
  for (const std::string& name : unknown) row("warning", unknown_variable_text(name));
  return 0;
}

void print_overview(std::ostream& os) {
  os << "usage: zc [--version] [--help] COMMAND [ARGS]\n\ncommands:\n";
  for (const Command& c : kCommands) {
    os << "  " << c.name << std::string(c.name.size() < 10 ? 10 - c.name.size() : 1, ' ')
       << c.summary << "\n";
  }
  os << "\nRun 'zc help COMMAND' for a command's options.\n";
}

int cmd_help(Args args) {
  if (args.empty()) {
    print_overview(std::cout);
    return 0;
  }
  if (args.size() > 1) throw UsageError{"zc help: takes at most one command name"};
  const Command* c = find_command(args[0]);
  if (!c) throw UsageError{"zc help: unknown command '" + std::string(args[0]) + "'"};
  std::cout << "usage: " << c->usage << "\n\n" << c->summary << "\n";
  return 0;
}

int run(Args args) {
  if (args.empty()) {
    print_overview(std::cerr);
    return kExitUsage;
  }
  std::string_view first = args[0];
  if (first == "--version" || first == "-V") {
    std::cout << "zc " << zc::version() << " (build " << zc::build_id().substr(0, 12) << ")\n";
    return 0;
  }
  if (first == "--help" || first == "-h") return cmd_help(args.subspan(1));
  const Command* c = find_command(first);
  if (!c) throw UsageError{"zc: unknown command '" + std::string(first) + "'"};
  Args rest = args.subspan(1);
  if (!rest.empty() && (rest[0] == "--help" || rest[0] == "-h")) {
    std::string_view name = c->name;
    return cmd_help(Args(&name, 1));
  }
  return c->run(rest);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  try {
    return run(args);
  } catch (const UsageError& e) {
    std::cerr << e.message << "\nRun 'zc help' for the list of commands.\n";
    return kExitUsage;
  } catch (const zc::Error& e) {
    std::cerr << "zc: error: " << e.what() << "\n";
    return kExitError;
  } catch (const std::exception& e) {
    std::cerr << "zc: internal error: " << e.what() << "\n";
    return kExitError;
  }
}
