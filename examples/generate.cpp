// Generating tokens with a language model from a transformers checkpoint: load it, generate
// greedily after a prompt with the KV cache, streaming each token as it comes, then sample
// with a seed.
//
//   generate DIR [ID,ID,...]
//
// DIR is a checkpoint directory as transformers' save_pretrained writes it (the Llama family,
// docs/models.md); the prompt is token ids (zc has no tokenizer; default 1,2,3,4). Run with a
// GPU: the model loads onto cuda:0 in bf16; without one, on the CPU in f32.
#include <zc/zc.h>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CHECKPOINT_DIR [ID,ID,...]\n", argv[0]);
    return 2;
  }
  try {
    std::vector<int64_t> prompt{1, 2, 3, 4};
    if (argc > 2) {
      prompt.clear();
      const std::string list = argv[2];
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        prompt.push_back(std::stoll(list.substr(at, comma - at)));
        at = comma + 1;
      }
    }
    const bool gpu = zc::cuda::is_available();
    auto lm = zc::models::from_pretrained(
        argv[1], {.dtype = gpu ? zc::DType::bf16 : zc::DType::f32,
                  .device = gpu ? zc::Device::cuda(0) : zc::Device::cpu()});
    const zc::Tensor ids = zc::from_values(prompt, {1, static_cast<int64_t>(prompt.size())});

    // Greedy, streaming: the callback sees each step's token (one per sequence of the batch).
    std::printf("greedy:");
    const zc::GenerateResult greedy =
        zc::generate(lm, ids, {.max_new_tokens = 16, .on_token = [](int64_t, const zc::Tensor& t) {
                                 std::printf(" %lld", static_cast<long long>(t.item<int64_t>()));
                                 std::fflush(stdout);
                                 return true;
                               }});
    std::printf("\n  prefill %.1f ms, first token %.1f ms, %.0f tokens/s after it\n",
                greedy.prefill_ms, greedy.first_token_ms, greedy.tokens_per_s());

    // Sampling: the same seed gives the same tokens.
    const zc::GenerateOptions sample{
        .max_new_tokens = 16, .temperature = 0.8, .top_k = 40, .top_p = 0.95, .seed = 7};
    const zc::Tensor a = zc::generate(lm, ids, sample).tokens;
    const zc::Tensor b = zc::generate(lm, ids, sample).tokens;
    std::printf("sampled twice with seed 7: %s\n", zc::amax(zc::abs(a - b)).item<int64_t>() == 0
                                                       ? "the same tokens"
                                                       : "DIFFERENT tokens");
  } catch (const zc::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
