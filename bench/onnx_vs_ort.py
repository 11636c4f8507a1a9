#!/usr/bin/env python3
"""zc and ONNX Runtime on one ONNX model, in one run, on this machine's CPU.

    onnx_vs_ort.py --zc build/zc [--model FILE.onnx | --depth 50 --size 224] [--batch 1]
                   [--processes 3] [--repeats 20] [--json OUT.json]

Without --model it writes a ResNet (bench/make_resnet_onnx.py, random weights) first. Then,
each in fresh processes:
  zc cold     `zc run` with an empty cache directory: load, capture, compile, first call;
  zc warm     `zc run` again on that cache: the first call finds everything compiled;
  zc per call the median of --repeats calls (from the warm processes);
  ORT         InferenceSession creation (the peer of zc's cold and warm start: ORT has no
              compile cache) and its per-call median, all cores, graph optimizations on
              (ORT_ENABLE_ALL, its default).
Prints a table (medians over the processes, with their range) and writes JSON.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def zc_run(zc, model, cache, batch, repeats):
    env = dict(os.environ, ZC_CACHE_DIR=cache)
    out = subprocess.run([zc, "run", model, "--dim", f"batch={batch}", "--repeats", str(repeats),
                          "--json", "-"], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


ORT_CHILD = r"""
import json, sys, time
import numpy as np
import onnxruntime as ort
model, batch, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t0 = time.perf_counter()
s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
create = (time.perf_counter() - t0) * 1e3
i = s.get_inputs()[0]
shape = [batch if not isinstance(d, int) else d for d in i.shape]
x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
t0 = time.perf_counter()
s.run(None, {i.name: x})
first = (time.perf_counter() - t0) * 1e3
times = []
for _ in range(repeats):
    t0 = time.perf_counter()
    s.run(None, {i.name: x})
    times.append((time.perf_counter() - t0) * 1e3)
times.sort()
print(json.dumps({"session_ms": create, "first_call_ms": first,
                  "per_call_ms": times[len(times) // 2], "version": ort.__version__}))
"""


def ort_run(model, batch, repeats):
    out = subprocess.run([sys.executable, "-c", ORT_CHILD, model, str(batch), str(repeats)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--zc", required=True)
    p.add_argument("--model")
    p.add_argument("--depth", type=int, default=50)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--json")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="zc-onnx-")
    try:
        model = a.model
        if not model:
            model = os.path.join(work, f"resnet{a.depth}.onnx")
            here = os.path.dirname(os.path.abspath(__file__))
            subprocess.run([sys.executable, os.path.join(here, "make_resnet_onnx.py"), model,
                            "--depth", str(a.depth), "--size", str(a.size)], check=True)
        rows = {"zc_cold": [], "zc_warm": [], "ort": []}
        for k in range(a.processes):
            cache = os.path.join(work, f"cache{k}")
            rows["zc_cold"].append(zc_run(a.zc, model, cache, a.batch, 0))
            rows["zc_warm"].append(zc_run(a.zc, model, cache, a.batch, a.repeats))
            rows["ort"].append(ort_run(model, a.batch, a.repeats))
        result = {
            "model": os.path.basename(model), "batch": a.batch, "processes": a.processes,
            "zc_cold_first_call_ms": spread([r["first_call_ms"] + r["load_ms"] for r in rows["zc_cold"]]),
            "zc_cold_ready_ms": spread([r["ready_ms"] for r in rows["zc_cold"]]),
            "zc_cold_compiler_runs": rows["zc_cold"][0]["compiler_invocations"],
            "zc_warm_first_call_ms": spread([r["first_call_ms"] + r["load_ms"] for r in rows["zc_warm"]]),
            "zc_warm_ready_ms": spread([r["ready_ms"] + r["load_ms"] for r in rows["zc_warm"]]),
            "zc_per_call_ms": spread([r["per_call_ms"] for r in rows["zc_warm"]]),
            "ort_session_ms": spread([r["session_ms"] for r in rows["ort"]]),
            "ort_first_call_ms": spread([r["first_call_ms"] for r in rows["ort"]]),
            "ort_per_call_ms": spread([r["per_call_ms"] for r in rows["ort"]]),
            "ort_version": rows["ort"][0]["version"],
        }
        w = max(len(k) for k in result)
        for k, v in result.items():
            if isinstance(v, dict):
                print(f"{k:<{w}}  {v['median']:10.2f}  ({v['min']:.2f} - {v['max']:.2f})")
            else:
                print(f"{k:<{w}}  {v}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump(result, f, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
