#!/usr/bin/env python3
"""A package's start against a warm cache's, in fresh processes, as JSON.

    python3 bench/package_start.py --zc BUILD/zc [--repeats 5] [--models seed64,gpt-small]
                                   [--dynamic-dim I:D:MIN:MAX [--length T]] [--json FILE]

Per model (zc's bench models: seed64 on a [10, 10] input, gpt-small on 4 x 128 tokens):
  package  `zc package --model M -o M.zcpkg`, then each repeat a fresh `zc run M.zcpkg` with
           ZC_CXX naming no compiler and an empty ZC_CACHE_DIR: the package's load, its first
           call and their sum (load_plus_first_ms), measured inside the process;
  warm     each repeat a fresh `zc bench --child` (what `zc bench` measures as the warm start)
           on a cache directory that an earlier process filled: capture and the caches' loads
           (ready_ms) and the first call including them (first_ms).
With --dynamic-dim, the package serves that range (`zc package --dynamic-dim`), and with
--length its runs call it on zero tokens of shape [4, T] (gpt-small): a length bound on its
first call from the package's size template. Both also report the process's wall time from spawn to exit (process_ms: the program's own
start, libzc's loading and the model's construction included). Figures are medians over the
repeats; the first warm process after the cold one is not counted. Prints one JSON object.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run(cmd, env):
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    ms = (time.perf_counter() - t) * 1e3
    if p.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), p.stdout, p.stderr))
    return p.stdout, ms


def median(xs):
    return round(statistics.median(xs), 3)


def write_tokens(path, shape):
    """Zero int64 tokens of `shape` as a .npy file (no numpy needed)."""
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': (%s), }" % \
        "".join("%d, " % d for d in shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    count = 1
    for d in shape:
        count *= d
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        f.write(bytes(8 * count))


def bench_model(zc, model, repeats, root, dynamic_dim=None, length=None):
    child = ["--model", "seed", "--layers", "64"] if model == "seed64" else \
            ["--model", "gpt-small", "--layers", "4"]
    cache = os.path.join(root, model + "-cache")
    empty = os.path.join(root, model + "-empty")
    os.makedirs(empty)
    env = dict(os.environ, ZC_CACHE_DIR=cache)
    pkg = os.path.join(root, model + ".zcpkg")
    ranged = ["--dynamic-dim", dynamic_dim] if dynamic_dim else []
    out, build_ms = run([zc, "package", "--model", model, "-o", pkg, "--json", "-"] + ranged, env)
    inputs = []
    if length:
        tokens = os.path.join(root, model + "-tokens.npy")
        write_tokens(tokens, [4, length])
        inputs = ["--input", tokens]
    built = json.loads(out.strip().splitlines()[-1])
    # The cold start fills the cache; it is not measured.
    run([zc, "bench", "--child"] + child, env)
    warm_ready, warm_first, warm_proc = [], [], []
    pkg_load, pkg_first, pkg_total, pkg_proc = [], [], [], []
    serve_env = dict(os.environ, ZC_CACHE_DIR=empty, ZC_CXX="/nonexistent/c++")
    for _ in range(repeats):
        out, ms = run([zc, "bench", "--child"] + child, env)
        fields = out.split()
        if int(fields[4]) != 0:
            sys.exit("the warm start of %s ran the compiler: %s" % (model, out))
        warm_ready.append(float(fields[0]))
        warm_first.append(float(fields[1]))
        warm_proc.append(ms)
        out, ms = run([zc, "run", pkg, "--repeats", "0", "--json", "-"] + inputs, serve_env)
        r = json.loads(out.strip().splitlines()[-1])
        if r["compiler_invocations"] != 0 or r["graphs_captured"] != 0:
            sys.exit("the package of %s compiled or captured: %s" % (model, out))
        pkg_load.append(r["load_ms"])
        pkg_first.append(r["first_call_ms"])
        pkg_total.append(r["load_ms"] + r["first_call_ms"])
        pkg_proc.append(ms)
    return {
        "model": model,
        "dynamic_dim": dynamic_dim,
        "length": length,
        "package_bytes": built["bytes"],
        "package_build_ms": round(built["build_ms"], 1),
        "package": {"load_ms": median(pkg_load), "first_call_ms": median(pkg_first),
                    "load_plus_first_ms": median(pkg_total), "process_ms": median(pkg_proc)},
        "warm_cache": {"ready_ms": median(warm_ready), "first_ms": median(warm_first),
                       "process_ms": median(warm_proc)},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zc", required=True, help="the zc command line of the build")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--models", default="seed64,gpt-small")
    ap.add_argument("--dynamic-dim", help="I:D:MIN:MAX: the package serves that range")
    ap.add_argument("--length", type=int, help="with --dynamic-dim: run on [4, LENGTH] tokens")
    ap.add_argument("--json", help="also write the JSON here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as root:
        rows = [bench_model(os.path.abspath(args.zc), m, args.repeats, root, args.dynamic_dim,
                            args.length)
                for m in args.models.split(",")]
    result = {"schema": 1, "bench": "package_start", "repeats": args.repeats,
              "cpus": os.cpu_count(), "rows": rows}
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
