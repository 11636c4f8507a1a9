#!/usr/bin/env python3
"""Writes the small transformers checkpoints that zc's from_pretrained tests load.

    python3 tests/tools/llm_fixtures.py [OUT_DIR]

OUT_DIR defaults to tests/data/llm/. Run with a Python that has torch and transformers 5.x
(on this project's machine: /work/venv-zoo/bin/python); it runs on the CPU in seconds, and the
files it writes are committed, so the tests need neither. Each fixture is a directory as
save_pretrained writes it (config.json, the weights as safetensors), plus:

    prompt.npy   i64 [B, T]                 the token ids the tests feed
    logits.npy   f32 [B, T, vocab]          transformers' logits for the prompt (eager, f32)
    greedy.npy   i64 [B, T + NEW_TOKENS]    transformers' generate(do_sample=False)
    fixture.json what the fixture is for, the seed kept, and the smallest gap between the best
                 and the second-best logit over the greedy steps (how far from a tie greedy
                 decoding is)

The weights are random but drawn wider than transformers' default initialization, so that
logits differ enough between tokens for greedy decoding not to hinge on rounding; the first
seed whose greedy tokens keep at least MIN_GAP from a tie and vary (MIN_DISTINCT) is kept. A
checkpoint stored in bf16 or f16 has its reference computed in f32 from the rounded weights, as
zc computes it after converting them.

The fixtures:
    llama-gqa        LlamaForCausalLM, grouped-query attention (4 heads, 2 key-value heads),
                     default RoPE, untied head, f32, one file; config in transformers 5's
                     spelling (rope_parameters)
    llama3-sharded   llama3 RoPE scaling, head_dim set apart from hidden/heads, tied
                     embeddings, attention and MLP biases, bf16, sharded (an index and shards)
    llama-v4-linear  linear RoPE scaling, f16, config.json rewritten in transformers 4's
                     spelling (rope_theta at the top, rope_scaling with "type", torch_dtype)
    mistral          MistralForCausalLM without a sliding window (Llama's computation under
                     another name), f32, one file
    gpt2             GPT2LMHeadModel (Conv1D weights, tied head, layer_norm_epsilon 0.1), f32,
                     one file
"""
import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers

NEW_TOKENS = 8
MIN_GAP = 1e-2
# Each row of greedy tokens must hold this many distinct new tokens, so that the tokens test
# more than the first step (a random model easily repeats one token forever).
MIN_DISTINCT = 4
SEEDS = range(100)
PROMPT_SHAPE = (2, 8)
VOCAB = 256


def widen_weights(model, std, seed):
    # transformers' 0.02 makes every logit nearly equal; N(0, std) keeps greedy choices clear.
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or ".ln_" in name or "ln_f" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(std * torch.randn(p.shape, generator=gen))


def greedy_with_gap(model, prompt):
    out = model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        do_sample=False,
        max_new_tokens=NEW_TOKENS,
        min_new_tokens=NEW_TOKENS,
        output_scores=True,
        return_dict_in_generate=True,
        pad_token_id=0,
    )
    gap = float("inf")
    for scores in out.scores:
        top2 = torch.topk(scores.float(), 2, dim=-1).values
        gap = min(gap, float((top2[:, 0] - top2[:, 1]).min()))
    return out.sequences, gap


def reference(model, storage_dtype, prompt):
    """Logits, greedy tokens and the greedy gap of `model` with its weights as stored."""
    model.eval()
    # The reference runs in f32 on the weights exactly as stored. Parameters only: model.to()
    # would round the rotary inverse frequencies (a buffer) too, which nobody stores.
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(storage_dtype).to(torch.float32))
    with torch.no_grad():
        logits = model(prompt).logits.float()
    sequences, gap = greedy_with_gap(model, prompt)
    assert sequences.shape == (PROMPT_SHAPE[0], PROMPT_SHAPE[1] + NEW_TOKENS), sequences.shape
    return logits, sequences, gap


def distinct_new_tokens(sequences):
    return min(len(set(row[PROMPT_SHAPE[1]:].tolist())) for row in sequences)


def save_fixture(out_dir, name, build, storage_dtype, purpose, shard=None, rewrite=None):
    path = os.path.join(out_dir, name)
    shutil.rmtree(path, ignore_errors=True)
    gen = torch.Generator().manual_seed(99)
    prompt = torch.randint(0, VOCAB, PROMPT_SHAPE, generator=gen)
    for seed in SEEDS:
        model = build(seed)
        logits, sequences, gap = reference(model, storage_dtype, prompt)
        if gap >= MIN_GAP and distinct_new_tokens(sequences) >= MIN_DISTINCT:
            break
    else:
        sys.exit(f"{name}: no seed gives clear and varied greedy tokens; change the widths")

    model.to(storage_dtype)
    kwargs = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(path, **kwargs)
    if rewrite:
        config_path = os.path.join(path, "config.json")
        with open(config_path) as f:
            config = json.load(f)
        rewrite(config)
        with open(config_path, "w") as f:
            json.dump(config, f, indent=2, sort_keys=True)
    # zc reads neither; they only make the directories bigger.
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(path, extra)):
            os.remove(os.path.join(path, extra))
    np.save(os.path.join(path, "prompt.npy"), prompt.numpy().astype(np.int64))
    np.save(os.path.join(path, "logits.npy"), logits.numpy().astype(np.float32))
    np.save(os.path.join(path, "greedy.npy"), sequences.numpy().astype(np.int64))
    with open(os.path.join(path, "fixture.json"), "w") as f:
        json.dump(
            {
                "purpose": purpose,
                "transformers": transformers.__version__,
                "torch": torch.__version__.split("+")[0],
                "seed": seed,
                "min_greedy_gap": gap,
            },
            f,
            indent=2,
        )
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(path, p)) for p in os.listdir(path))
    print(f"{name}: {size / 1024:.0f} KiB, greedy gap {gap:.3g}, files {sorted(os.listdir(path))}")


def llama_gqa(seed):
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
    )
    model = transformers.LlamaForCausalLM(config)
    widen_weights(model, 0.15, seed)
    return model


def llama3_sharded(seed):
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=24,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        # Wavelengths of a 24-wide head at theta 500000 span 6 to about 2e5 positions, so
        # against an original context of 32 some frequencies stay, some are divided by the
        # factor and some are interpolated.
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32,
        },
        tie_word_embeddings=True,
        attention_bias=True,
        mlp_bias=True,
        bos_token_id=None,
        eos_token_id=None,
    )
    model = transformers.LlamaForCausalLM(config)
    widen_weights(model, 0.15, seed)
    return model


def llama_v4_linear(seed):
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "linear", "rope_theta": 1000.0, "factor": 2.0},
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
    )
    model = transformers.LlamaForCausalLM(config)
    widen_weights(model, 0.2, seed)
    return model


def to_v4_spelling(config):
    # transformers 4 wrote rope_theta at the top level, the scaling as rope_scaling with the
    # key "type", and the dtype as torch_dtype.
    rope = config.pop("rope_parameters")
    config["rope_theta"] = rope.pop("rope_theta")
    rope["type"] = rope.pop("rope_type")
    config["rope_scaling"] = rope
    if "dtype" in config:
        config["torch_dtype"] = config.pop("dtype")
    config["transformers_version"] = "4.46.0"


def mistral(seed):
    config = transformers.MistralConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        max_position_embeddings=64,
        sliding_window=None,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=None,
        eos_token_id=None,
    )
    model = transformers.MistralForCausalLM(config)
    widen_weights(model, 0.2, seed)
    return model


def gpt2(seed):
    config = transformers.GPT2Config(
        vocab_size=VOCAB,
        n_positions=64,
        n_embd=64,
        n_layer=2,
        n_head=4,
        # Not the default 1e-5, so that a reader ignoring the field fails the logits test.
        layer_norm_epsilon=0.1,
        bos_token_id=None,
        eos_token_id=None,
    )
    model = transformers.GPT2LMHeadModel(config)
    widen_weights(model, 0.3, seed)
    # With the head tied to the token embedding, a random GPT-2 tends to predict the token it
    # was just given, forever; strong position embeddings make the next token vary.
    with torch.no_grad():
        model.transformer.wpe.weight.mul_(0.5 / 0.3)
    return model


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "data", "llm")
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(1)
    save_fixture(out_dir, "llama-gqa", llama_gqa, torch.float32,
                 "Llama, grouped-query attention, default RoPE, untied head, f32, one file")
    save_fixture(out_dir, "llama3-sharded", llama3_sharded, torch.bfloat16,
                 "Llama, llama3 RoPE scaling, head_dim 24, tied embeddings, biases, bf16, "
                 "sharded", shard="100KB")
    save_fixture(out_dir, "llama-v4-linear", llama_v4_linear, torch.float16,
                 "Llama, linear RoPE scaling, f16, config in transformers 4's spelling",
                 rewrite=to_v4_spelling)
    save_fixture(out_dir, "mistral", mistral, torch.float32,
                 "Mistral without a sliding window: Llama's computation, another model_type")
    save_fixture(out_dir, "gpt2", gpt2, torch.float32,
                 "GPT-2: Conv1D weights, tied head, layer_norm_epsilon 0.1, f32, one file")


if __name__ == "__main__":
    main()
