#!/usr/bin/env python3
"""zc's dynamic shapes over many sequence lengths, as JSON beside bench/torch_dynamic.py's.

    python3 bench/zc_dynamic.py --tool BUILD/tests/tools/dynamic_lengths [--device cpu|cuda]
                                [--layers 4] [--d-model 256] [--heads 4] [--batch 4]
                                [--steady 20] [--modes auto,marked,static,all] [--runs 1]
                                [LENGTH ...]

Runs tests/tools/dynamic_lengths once per mode, each in a fresh process with an empty cache
directory (ZC_CACHE_DIR), over the lengths in the order given (default: 16 32 24 40 64 100 77
120), and prints one JSON object per mode: per length the first call's ms (capture, compile or
template check, and the run, up to its result on the device), the compiler runs during it, the
graphs a size template served, the largest difference from eager and, with --steady N, the
median of N more calls; the total over the lengths. `single_cold_ms` in the static row is the
first length's first call: one cold compile, what the other totals are measured against.
With --runs N each mode runs N times (fresh processes and caches each time, one row per run,
"run" numbering them): compile times on a busy host vary from run to run. --warmup N (default
1) runs every mode N times first without reporting it: the first processes on a fresh GPU host
pay for reading NVRTC and the CUDA libraries from disk.

    python3 bench/zc_dynamic.py --table zc.jsonl [torch.jsonl]

prints the two side by side: per mode the median over runs of the total, its ratio to the
median single cold compile, and per length the dynamic code's steady time over the static
code's (first runs).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from dynamic_args import add_model_args, lengths_and_modes


def run_mode(args, mode, lengths):
    row = {"schema": 1, "tool": "zc", "mode": mode, "device": args.device,
           "layers": args.layers, "d_model": args.d_model, "batch": args.batch, "error": None}
    cmd = [args.tool, "--dynamic", mode, "--device", args.device, "--layers", str(args.layers),
           "--d-model", str(args.d_model), "--heads", str(args.heads), "--batch",
           str(args.batch), "--steady", str(args.steady)] + [str(t) for t in lengths]
    with tempfile.TemporaryDirectory() as cache:
        # CUDA_CACHE_DISABLE: NVRTC's own cache of programs would serve a second run's compiles.
        env = dict(os.environ, ZC_CACHE_DIR=cache, CUDA_CACHE_DISABLE="1")
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    calls = []
    for line in p.stdout.splitlines():
        w = line.split()
        if not w or w[0] != "call":
            continue
        kv = dict(zip(w[2::2], w[3::2]))
        call = {"length": int(w[1]), "first_call_ms": float(kv["ms"]),
                "compiler_runs": int(kv["compiler_runs"]),
                "template_hits": int(kv["template_hits"]), "recompiles": int(kv["recompiles"]),
                "max_diff": float(kv["max_diff"])}
        if "steady_ms" in kv:
            call["steady_ms"] = float(kv["steady_ms"])
        calls.append(call)
    if p.returncode != 0 or len(calls) != len(lengths):
        row["error"] = (p.stdout + p.stderr)[-2000:] or f"exit {p.returncode}"
        return row
    row["calls"] = calls
    row["total_first_call_ms"] = sum(c["first_call_ms"] for c in calls)
    row["compiling_calls"] = sum(1 for c in calls if c["compiler_runs"] > 0)
    if mode == "static":
        row["single_cold_ms"] = calls[0]["first_call_ms"]
    return row


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def table(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            rows += [json.loads(x) for x in f if x.strip().startswith("{")]
    for tool in ("zc", "torch.compile"):
        runs = {}
        for r in rows:
            if r.get("tool") == tool and not r.get("error"):
                runs.setdefault(r["mode"], []).append(r)
        if not runs:
            continue
        mine = {mode: rs[0] for mode, rs in runs.items()}
        static = mine.get("static")
        single = median([r["calls"][0]["first_call_ms"] for r in runs["static"]]) \
            if static else None
        print(f"{tool}: total first-call ms over {len(next(iter(mine.values()))['calls'])} lengths"
              + (f"; a single cold compile (static, first length) {single:.1f} ms" if single
                 else ""))
        for mode in ("auto", "marked", "static", "all"):
            if mode not in runs:
                continue
            totals = [r["total_first_call_ms"] for r in runs[mode]]
            ratio = f"  {median(totals) / single:.2f}x a single cold compile" if single else ""
            each = " (runs: " + ", ".join(f"{t:.1f}" for t in totals) + ")" \
                if len(totals) > 1 else ""
            print(f"  {mode:7s} {median(totals):10.1f} ms{ratio}{each}")
        if static:
            for mode in ("auto", "marked", "all"):
                if mode not in mine or "steady_ms" not in static["calls"][0]:
                    continue
                ratios = [d["steady_ms"] / s["steady_ms"]
                          for d, s in zip(mine[mode]["calls"], static["calls"])]
                print(f"  steady {mode}/static per length: " +
                      " ".join(f"{c['length']}:{x:.2f}" for c, x in zip(static["calls"], ratios)))
    for r in rows:
        if r.get("error"):
            print(f"{r.get('tool')} {r.get('mode')}: error: {r['error'][-300:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", help="the dynamic_lengths executable")
    ap.add_argument("--table", nargs="+", metavar="JSONL")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=1,
                    help="rounds of every mode run first and not reported (default 1)")
    add_model_args(ap, device="cpu", layers=4, d_model=256, heads=4)
    args = ap.parse_args()
    if args.table:
        table(args.table)
        return 0
    if not args.tool:
        ap.error("--tool (or --table) is required")
    lengths, modes = lengths_and_modes(ap, args)
    status = 0
    # The first processes of a fresh GPU host read NVRTC, the CUDA libraries and the driver's
    # state from disk: on the H100 host the first process of each mode took 0.8-1.7 s for a
    # call that costs 40-60 ms afterwards, which is no compile time of zc's. They run first.
    for _ in range(args.warmup):
        for mode in modes:
            run_mode(args, mode, lengths)
    for run in range(args.runs):
        for mode in modes:
            row = run_mode(args, mode, lengths)
            row["run"] = run
            status = status or (1 if row["error"] else 0)
            print(json.dumps(row), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
