// zc run MODEL.onnx: load an ONNX model, compile it, run it on given or generated inputs, and
// report what that cost: the load, the first call (capture and compile, or the caches), and
// the steady per-call time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli.h"
#include "util/json_quote.h"
#include "zc/npy.h"
#include "zc/zc.h"

namespace zc_cli {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string shape_json(const zc::Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

zc::Tensor generated_input(const zc::onnx::ValueInfo& v,
                           const std::map<std::string, int64_t>& dims) {
  if (!v.has_shape) {
    throw zc::Error("input '" + v.name + "' declares no shape: give it with --input FILE.npy");
  }
  zc::Shape shape;
  for (size_t d = 0; d < v.shape.size(); ++d) {
    if (v.shape[d] >= 0) {
      shape.push_back(v.shape[d]);
      continue;
    }
    auto it = dims.find(v.dim_names[d]);
    shape.push_back(it == dims.end() ? 1 : it->second);
  }
  if (zc::is_floating(v.dtype)) return zc::randn(shape).to(v.dtype);
  return zc::zeros(shape, v.dtype);
}

int cmd_run(Args args) {
  std::string path, json_path, out_dir;
  std::vector<std::string> input_files;
  std::map<std::string, int64_t> dims;
  int repeats = 10;
  bool check = false;
  zc::Device device = zc::Device::cpu();
  zc::CompileOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw UsageError{"zc run: " + std::string(a) + " needs a value"};
      return std::string(args[++i]);
    };
    if (a == "--input") {
      input_files.push_back(value());
    } else if (a == "--dim") {
      const std::string d = value();
      const size_t eq = d.find('=');
      if (eq == std::string::npos) throw UsageError{"zc run: --dim takes NAME=SIZE"};
      try {
        dims[d.substr(0, eq)] = std::stoll(d.substr(eq + 1));
      } catch (const std::exception&) {
        throw UsageError{"zc run: --dim " + d + ": the size is not a number"};
      }
    } else if (a == "--repeats") {
      try {
        repeats = std::max(0, std::stoi(value()));
      } catch (const std::exception&) {
        throw UsageError{"zc run: --repeats takes a number"};
      }
    } else if (a == "--json") {
      json_path = value();
    } else if (a == "--output") {
      out_dir = value();
    } else if (a == "--check") {
      check = true;
    } else if (a == "--matmul-precision") {
      const std::string p = value();
      if (p == "tf32") {
        options.matmul_precision = zc::MatmulPrecision::Tf32;
      } else if (p == "bf16") {
        options.matmul_precision = zc::MatmulPrecision::Bf16;
      } else if (p != "highest") {
        throw UsageError{"zc run: --matmul-precision takes highest, tf32 or bf16"};
      }
    } else if (a == "--device") {
      const std::string d = value();
      if (d == "cuda") {
        device = zc::Device::cuda(0);
      } else if (d != "cpu") {
        throw UsageError{"zc run: --device takes cpu or cuda"};
      }
    } else if (!a.starts_with("--") && path.empty()) {
      path = std::string(a);
    } else {
      throw UsageError{"zc run: unknown argument '" + std::string(a) + "'"};
    }
  }
  if (path.empty()) throw UsageError{"zc run: which model? (zc run MODEL.onnx|FILE.zcpkg)"};
  if (path.ends_with(".zcpkg")) {
    if (check || !dims.empty() || device.is_cuda() ||
        options.matmul_precision != zc::MatmulPrecision::Highest) {
      throw UsageError{
          "zc run: a package runs as built: --check, --dim, --device and --matmul-precision "
          "are for ONNX models"};
    }
    return run_package(path, input_files, repeats, json_path, out_dir);
  }

  zc::NoGradGuard no_grad;
  auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<zc::onnx::Model> model = zc::onnx::load(path);
  const double load_ms = ms_since(t0);
  const auto& declared = model->inputs();
  if (!input_files.empty() && input_files.size() != declared.size()) {
    throw zc::Error("zc run: " + std::to_string(input_files.size()) + " --input file(s) for " +
                    std::to_string(declared.size()) + " graph input(s)");
  }
  std::vector<zc::Tensor> inputs;
  for (size_t i = 0; i < declared.size(); ++i) {
    inputs.push_back(input_files.empty() ? generated_input(declared[i], dims)
                                         : read_npy(input_files[i]));
  }
  // On a GPU: the weights and inputs moved first (not timed), each call's time includes
  // waiting for the GPU.
  const bool gpu = device.is_cuda();
  if (gpu) {
    model->to(device);
    for (zc::Tensor& t : inputs) t = t.to(device);
    zc::cuda::synchronize();
  }
  auto finish = [&] {
    if (gpu) zc::cuda::synchronize();
  };
  zc::CompiledModule fast = zc::compile(model, options);
  zc::compiler::reset_stats();
  t0 = std::chrono::steady_clock::now();
  std::vector<zc::Tensor> out = fast(inputs);
  finish();
  const double first_ms = ms_since(t0);
  const zc::compiler::Stats s = zc::compiler::stats();
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    t0 = std::chrono::steady_clock::now();
    fast(inputs);
    finish();
    times.push_back(ms_since(t0));
  }
  std::sort(times.begin(), times.end());
  const double median = times.empty() ? 0 : times[times.size() / 2];
  double max_diff = -1;
  for (zc::Tensor& t : out) t = t.to(zc::Device::cpu());
  if (check) {
    std::vector<zc::Tensor> eager = (*model)(inputs);
    for (zc::Tensor& t : eager) t = t.to(zc::Device::cpu());
    max_diff = 0;
    for (size_t k = 0; k < out.size(); ++k) {
      zc::Tensor d = zc::abs(out[k].to(zc::DType::f64) - eager[k].to(zc::DType::f64));
      max_diff = std::max(max_diff, d.numel() ? zc::max(d).item<double>() : 0.0);
    }
  }
  if (!out_dir.empty()) {
    std::filesystem::create_directories(out_dir);
    for (size_t k = 0; k < out.size(); ++k) {
      write_npy(out_dir + "/output_" + std::to_string(k) + ".npy", out[k]);
    }
  }

  std::printf("%s: opset %lld, %zu input(s), %zu output(s)%s\n", path.c_str(),
              static_cast<long long>(model->opset()), declared.size(), out.size(),
              model->producer().empty() ? "" : (", from " + model->producer()).c_str());
  std::printf("  load            %9.2f ms\n", load_ms);
  // Graphs found whole in a cache tier (a graph with no generated kernel needs no compiler run
  // either, so compiler runs do not tell the rest).
  int64_t cached_graphs = 0;
  for (const zc::cache::LevelStats& l : zc::cache::stats().levels) {
    if (l.level == "graph") cached_graphs += l.hits;
  }
  std::printf(
      "  first call      %9.2f ms (ready %.2f ms: capture %.2f, compile %.2f; %lld "
      "compiler runs, %lld graphs from the caches)\n",
      first_ms, s.ready_ms, s.capture_ms, s.compile_ms,
      static_cast<long long>(s.compiler_invocations), static_cast<long long>(cached_graphs));
  if (repeats > 0) std::printf("  per call        %9.3f ms (median of %d)\n", median, repeats);
  if (check) std::printf("  compiled vs eager: max abs difference %.3g\n", max_diff);
  for (size_t k = 0; k < out.size(); ++k) {
    std::printf("  output %zu '%s': %s %s\n", k, model->outputs()[k].name.c_str(),
                std::string(zc::dtype_name(out[k].dtype())).c_str(),
                zc::shape_str(out[k].shape()).c_str());
  }
  if (!json_path.empty()) {
    std::string j =
        "{\"model\":" + zc::json::quote(path) + ",\"load_ms\":" + std::to_string(load_ms) +
        ",\"first_call_ms\":" + std::to_string(first_ms) +
        ",\"ready_ms\":" + std::to_string(s.ready_ms) +
        ",\"compiler_invocations\":" + std::to_string(s.compiler_invocations) +
        ",\"per_call_ms\":" + std::to_string(median) + ",\"repeats\":" + std::to_string(repeats);
    if (check) j += ",\"max_abs_diff_vs_eager\":" + std::to_string(max_diff);
    j += ",\"outputs\":[";
    for (size_t k = 0; k < out.size(); ++k) {
      j += std::string(k ? "," : "") + "{\"name\":" + zc::json::quote(model->outputs()[k].name) +
           ",\"shape\":" + shape_json(out[k].shape()) + "}";
    }
    j += "]}\n";
    if (json_path == "-") {
      std::fputs(j.c_str(), stdout);
    } else if (FILE* f = std::fopen(json_path.c_str(), "w")) {
      std::fputs(j.c_str(), f);
      std::fclose(f);
    } else {
      throw zc::Error("zc run: cannot write " + json_path);
    }
  }
  return 0;
}

}  // namespace zc_cli
