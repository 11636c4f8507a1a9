// zc generate DIR: a transformers checkpoint directory (from_pretrained) generating after the
// given prompt ids with its KV cache (zc::generate), printing the new ids and what the prefill,
// the first token and the decoding cost. Ids in, ids out: zc has no tokenizer.
#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "zc/zc.h"

namespace zc_cli {

namespace {

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, comma - at);
    try {
      size_t used = 0;
      ids.push_back(std::stoll(part, &used));
      if (used != part.size()) throw std::invalid_argument(part);
    } catch (const std::exception&) {
      throw UsageError{"zc generate: --prompt-ids takes comma-separated integers, got '" + part +
                       "'"};
    }
    at = comma + 1;
  }
  return ids;
}

template <class T>
T number(std::string_view option, const std::string& value) {
  try {
    size_t used = 0;
    T v;
    if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(std::stod(value, &used));
    } else {
      v = static_cast<T>(std::stoll(value, &used));
    }
    if (used != value.size()) throw std::invalid_argument(value);
    return v;
  } catch (const std::exception&) {
    throw UsageError{"zc generate: " + std::string(option) + " takes a number, got '" + value +
                     "'"};
  }
}

}  // namespace

int cmd_generate(Args args) {
  std::string dir, json_path;
  std::vector<int64_t> prompt;
  zc::GenerateOptions options;
  zc::models::PretrainedOptions load;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) {
        throw UsageError{"zc generate: " + std::string(a) + " needs a value"};
      }
      return std::string(args[++i]);
    };
    if (a == "--prompt-ids") {
      prompt = parse_ids(value());
    } else if (a == "--max-new-tokens") {
      options.max_new_tokens = number<int64_t>(a, value());
    } else if (a == "--temperature") {
      options.temperature = number<double>(a, value());
    } else if (a == "--top-k") {
      options.top_k = number<int64_t>(a, value());
    } else if (a == "--top-p") {
      options.top_p = number<double>(a, value());
    } else if (a == "--seed") {
      options.seed = number<uint64_t>(a, value());
    } else if (a == "--eos") {
      options.eos_token_id = number<int64_t>(a, value());
    } else if (a == "--eager") {
      options.compile = false;
    } else if (a == "--device") {
      const std::string d = value();
      if (d == "cuda") {
        load.device = zc::Device::cuda(0);
      } else if (d != "cpu") {
        throw UsageError{"zc generate: --device takes cpu or cuda"};
      }
    } else if (a == "--dtype") {
      const std::string d = value();
      if (d == "bf16") {
        load.dtype = zc::DType::bf16;
      } else if (d == "f16") {
        load.dtype = zc::DType::f16;
      } else if (d != "f32") {
        throw UsageError{"zc generate: --dtype takes f32, bf16 or f16"};
      }
    } else if (a == "--json") {
      json_path = value();
    } else if (!a.starts_with("--") && dir.empty()) {
      dir = std::string(a);
    } else {
      throw UsageError{"zc generate: unknown argument '" + std::string(a) + "'"};
    }
  }
  if (dir.empty()) throw UsageError{"zc generate: which checkpoint? (zc generate DIR ...)"};
  if (prompt.empty()) throw UsageError{"zc generate: --prompt-ids is required (ids, not text)"};
  auto model = zc::models::from_pretrained(dir, load);
  const zc::Tensor ids =
      zc::from_values(prompt, {1, static_cast<int64_t>(prompt.size())}).to(zc::DType::i64);
  const zc::GenerateResult r = zc::generate(model, ids, options);
  std::string tokens;
  const zc::Tensor t = r.tokens.contiguous();
  for (int64_t i = 0; i < t.numel(); ++i) {
    tokens += (i ? "," : "") + std::to_string(t.data<int64_t>()[i]);
  }
  std::printf("%s\n", tokens.c_str());
  std::fprintf(stderr,
               "zc generate: %lld tokens; prefill %.2f ms, first token %.2f ms, decode %.1f "
               "tokens/s\n",
               static_cast<long long>(r.steps), r.prefill_ms, r.first_token_ms, r.tokens_per_s());
  if (!json_path.empty()) {
    FILE* f = json_path == "-" ? stdout : std::fopen(json_path.c_str(), "w");
    if (!f) throw zc::Error("zc generate: cannot write " + json_path);
    std::fprintf(f,
                 "{\"tokens\":[%s],\"steps\":%lld,\"prefill_ms\":%.3f,\"first_token_ms\":%.3f,"
                 "\"decode_ms\":%.3f,\"tokens_per_s\":%.2f}\n",
                 tokens.c_str(), static_cast<long long>(r.steps), r.prefill_ms, r.first_token_ms,
                 r.decode_ms, r.tokens_per_s());
    if (f != stdout) std::fclose(f);
  }
  return 0;
}

}  // namespace zc_cli
