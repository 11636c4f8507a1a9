#!/usr/bin/env python3
"""zerocompile / torch.compile ratios for the scenarios both measure.

Usage: ratios.py FILE...

Each FILE is either `zc bench --json FILE` (one JSON object with "rows"; several, say a run of
--device cpu and one of --device cuda, are merged) or JSON lines of bench/torch_compile.py's rows
(torch_anchor.py's older lines are read too), in any order. Printed, in ms, zc beside torch.compile and
torch / zc:
  CPU   seed64: cold first call (whole model, and regional by hand), warm start, from a bundle,
        compiled and eager per call
  CUDA  seed64 and gpt12, for each torch.compile mode found: cold first call, warm start and
        from a bundle / Mega-Cache (zc's ready time, then its whole first call, which like
        torch's includes one forward pass), compiled and eager per call; and the share of zc's
        cold first call that NVRTC took
  CUDA  training step (torch_compile.py --train, zc bench's train rows): seed64 and gpt12 cold
        and warm first step, per step compiled and eager
torch's bf16 rows of gpt12 are paired with zc's gpt12-bf16 rows.
"""
import json
import statistics
import sys

# torch_anchor.py's names for what torch_compile.py calls cold, warm and load_mega.
ANCHOR_CACHE = {"cold_save_mega": "cold", "warm_local": "warm", "load_mega": "load_mega"}
# The anchor's "gpt" is nn.TransformerEncoder (ReLU, no causal mask), not zc's gpt12.
ANCHOR_MODEL = {"gpt": "anchor_gpt_encoder"}


def read_zc(path):
    """zc bench's rows by key, or None when `path` is not a zc bench --json file."""
    try:
        d = json.load(open(path))
    except json.JSONDecodeError:  # JSON lines: torch's
        return None
    return {r["key"]: r for r in d["rows"]} if isinstance(d, dict) and "rows" in d else None


def read_torch(paths):
    """Rows by (model, dtype, device, mode, scenario); failed scenarios are left out."""
    rows = {}
    for path in paths:
        for line in open(path):
            line = line.strip()
            if not line.startswith("{"):
                continue
            d = json.loads(line)
            if d.get("error"):
                continue
            if "schema" not in d:  # a torch_anchor.py line
                scale = lambda v: None if v is None else v * 1e3
                d = {"model": ANCHOR_MODEL.get(d["scenario"], d["scenario"]), "dtype": "f32",
                     "device": d["device"], "mode": "default",
                     "scenario": ANCHOR_CACHE.get(d["cache"], d["cache"]),
                     "first_call_ms": scale(d.get("first_call_s")),
                     "mega_load_ms": scale(d.get("mega_load_s")),
                     "compiled_ms_per_call": d.get("compiled_iter_ms"),
                     "eager_ms_per_call": d.get("eager_iter_ms")}
            rows[(d["model"], d["dtype"], d["device"], d["mode"], d["scenario"])] = d
    return rows


def table(title, rows):
    """rows: (what, zc ms, torch ms); a pair with a side missing is left out."""
    rows = [r for r in rows if r[1] is not None and r[2] is not None]
    if not rows:
        return False
    print(f"\n{title}")
    print(f"{'scenario':52s} {'zerocompile ms':>15s} {'torch.compile ms':>17s} {'torch/zc':>9s}")
    for what, zv, tv in rows:
        # Near parity two decimals say which side is ahead.
        ratio = "      n/a" if zv <= 0 else f"{tv / zv:8.2f}x" if tv / zv < 10 else f"{tv / zv:8.1f}x"
        print(f"{what:52s} {zv:15.3f} {tv:17.3f} {ratio}")
    return True


def plus(a, b):
    return None if a is None or b is None else a + b


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: ratios.py FILE... (zc bench --json files and torch_compile.py rows)")
    zc, torch_files = {}, []
    for path in sys.argv[1:]:
        rows = read_zc(path)
        if rows is None:
            torch_files.append(path)
        else:
            zc.update(rows)
    if not zc:
        sys.exit("ratios.py: no zc bench --json file among " + " ".join(sys.argv[1:]))
    torch = read_torch(torch_files)

    def zc_ms(key, scale=1.0):
        r = zc.get(key)
        return r["median"] * scale if r else None

    def t(model, device, mode, scenario, field, dtype="f32"):
        return (torch.get((model, dtype, device, mode, scenario)) or {}).get(field)

    # CPU, as before: caches off for zc's cold rows, an empty cache dir for torch's.
    cpu = lambda m, sc, f: t(m, "cpu", "default", sc, f)
    paired = table("CPU (seed64)", [
        ("seed64 cold first call (whole model)", zc_ms("cold/seed/64/auto/off/first_ms"),
         cpu("seed64", "cold", "first_call_ms")),
        ("seed64 cold first call (regional)", zc_ms("cold/seed/64/manual/off/first_ms"),
         cpu("seed64_regional", "cold", "first_call_ms")),
        # zc's ready time (capture, lookup, load) against torch's first call from a warm dir.
        ("seed64 warm start", zc_ms("cache/seed64/0/auto/warm/ready_ms"),
         cpu("seed64", "warm", "first_call_ms")),
        ("seed64 from a bundle / Mega-Cache", zc_ms("cache/seed64/0/auto/bundle/ready_ms"),
         cpu("seed64", "load_mega", "first_call_ms")),
        ("seed64 compiled per call", zc_ms("steady/seed64/0/auto/off/per_call_us", 1e-3),
         cpu("seed64", "cold", "compiled_ms_per_call")),
        ("seed64 eager per call", zc_ms("steady/seed64/0/eager/off/per_call_us", 1e-3),
         cpu("seed64", "cold", "eager_ms_per_call")),
    ])

    modes = sorted({k[3] for k in torch if k[2] == "cuda"})
    for mode in modes:
        rows = []
        for m in ("seed64", "gpt12"):
            z = lambda cache, metric: zc_ms(f"cuda/cache/{m}/0/auto/{cache}/{metric}")
            g = lambda sc, f: t(m, "cuda", mode, sc, f)
            # Steady state is the same in each of torch's processes: the median of the three.
            per_call = lambda f: median(g(sc, f) for sc in ("cold", "warm", "load_mega"))
            rows += [
                (f"{m} cold first call", z("cold", "first_ms"), g("cold", "first_call_ms")),
                (f"{m} warm start (zc ready)", z("warm", "ready_ms"),
                 g("warm", "first_call_ms")),
                (f"{m} warm start (zc first call)", z("warm", "first_ms"),
                 g("warm", "first_call_ms")),
                (f"{m} bundle / Mega-Cache (zc ready)", z("bundle", "ready_ms"),
                 g("load_mega", "first_call_ms")),
                (f"{m} bundle / Mega-Cache (zc first call)", z("bundle", "first_ms"),
                 g("load_mega", "first_call_ms")),
                (f"{m} bundle import + first call / load + first call",
                 plus(z("bundle", "import_ms"), z("bundle", "first_ms")),
                 plus(g("load_mega", "mega_load_ms"), g("load_mega", "first_call_ms"))),
                (f"{m} compiled per call",
                 zc_ms(f"cuda/steady/{m}/0/auto/off/per_call_us", 1e-3),
                 per_call("compiled_ms_per_call")),
                (f"{m} eager per call", zc_ms(f"cuda/steady/{m}/0/eager/off/per_call_us", 1e-3),
                 per_call("eager_ms_per_call")),
            ]
        paired |= table(f"CUDA, f32, torch.compile mode={mode}", rows)
    train_modes = sorted({k[3] for k in torch if k[2] == "cuda" and k[4].startswith("train_")})
    for mode in train_modes:
        rows = []
        for m in ("seed64", "gpt12"):
            z = lambda cache, metric: zc_ms(f"cuda/train/{m}/0/auto/{cache}/{metric}")
            g = lambda sc, f: t(m, "cuda", mode, sc, f)
            per_step = lambda f: median(g(sc, f) for sc in ("train_cold", "train_warm"))
            rows += [
                (f"{m} train cold first step", z("cold", "first_ms"),
                 g("train_cold", "first_call_ms")),
                (f"{m} train warm start (zc ready)", z("warm", "ready_ms"),
                 g("train_warm", "first_call_ms")),
                (f"{m} train warm first step", z("warm", "first_ms"),
                 g("train_warm", "first_call_ms")),
                (f"{m} train step, compiled", zc_ms(f"cuda/train/{m}/0/auto/off/step_us", 1e-3),
                 per_step("compiled_ms_per_call")),
                (f"{m} train step, eager", zc_ms(f"cuda/train/{m}/0/eager/off/step_us", 1e-3),
                 per_step("eager_ms_per_call")),
            ]
        paired |= table(f"CUDA training step, f32, torch.compile mode={mode}", rows)
    if not paired:
        print("no scenario was measured by both zc bench and torch (a zc run without the CUDA "
              "rows, or torch rows that all failed?)")

    shares = [(m, zc.get(f"cuda/cache/{m}/0/auto/cold/first_ms")) for m in ("seed64", "gpt12")]
    shares = [(m, r) for m, r in shares if r and "nvrtc_ms" in r]
    if shares:
        print("\nNVRTC in zc's cold first call on CUDA (summed over the kernels it built, which "
              "may run side by side)")
        for m, r in shares:
            print(f"  {m:8s} {r['nvrtc_ms']:10.1f} ms of {r['median']:10.1f} ms "
                  f"({100 * r.get('nvrtc_share', 0):.0f}%), {r['compiler_invocations']} NVRTC runs")

    # gpt12 in bf16: zc's gpt12-bf16 rows against torch's bf16 rows of gpt12.
    for mode in modes:
        g = lambda sc, f: t("gpt12", "cuda", mode, sc, f, dtype="bf16")
        z = lambda cache, metric: zc_ms(f"cuda/cache/gpt12-bf16/0/auto/{cache}/{metric}")
        per_call = lambda f: median(g(sc, f) for sc in ("cold", "warm", "load_mega"))
        table(f"CUDA, gpt12 bf16, torch.compile mode={mode}", [
            ("gpt12 bf16 cold first call", z("cold", "first_ms"), g("cold", "first_call_ms")),
            ("gpt12 bf16 warm start (zc ready)", z("warm", "ready_ms"),
             g("warm", "first_call_ms")),
            ("gpt12 bf16 warm start (zc first call)", z("warm", "first_ms"),
             g("warm", "first_call_ms")),
            ("gpt12 bf16 compiled per call",
             zc_ms("cuda/steady/gpt12-bf16/0/auto/off/per_call_us", 1e-3),
             per_call("compiled_ms_per_call")),
            ("gpt12 bf16 eager per call",
             zc_ms("cuda/steady/gpt12-bf16/0/eager/off/per_call_us", 1e-3),
             per_call("eager_ms_per_call")),
        ])


if __name__ == "__main__":
    main()
