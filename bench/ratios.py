#!/usr/bin/env python3
"""zerocompile / torch.compile ratios for the CPU scenarios both measure.

Usage: ratios.py ZC_BENCH_JSON TORCH_ANCHOR_JSONL
The zc file is `zc bench --json`; the torch file holds torch_anchor.py's JSON lines.
"""
import json
import sys

zc = {r["key"]: r for r in json.load(open(sys.argv[1]))["rows"]}
torch = {}
for line in open(sys.argv[2]):
    line = line.strip()
    if line.startswith("{"):
        d = json.loads(line)
        if "error" not in d:
            torch[(d["scenario"], d["device"], d["cache"])] = d


def zc_ms(key):
    r = zc.get(key)
    return r["median"] if r else None


# (what, zc value in ms, torch value in ms)
rows = []
def add(what, z, t):
    if z is not None and t is not None:
        rows.append((what, z, t))

t = lambda sc, cache, field: (torch.get((sc, "cpu", cache)) or {}).get(field)
s = lambda v: None if v is None else v * 1e3
# Cold first call of the whole model (caches off for zc, an empty cache dir for torch).
add("seed64 cold first call (whole model)", zc_ms("cold/seed/64/auto/off/first_ms"), s(t("seed64", "cold_save_mega", "first_call_s")))
add("seed64 cold first call (regional)", zc_ms("cold/seed/64/manual/off/first_ms"), s(t("seed64_regional", "cold_save_mega", "first_call_s")))
# Warm: zc's ready time (capture+lookup+load) vs torch's first call with a warm cache dir.
add("seed64 warm start", zc_ms("cache/seed64/0/auto/warm/ready_ms"), s(t("seed64", "warm_local", "first_call_s")))
add("seed64 from a bundle / Mega-Cache", zc_ms("cache/seed64/0/auto/bundle/ready_ms"), s(t("seed64", "load_mega", "first_call_s")))
# Steady state per call.
z = zc.get("steady/seed64/0/auto/off/per_call_us")
add("seed64 compiled per call", z and z["median"] / 1e3, t("seed64", "cold_save_mega", "compiled_iter_ms"))
z = zc.get("steady/seed64/0/eager/off/per_call_us")
add("seed64 eager per call", z and z["median"] / 1e3, t("seed64", "cold_save_mega", "eager_iter_ms"))

print(f"{'scenario':44s} {'zerocompile ms':>15s} {'torch.compile ms':>17s} {'torch/zc':>9s}")
for what, zv, tv in rows:
    print(f"{what:44s} {zv:15.3f} {tv:17.3f} {tv / zv:9.1f}x")
