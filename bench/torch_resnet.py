#!/usr/bin/env python3
"""torch.compile on a torchvision ResNet on one GPU: the peer of `zc run --device cuda` on the
same network exported to ONNX.

    torch_resnet.py export OUT.onnx [--depth 152] [--size 128]
    torch_resnet.py compile [--depth 152] [--batch 32] [--size 128] [--repeats 50] [--no-tf32]
    torch_resnet.py profile [--depth 152] [--batch 32] [--size 128] [--no-tf32] [--eager]

export writes torchvision's ResNet (random weights, eval mode, batch dim symbolic) with
torch.onnx.export at opset 17. compile times torch.compile's first call (cold or warm, as the
cache directory TORCHINDUCTOR_CACHE_DIR finds it) and then the median call, synchronized, and
prints one JSON line. Random weights drawn with seed 0 on both sides.
"""
import argparse
import json
import statistics
import time

import torch
import torchvision


def model(depth):
    torch.manual_seed(0)
    return getattr(torchvision.models, f"resnet{depth}")().eval()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["export", "compile", "profile"])
    p.add_argument("out", nargs="?")
    p.add_argument("--depth", type=int, default=152)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--no-tf32", action="store_true")
    p.add_argument("--eager", action="store_true")
    a = p.parse_args()
    if a.no_tf32:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    m = model(a.depth)
    if a.what == "export":
        x = torch.randn(1, 3, a.size, a.size)
        torch.onnx.export(m, (x,), a.out, dynamo=False, opset_version=17, input_names=["input"],
                          output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
        return
    m = m.cuda()
    x = torch.randn(a.batch, 3, a.size, a.size, device="cuda")
    fast = m if a.eager else torch.compile(m)
    if a.what == "profile":
        profile(fast, x)
        return
    with torch.no_grad():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fast(x)
        torch.cuda.synchronize()
        first = (time.perf_counter() - t0) * 1e3
        times = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            fast(x)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"model": f"resnet{a.depth}", "batch": a.batch, "size": a.size,
                      "first_call_ms": first, "per_call_ms": statistics.median(times),
                      "tf32": torch.backends.cudnn.allow_tf32,
                      "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}))


def profile(fn, x):
    with torch.no_grad():
        for _ in range(3):
            fn(x)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                fn(x)
            torch.cuda.synchronize()
    # Kernels only (operators' device times would count their kernels again).
    rows = [(e.device_time_total / 5e3, e.count // 5, e.key) for e in prof.key_averages()
            if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time_total > 0]
    rows.sort(reverse=True)
    for ms, n, key in rows[:25]:
        print(json.dumps({"ms_per_call": round(ms, 4), "launches": n, "kernel": key[:140]}))
    print(json.dumps({"total_ms_per_call": round(sum(r[0] for r in rows), 3),
                      "tf32": torch.backends.cudnn.allow_tf32}))


if __name__ == "__main__":
    main()
