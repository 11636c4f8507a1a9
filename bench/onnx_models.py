#!/usr/bin/env python3
"""zc on ONNX files from torch's exporter, next to ONNX Runtime (CPU) and torch.compile (GPU).

    onnx_models.py export DIR [--only NAME,...]
        (where torch, torchvision, timm and transformers are: the GPU host) the six full-size
        models below, random weights, eval mode, exported by torch.onnx.export (the dynamo
        exporter, torch's default; the TorchScript one where it fails), with their inputs
        (NAME.input_K.npy) and torch's output (NAME.output_0.npy), and DIR/models.txt
    onnx_models.py measure DIR --zc build/zc --device cpu|cuda [--repeats 50] [--json OUT]
        each model of DIR/models.txt, each measurement its own process (zc's for every model,
        then the peer's for every model):
          zc cold      `zc run` on an empty cache directory: load, trace, compile, first call
                       (load_ms + first_call_ms, which includes ready_ms: what a restart costs)
          zc per call  the median of --repeats calls, from a second `zc run` on that cache,
                       and the largest difference from torch's output (relative to its scale)
          peer         cpu: ONNX Runtime's CPU provider (all cores, ORT_ENABLE_ALL): session
                       creation and per-call median on the same inputs;
                       cuda: torch.compile (mode default) of the same torch model: the first
                       call from an empty Inductor cache (cold) and the per-call median
    onnx_models.py zoo ZOO_DIR --zc build/zc [--repeats 30] [--json OUT]
        every file of the test zoo (tests/data/onnx/zoo/zoo.txt) that zc loads, on this CPU:
        zc's per call against ONNX Runtime's on the stored inputs (batch 2)
Prints a table (ratio = zc / peer; below 1 zc is faster) and writes JSON.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

# The six models and their inputs, at the sizes torch.compile and ONNX Runtime were measured at.
MODELS = {
    "resnet50": "ResNet-50, 1x3x224x224",
    "convnext_tiny": "ConvNeXt-T, 2x3x224x224",
    "vit_small": "ViT-S/16 (timm), 2x3x224x224",
    "mobilenet_v3_small": "MobileNetV3-S, 2x3x224x224",
    "gpt2": "GPT-2 (transformers), ids 4x128",
    "bert_base": "BERT-base (transformers), 3 inputs 4x128",
}

# Builds one model and its inputs; runs in the export process and in torch.compile's.
BUILD = r"""
import numpy as np
import torch

class FirstTensor(torch.nn.Module):
    def __init__(self, model, key):
        super().__init__()
        self.model, self.key = model, key
    def forward(self, *args):
        out = self.model(*args)
        return out[self.key] if self.key is not None else out

def build(name):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    if name in ("resnet50", "convnext_tiny", "mobilenet_v3_small"):
        import torchvision
        model = getattr(torchvision.models, name)(weights=None)
        batch = 1 if name == "resnet50" else 2
        return model.eval(), (torch.randn(batch, 3, 224, 224, generator=g),)
    if name == "vit_small":
        import timm
        model = timm.create_model("vit_small_patch16_224", pretrained=False)
        return model.eval(), (torch.randn(2, 3, 224, 224, generator=g),)
    import transformers
    if name == "gpt2":
        cfg = transformers.GPT2Config()
        model = FirstTensor(transformers.GPT2Model(cfg), "last_hidden_state")
        ids = torch.randint(0, cfg.vocab_size, (4, 128), generator=g)
        return model.eval(), (ids,)
    if name == "bert_base":
        cfg = transformers.BertConfig()
        model = FirstTensor(transformers.BertModel(cfg), "last_hidden_state")
        ids = torch.randint(0, cfg.vocab_size, (4, 128), generator=g)
        mask = torch.ones(4, 128, dtype=torch.int64)
        types = torch.zeros(4, 128, dtype=torch.int64)
        return model.eval(), (ids, mask, types)  # BertModel's order: ids, mask, token types
    raise SystemExit("unknown model " + name)
"""


def export(args):
    exec(BUILD, globals())
    import numpy as np
    import torch
    os.makedirs(args.dir, exist_ok=True)
    lines = []
    for name in MODELS:
        if args.only and name not in args.only.split(","):
            continue
        model, inputs = build(name)  # noqa: F821 (defined by BUILD)
        with torch.no_grad():
            want = model(*inputs)
        path = os.path.join(args.dir, name + ".onnx")
        exporter = "dynamo"
        try:
            torch.onnx.export(model, inputs, path, dynamo=True, external_data=True)
        except Exception as e:  # noqa: BLE001 (the exporter raises anything)
            print(f"{name}: the dynamo exporter failed ({str(e).splitlines()[0]}); "
                  "TorchScript", file=sys.stderr)
            exporter = "torchscript"
            torch.onnx.export(model, inputs, path, dynamo=False, opset_version=17)
        for k, t in enumerate(inputs):
            np.save(os.path.join(args.dir, f"{name}.input_{k}.npy"), t.numpy())
        np.save(os.path.join(args.dir, f"{name}.output_0.npy"), want.numpy())
        lines.append(f"{name} {exporter} {len(inputs)}")
        print(f"{name}: {exporter}", flush=True)
    with open(os.path.join(args.dir, "models.txt"), "a") as f:
        f.write("".join(line + "\n" for line in lines))


def inputs_of(prefix):
    files = []
    k = 0
    while os.path.exists(f"{prefix}.input_{k}.npy"):
        files.append(f"{prefix}.input_{k}.npy")
        k += 1
    return files


def zc_run(zc, model, inputs, cache, device, repeats, out_dir=None):
    cmd = [zc, "run", model, "--repeats", str(repeats), "--device", device, "--json", "-"]
    for f in inputs:
        cmd += ["--input", f]
    if out_dir:
        cmd += ["--output", out_dir]
    # NVRTC 12.9 and later keep a cache of their own (the CUDA JIT cache, ~/.nv/ComputeCache)
    # that an empty ZC_CACHE_DIR does not empty: with it, a cold run after an earlier one found
    # its programs compiled (a ViT's first call 0.16 s so, 1.6 s without). Off: cold is cold.
    env = dict(os.environ, ZC_CACHE_DIR=cache, CUDA_CACHE_DISABLE="1")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["exit " + str(r.returncode)])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def zc_both(zc, model, inputs, device, repeats, want=None):
    """zc cold on an empty cache, then warm on it; the difference from torch's output."""
    cache = tempfile.mkdtemp(prefix="zc-onnx-bench-")
    outs = tempfile.mkdtemp(prefix="zc-onnx-out-")
    try:
        cold = zc_run(zc, model, inputs, cache, device, 1)
        warm = zc_run(zc, model, inputs, cache, device, repeats, outs)
        row = {"zc_cold": cold, "zc_warm": warm}
        if want and "error" not in warm:
            import numpy as np
            got = np.load(os.path.join(outs, "output_0.npy")).astype(np.float64)
            ref = np.load(want).astype(np.float64)
            scale = max(1.0, float(np.abs(ref).max()))
            row["rel_err"] = float(np.abs(got - ref).max()) / scale if got.shape == ref.shape \
                else "shape " + str(got.shape)
        return row
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(outs, ignore_errors=True)


ORT_CHILD = r"""
import json, sys, time
import numpy as np
import onnxruntime as ort
model, repeats, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
t0 = time.perf_counter()
s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
create = (time.perf_counter() - t0) * 1e3
feed = {i.name: np.load(f) for i, f in zip(s.get_inputs(), files)}
s.run(None, feed)
times = []
for _ in range(repeats):
    t0 = time.perf_counter()
    s.run(None, feed)
    times.append((time.perf_counter() - t0) * 1e3)
times.sort()
print(json.dumps({"session_ms": create, "per_call_ms": times[len(times) // 2]}))
"""

TORCH_CHILD = BUILD + r"""
import json, os, sys, time
name, repeats = sys.argv[1], int(sys.argv[2])
model, inputs = build(name)
model, inputs = model.cuda(), tuple(t.cuda() for t in inputs)
fast = torch.compile(model)
with torch.no_grad():
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fast(*inputs)
    torch.cuda.synchronize()
    cold = (time.perf_counter() - t0) * 1e3
    for _ in range(3):
        fast(*inputs)
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fast(*inputs)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
times.sort()
print(json.dumps({"cold_first_call_ms": cold, "per_call_ms": times[len(times) // 2],
                  "torch": torch.__version__}))
"""


def child(code, argv, env=None, timeout=600):
    r = subprocess.run([sys.executable, "-c", code] + argv, capture_output=True, text=True,
                       env=env, timeout=timeout)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["exit " + str(r.returncode)])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def fmt(v, unit="ms"):
    return f"{v:.3f} {unit}" if isinstance(v, (int, float)) else "-"


def measure(args):
    rows = []
    with open(os.path.join(args.dir, "models.txt")) as f:
        models = [line.split() for line in f if line.strip()]
    # zc first for every model, then the peer for every model: a peer's processes (Inductor's
    # compile workers, ONNX Runtime's threads) do not outlive it into zc's cold start, nor zc's
    # into the peer's.
    for name, exporter, _ in models:
        prefix = os.path.join(args.dir, name)
        row = {"model": name, "what": MODELS.get(name, name), "exporter": exporter,
               "device": args.device}
        row.update(zc_both(args.zc, prefix + ".onnx", inputs_of(prefix), args.device,
                           args.repeats, prefix + ".output_0.npy"))
        rows.append(row)
    for row in rows:
        prefix = os.path.join(args.dir, row["model"])
        if args.device == "cpu":
            row["ort"] = child(ORT_CHILD, [prefix + ".onnx", str(args.repeats)] + inputs_of(prefix))
        else:
            inductor = tempfile.mkdtemp(prefix="inductor-")
            env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=inductor)
            row["torch_compile"] = child(TORCH_CHILD, [row["model"], str(args.repeats)], env)
            shutil.rmtree(inductor, ignore_errors=True)
        report([row], args.device)
        if args.json:  # written as it goes: a run cut short keeps what it measured
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    return rows


def report(rows, device):
    for r in rows:
        warm, cold = r.get("zc_warm", {}), r.get("zc_cold", {})
        peer = r.get("ort") or r.get("torch_compile") or r.get("peer") or {}
        zc_call, peer_call = warm.get("per_call_ms"), peer.get("per_call_ms")
        ratio = zc_call / peer_call if zc_call and peer_call else None
        # A restart's cost: the file's load and the first call (which includes getting ready).
        zc_cold = cold["load_ms"] + cold["first_call_ms"] if "first_call_ms" in cold else None
        ready = cold.get("ready_ms")
        peer_cold = peer.get("cold_first_call_ms", peer.get("session_ms"))
        err = r.get("rel_err")
        errors = "".join(f"  [{k}: {v['error']}]" for k, v in r.items()
                         if isinstance(v, dict) and "error" in v)
        print(f"{r['model']:<32} {device:<4} zc {fmt(zc_call):>10}  peer {fmt(peer_call):>10}  "
              f"ratio {fmt(ratio, 'x'):>7}  cold zc {fmt(zc_cold)} (ready {fmt(ready)}) "
              f"peer {fmt(peer_cold)}"
              + (f"  err {err:.1e}" if isinstance(err, float) else "") + errors, flush=True)


def zoo(args):
    rows = []
    with open(os.path.join(args.dir, "zoo.txt")) as f:
        files = [line.split()[:4] for line in f if line.strip() and not line.startswith("#")]
    for name, exporter, family, status in files:
        if status != "ok":
            continue
        model = os.path.join(args.dir, f"{name}.{exporter}.onnx")
        inputs = inputs_of(os.path.join(args.dir, name))
        row = {"model": f"{name}.{exporter}", "family": family, "device": "cpu"}
        row.update(zc_both(args.zc, model, inputs, "cpu", args.repeats,
                           os.path.join(args.dir, name + ".output_0.npy")))
        row["ort"] = child(ORT_CHILD, [model, str(args.repeats)] + inputs)
        rows.append(row)
        report([row], "cpu")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["export", "measure", "zoo"])
    p.add_argument("dir")
    p.add_argument("--zc", default="build/zc")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--only", default="")
    p.add_argument("--json")
    args = p.parse_args()
    {"export": export, "measure": measure, "zoo": zoo}[args.mode](args)


if __name__ == "__main__":
    main()
