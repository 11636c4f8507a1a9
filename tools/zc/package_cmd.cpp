// zc package: a model and example inputs made into one package file (include/zc/package.h);
// and `zc run FILE.zcpkg`: a package loaded and run with no compiler and no capture, reporting
// its load, first-call and per-call time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli.h"
#include "support/bench_model.h"
#include "util/json_quote.h"
#include "zc/npy.h"
#include "zc/zc.h"

namespace zc_cli {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// "8x10" or "8,10".
zc::Shape parse_shape(const std::string& s) {
  zc::Shape shape;
  size_t at = 0;
  while (at <= s.size()) {
    size_t end = s.find_first_of("x,", at);
    if (end == std::string::npos) end = s.size();
    try {
      shape.push_back(std::stoll(s.substr(at, end - at)));
    } catch (const std::exception&) {
      throw UsageError{"zc package: --shape " + s + ": sizes are numbers, as 8x10"};
    }
    at = end + 1;
  }
  return shape;
}

// "0:1:2:128": input 0's dim 1 takes every size 2..128.
zc::DynamicDim parse_dynamic_dim(const std::string& s) {
  std::vector<int64_t> v;
  size_t at = 0;
  while (at <= s.size()) {
    size_t end = s.find(':', at);
    if (end == std::string::npos) end = s.size();
    try {
      v.push_back(std::stoll(s.substr(at, end - at)));
    } catch (const std::exception&) {
      v.clear();
      break;
    }
    at = end + 1;
  }
  if (v.size() != 4 || v[0] < 0) {
    throw UsageError{"zc package: --dynamic-dim " + s +
                     ": give INPUT:DIM:MIN:MAX, as 0:1:2:128 (input 0's dim 1, sizes 2..128)"};
  }
  return zc::DynamicDim{static_cast<size_t>(v[0]), v[1], v[2], v[3]};
}

// An input like `like` (its dtype) of another shape: normal floats, integers 0.
zc::Tensor input_of_shape(const zc::Tensor& like, const zc::Shape& shape) {
  if (zc::is_floating(like.dtype())) return zc::randn(shape).to(like.dtype());
  return zc::zeros(shape, like.dtype());
}

void write_text(const std::string& path, const std::string& text, const char* cmd) {
  if (path == "-") {
    std::fputs(text.c_str(), stdout);
  } else if (FILE* f = std::fopen(path.c_str(), "w")) {
    std::fputs(text.c_str(), f);
    std::fclose(f);
  } else {
    throw zc::Error(std::string(cmd) + ": cannot write " + path);
  }
}

}  // namespace

int cmd_package(Args args) {
  std::string onnx_path, model_name, out_path, json_path, example_dir, regions = "auto";
  std::vector<std::string> input_files, shapes;
  std::vector<zc::DynamicDim> dynamic_dims;
  int64_t layers = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size())
        throw UsageError{"zc package: " + std::string(a) + " needs a value"};
      return std::string(args[++i]);
    };
    if (a == "--model") {
      model_name = value();
    } else if (a == "--layers") {
      try {
        layers = std::stoll(value());
      } catch (const std::exception&) {
        throw UsageError{"zc package: --layers takes a number"};
      }
    } else if (a == "--input") {
      input_files.push_back(value());
    } else if (a == "--shape") {
      shapes.push_back(value());
    } else if (a == "--dynamic-dim") {
      dynamic_dims.push_back(parse_dynamic_dim(value()));
    } else if (a == "--regions") {
      regions = value();
      if (regions != "auto" && regions != "none")
        throw UsageError{"zc package: --regions takes auto or none"};
    } else if (a == "-o" || a == "--output") {
      out_path = value();
    } else if (a == "--json") {
      json_path = value();
    } else if (a == "--save-example") {
      example_dir = value();
    } else if (!a.starts_with("-") && onnx_path.empty()) {
      onnx_path = std::string(a);
    } else {
      throw UsageError{"zc package: unknown argument '" + std::string(a) + "'"};
    }
  }
  if (onnx_path.empty() == model_name.empty()) {
    throw UsageError{"zc package: package MODEL.onnx or --model seed64|gpt-small (one of them)"};
  }
  if (out_path.empty()) throw UsageError{"zc package: where to? (-o OUT.zcpkg)"};

  zc::NoGradGuard no_grad;
  zc::manual_seed(0);
  std::shared_ptr<zc::nn::Module> module;
  std::vector<zc::Tensor> defaults;
  if (!model_name.empty()) {
    std::string name = model_name;
    if (model_name == "seed64") {
      name = "seed";
      if (layers == 0) layers = 64;
    } else if (model_name == "gpt-small") {
      if (layers == 0) layers = 4;
    } else if (model_name != "seed" && model_name != "gpt-blocks") {
      throw UsageError{"zc package: --model takes seed64, gpt-small, seed or gpt-blocks"};
    }
    zc_support::BenchModel b = zc_support::make_bench_model(name, layers ? layers : 4, false);
    module = b.module;
    defaults = {b.input};
  } else {
    std::shared_ptr<zc::onnx::Model> model = zc::onnx::load(onnx_path);
    for (const zc::onnx::ValueInfo& v : model->inputs()) defaults.push_back(generated_input(v, {}));
    module = model;
  }
  module->eval();

  std::vector<std::vector<zc::Tensor>> calls;
  if (!input_files.empty()) {
    std::vector<zc::Tensor> call;
    for (const std::string& f : input_files) call.push_back(read_npy(f));
    calls.push_back(std::move(call));
  }
  for (const std::string& s : shapes) {
    if (defaults.size() != 1) {
      throw UsageError{"zc package: --shape is for models of one input; give --input files"};
    }
    calls.push_back({input_of_shape(defaults[0], parse_shape(s))});
  }
  if (calls.empty()) calls.push_back(defaults);

  zc::CompileOptions options;
  options.regions = regions == "none" ? zc::Regions::None : zc::Regions::Auto;
  options.dynamic_dims = dynamic_dims;
  auto t0 = std::chrono::steady_clock::now();
  zc::package::save(module, calls, out_path, options);
  const double build_ms = ms_since(t0);
  const zc::compiler::Stats s = zc::compiler::stats();
  const auto bytes = std::filesystem::file_size(out_path);
  if (!example_dir.empty()) {
    // The first call's inputs and the module's own (eager) outputs, to check a run against.
    std::filesystem::create_directories(example_dir);
    std::vector<zc::Tensor> want = (*module)(calls[0]);
    for (size_t k = 0; k < calls[0].size(); ++k)
      write_npy(example_dir + "/input_" + std::to_string(k) + ".npy", calls[0][k]);
    for (size_t k = 0; k < want.size(); ++k)
      write_npy(example_dir + "/expected_" + std::to_string(k) + ".npy", want[k]);
  }
  std::printf("%s: %zu specialization(s), %llu bytes, built in %.1f ms (%lld compiler runs)\n",
              out_path.c_str(), calls.size(), static_cast<unsigned long long>(bytes), build_ms,
              static_cast<long long>(s.compiler_invocations));
  if (!json_path.empty()) {
    write_text(json_path,
               "{\"package\":" + zc::json::quote(out_path) + ",\"bytes\":" + std::to_string(bytes) +
                   ",\"calls\":" + std::to_string(calls.size()) +
                   ",\"build_ms\":" + std::to_string(build_ms) +
                   ",\"compiler_invocations\":" + std::to_string(s.compiler_invocations) + "}\n",
               "zc package");
  }
  return 0;
}

int run_package(const std::string& path, const std::vector<std::string>& input_files, int repeats,
                const std::string& json_path, const std::string& out_dir) {
  zc::NoGradGuard no_grad;
  auto t0 = std::chrono::steady_clock::now();
  zc::package::Package p = zc::package::load(path);
  const double load_ms = ms_since(t0);
  std::vector<zc::Tensor> inputs;
  if (!input_files.empty()) {
    for (const std::string& f : input_files) inputs.push_back(read_npy(f));
  } else {
    const zc::package::CallSignature& c = p.calls().at(0);
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      inputs.push_back(zc::is_floating(c.dtypes[i]) ? zc::randn(c.shapes[i]).to(c.dtypes[i])
                                                    : zc::zeros(c.shapes[i], c.dtypes[i]));
    }
  }
  t0 = std::chrono::steady_clock::now();
  std::vector<zc::Tensor> out = p(inputs);
  const double first_ms = ms_since(t0);
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    t0 = std::chrono::steady_clock::now();
    p(inputs);
    times.push_back(ms_since(t0));
  }
  std::sort(times.begin(), times.end());
  const double median = times.empty() ? 0 : times[times.size() / 2];
  const zc::compiler::Stats s = zc::compiler::stats();
  if (!out_dir.empty()) {
    std::filesystem::create_directories(out_dir);
    for (size_t k = 0; k < out.size(); ++k)
      write_npy(out_dir + "/output_" + std::to_string(k) + ".npy", out[k]);
  }
  std::printf("%s (package):\n%s", path.c_str(), p.describe().c_str());
  std::printf("  load            %9.2f ms\n", load_ms);
  std::printf("  first call      %9.2f ms (%lld compiler runs, %lld graphs captured)\n", first_ms,
              static_cast<long long>(s.compiler_invocations),
              static_cast<long long>(s.graphs_captured));
  if (repeats > 0) std::printf("  per call        %9.3f ms (median of %d)\n", median, repeats);
  if (!json_path.empty()) {
    write_text(json_path,
               "{\"package\":" + zc::json::quote(path) + ",\"load_ms\":" + std::to_string(load_ms) +
                   ",\"first_call_ms\":" + std::to_string(first_ms) + ",\"per_call_ms\":" +
                   std::to_string(median) + ",\"repeats\":" + std::to_string(repeats) +
                   ",\"compiler_invocations\":" + std::to_string(s.compiler_invocations) +
                   ",\"graphs_captured\":" + std::to_string(s.graphs_captured) + "}\n",
               "zc run");
  }
  return 0;
}

}  // namespace zc_cli
