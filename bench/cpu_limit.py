#!/usr/bin/env python3
"""gpt-small's CPU per call against its arithmetic limit on this machine, as JSON.

    python3 bench/cpu_limit.py --zc BUILD/zc --gemm BUILD/bench/cpu_gemm [--threads N] [--runs 5]
                               [--mode default|max-autotune|both]

The limit is the model's matmul FLOPs (every product of a call: the Linear layers, attention's
scores and values over all 128 x 128 positions, the tied LM head) at the best sgemm rate
bench/cpu_gemm measures on this machine at N threads (default: all cores), over the models'
product shapes and both libraries. zc's per call is `zc bench --child --model gpt-small
--layers 4 --steady 1` (the median of up to 2 s of calls), run --runs times on one cache; the
row gives their median and its ratio to the limit (issue 17 asks for at most 1.3). --mode
max-autotune compiles with Mode::MaxAutotune (its first process tunes, the others read the
choices); both prints one row per mode, the processes of the two modes alternating so that a
noisy period of the machine falls on both.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# zc::models::gpt_small_config(4) and gpt_small_tokens(): 4 x 128 tokens.
LAYERS, D, HEADS, VOCAB, BATCH, TOKENS, MLP = 4, 256, 4, 1024, 4, 128, 4


def gpt_small_flops():
    rows = BATCH * TOKENS
    linear = rows * (D * 3 * D + D * D + 2 * D * MLP * D)  # QKV, out, MLP up and down
    attention = 2 * BATCH * HEADS * TOKENS * TOKENS * (D // HEADS)  # scores, then values
    head = rows * D * VOCAB
    return 2 * (LAYERS * (linear + attention) + head)


def sgemm_peak(gemm, threads):
    # f32 products only: the libraries as given and oneDNN on a packed B (BM_dnnl_bf16 times
    # bf16 operands, AMX on CPUs that have it, which is not the f32 model's limit).
    only = f"^BM_(dnnl|dnnl_packed|openblas)/.*threads:{threads}/"
    p = subprocess.run([gemm, f"--benchmark_filter={only}", "--benchmark_format=json",
                        "--benchmark_min_time=0.2"], capture_output=True, text=True, check=True)
    rates = {b["name"]: b["GFLOP/s"] / 1e9 if b["GFLOP/s"] > 1e6 else b["GFLOP/s"]
             for b in json.loads(p.stdout)["benchmarks"]}
    best = max(rates, key=rates.get)
    return rates[best], best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zc", required=True)
    ap.add_argument("--gemm", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mode", choices=["default", "max-autotune", "both"], default="default")
    args = ap.parse_args()
    peak, shape = sgemm_peak(args.gemm, args.threads)
    flops = gpt_small_flops()
    limit_ms = flops / (peak * 1e9) * 1e3
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    modes = ["default", "max-autotune"] if args.mode == "both" else [args.mode]
    per_call = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as cache:
        env["ZC_CACHE_DIR"] = cache
        for _ in range(args.runs):
            for mode in modes:
                out = subprocess.run([args.zc, "bench", "--child", "--model", "gpt-small",
                                      "--layers", "4", "--steady", "1", "--mode", mode], env=env,
                                     capture_output=True, text=True, check=True).stdout.split()
                per_call[mode].append(float(out[3]) / 1e3)
    for mode in modes:
        median = statistics.median(per_call[mode])
        print(json.dumps({"schema": 1, "model": "gpt_small", "mode": mode,
                          "threads": args.threads, "gflop_per_call": flops / 1e9,
                          "sgemm_peak_gflops": peak, "sgemm_peak_at": shape, "limit_ms": limit_ms,
                          "per_call_ms": per_call[mode], "median_ms": median,
                          "ratio_to_limit": median / limit_ms}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
