#!/usr/bin/env python3
"""torch.compile's dynamic shapes on the GPT that tests/tools/dynamic_lengths calls with zc.

    python3 bench/torch_dynamic.py [--device cuda|cpu] [--layers 12] [--d-model 768]
                                   [--heads 12] [--batch 4] [--steady 20]
                                   [--modes auto,marked,static] [LENGTH ...]

The model is bench/torch_compile.py's GPT (zc::models::gpt layer by layer: token and position
embeddings, pre-LayerNorm blocks, a final LayerNorm, an LM head tied to the token embedding;
vocabulary 1024, positions up to the longest length or 128), in eval mode under no_grad, f32
with TF32 off. Each mode runs in its own fresh python process with an empty Inductor cache and
calls the compiled model once per length, in the order given (default: 16 32 24 40 64 100 77
120, the lengths of zc's dynamic-shape tests):
  auto    torch.compile(model): the first length static, a second one recompiles with the
          length symbolic (automatic dynamic shapes)
  marked  torch._dynamo.mark_dynamic(tokens, 1) on every call: symbolic from the first
  static  torch.compile(model, dynamic=False): every length compiles

Output: one JSON object per mode on stdout: per length the first call's ms (up to its result
on the device), the recompiles Dynamo counted during it, and with --steady N the median of N
more calls; the totals. Exit code 0 when every mode ran, 1 when one failed, 3 when nothing could
run (no torch, or no GPU for cuda).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dynamic_args import add_model_args, lengths_and_modes  # noqa: E402


def child(spec):
    """One mode in this process; prints its row after "RESULT "."""
    import torch
    from torch_compile import modules, setup
    device, cuda, sync = setup(torch, spec["device"])

    torch.manual_seed(0)
    lengths = spec["lengths"]
    model = modules(torch).GPT(1024, max(128, max(lengths)), spec["layers"], spec["heads"],
                               spec["d_model"]).to(device).eval()
    mode = spec["mode"]
    dynamic = {"static": False, "all": True}.get(mode)  # auto and marked: torch's default
    compiled = torch.compile(model, dynamic=dynamic)
    from torch._dynamo.utils import counters
    rows = []
    with torch.no_grad():
        for t in lengths:
            tokens = torch.randint(0, 1024, (spec["batch"], t), device=device)
            if mode == "marked":
                torch._dynamo.mark_dynamic(tokens, 1)
            before = sum(counters["recompiles"].values()) if "recompiles" in counters else 0
            sync()
            start = time.perf_counter()
            compiled(tokens)
            sync()
            first = (time.perf_counter() - start) * 1e3
            after = sum(counters["recompiles"].values()) if "recompiles" in counters else 0
            row = {"length": t, "first_call_ms": first, "recompiles": after - before}
            if spec["steady"] > 0:
                times = []
                for _ in range(spec["steady"]):
                    start = time.perf_counter()
                    compiled(tokens)
                    sync()
                    times.append((time.perf_counter() - start) * 1e3)
                times.sort()
                row["steady_ms"] = times[len(times) // 2]
            rows.append(row)
    out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(device) if cuda else None,
           "calls": rows, "total_first_call_ms": sum(r["first_call_ms"] for r in rows),
           "unique_graphs": counters["stats"].get("unique_graphs")}
    print("RESULT " + json.dumps(out), flush=True)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(json.loads(sys.argv[2]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_model_args(ap, device="cuda", layers=12, d_model=768, heads=12)
    args = ap.parse_args()
    lengths, modes = lengths_and_modes(ap, args)
    status = 0
    for mode in modes:
        spec = {"device": args.device, "layers": args.layers, "d_model": args.d_model,
                "heads": args.heads, "batch": args.batch, "steady": args.steady,
                "mode": mode, "lengths": lengths}
        row = {"schema": 1, "tool": "torch.compile", "mode": mode, "device": args.device,
               "layers": args.layers, "d_model": args.d_model, "batch": args.batch,
               "error": None}
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache,
                       TRITON_CACHE_DIR=os.path.join(cache, "triton"))
            try:
                p = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)],
                                   env=env, capture_output=True, text=True, timeout=args.timeout)
                result = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
                if p.returncode != 0 or not result:
                    if "No module named 'torch'" in p.stderr:
                        print("torch_dynamic.py: torch is not installed", file=sys.stderr)
                        return 3
                    row["error"] = (p.stderr or p.stdout)[-2000:] or f"exit {p.returncode}"
                else:
                    row.update(json.loads(result[0][len("RESULT "):]))
            except subprocess.TimeoutExpired:
                row["error"] = f"timed out after {args.timeout} s"
        status = status or (1 if row["error"] else 0)
        print(json.dumps(row), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
