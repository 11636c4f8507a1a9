// Decoding speed of zc::generate: a Llama of TinyLlama-1.1B's shape (random weights) in bf16 on
// cuda:0 (or a small one on the CPU), a prompt of 128 tokens, 256 new ones, greedy, batch 1 (and
// 8 on the GPU). One process; prints one JSON line per run:
//
//   build/bench/llm_decode [--device cuda|cpu] [--prompt 128] [--new 256] [--batch 1]
//                          [--runs 3] [--small] [--eager] [--int8]
//
// --int8 quantizes every linear layer's weight to int8 (zc::quantize, weight-only, a scale per
// output channel) after the model is in its dtype; the JSON's "weights" says which.
// Each run is a whole zc::generate: the first (cold: empty cache directory if ZC_CACHE_DIR is
// one) compiles the prefill and the step, the later ones are warm. Fields: prefill_ms,
// first_token_ms, decode tokens_per_s (per sequence), and the run's index.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "zc/zc.h"

namespace {

zc::models::LlamaConfig tinyllama() {
  zc::models::LlamaConfig c;
  c.vocab_size = 32000;
  c.hidden_size = 2048;
  c.intermediate_size = 5632;
  c.num_hidden_layers = 22;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 4;
  c.max_position_embeddings = 2048;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000;
  return c;
}

zc::models::LlamaConfig small() {
  zc::models::LlamaConfig c;
  c.vocab_size = 512;
  c.hidden_size = 128;
  c.intermediate_size = 352;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 1024;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = "cuda";
  int64_t prompt = 128, fresh = 256, batch = 1, runs = 3;
  bool is_small = false, eager = false, int8 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--device")
      device = next();
    else if (a == "--prompt")
      prompt = std::atoll(next().c_str());
    else if (a == "--new")
      fresh = std::atoll(next().c_str());
    else if (a == "--batch")
      batch = std::atoll(next().c_str());
    else if (a == "--runs")
      runs = std::atoll(next().c_str());
    else if (a == "--small")
      is_small = true;
    else if (a == "--eager")
      eager = true;
    else if (a == "--int8")
      int8 = true;
    else {
      std::fprintf(stderr, "llm_decode: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  try {
    const bool cuda = device == "cuda";
    if (cuda && !zc::cuda::is_available()) {
      std::printf("{\"skipped\": \"no GPU\"}\n");
      return 0;
    }
    zc::manual_seed(0);
    auto model = zc::models::llama(is_small ? small() : tinyllama());
    if (cuda) {
      model->to(zc::DType::bf16);
      model->to(zc::Device::cuda(0));
    }
    if (int8) zc::quantize(*model);
    const zc::Tensor ids = zc::randint(0, model->vocab_size(), {batch, prompt});
    for (int64_t r = 0; r < runs; ++r) {
      const zc::GenerateResult g =
          zc::generate(model, ids, {.max_new_tokens = fresh, .compile = !eager});
      std::printf(
          "{\"bench\": \"llm_decode\", \"model\": \"%s\", \"device\": \"%s\", \"dtype\": "
          "\"%s\", \"weights\": \"%s\", \"compiled\": %s, \"batch\": %lld, \"prompt\": %lld, "
          "\"new_tokens\": %lld, "
          "\"run\": %lld, "
          "\"prefill_ms\": %.3f, \"first_token_ms\": %.3f, \"decode_ms\": %.3f, "
          "\"tokens_per_s\": %.1f}\n",
          is_small ? "llama-small" : "tinyllama-1.1b-shape", device.c_str(), cuda ? "bf16" : "f32",
          int8 ? "int8" : "same", eager ? "false" : "true", static_cast<long long>(batch),
          static_cast<long long>(prompt), static_cast<long long>(g.steps),
          static_cast<long long>(r), g.prefill_ms, g.first_token_ms, g.decode_ms, g.tokens_per_s());
      std::fflush(stdout);
    }
  } catch (const zc::Error& e) {
    std::fprintf(stderr, "llm_decode: %s\n", e.what());
    return 1;
  }
  return 0;
}
