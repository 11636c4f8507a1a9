"""torch eager on CUDA, the same ops and shapes as bench/cuda_ops.cpp, for reference.

    python3 bench/torch_cuda_eager.py [--json FILE]

Steady per-op time: 100 calls, then torch.cuda.synchronize(), divided by 100; the median of 5.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    a = torch.randn(1024, 1024, device=dev)
    b = torch.randn(1024, 1024, device=dev)
    h = torch.randn(1024, 768, device=dev)
    w = torch.randn(3072, 768, device=dev)
    g = torch.ones(768, device=dev)
    be = torch.zeros(768, device=dev)
    table = torch.randn(50257, 768, device=dev)
    ids = torch.randint(0, 50257, (8, 128), device=dev)
    q = torch.randn(8, 12, 128, 64, device=dev)
    # The same numerics contract as zc's default: no TF32 in f32 products.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ops = [
        ("exp", lambda: torch.exp(a)),
        ("add", lambda: a + b),
        ("mul_scalar", lambda: a * 0.5),
        ("gelu", lambda: F.gelu(a)),
        ("cast_f16", lambda: a.to(torch.float16)),
        ("sum_dim1", lambda: a.sum(1)),
        ("softmax", lambda: torch.softmax(a, -1)),
        ("layer_norm", lambda: F.layer_norm(h, (768,), g, be)),
        ("matmul_1024", lambda: a @ b),
        ("linear_1024x768x3072", lambda: F.linear(h, w)),
        ("embedding", lambda: F.embedding(ids, table)),
        ("cat", lambda: torch.cat([a, b], 0)),
        ("transpose_contiguous", lambda: a.t().contiguous()),
        ("attention_causal", lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True)),
    ]
    rows = []
    for name, f in ops:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        y = f()
        torch.cuda.synchronize()
        first_ms = (time.perf_counter() - t0) * 1e3
        for _ in range(10):
            y = f()
        torch.cuda.synchronize()
        ts = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(100):
                y = f()
            torch.cuda.synchronize()
            ts.append((time.perf_counter() - t0) * 1e6 / 100)
        ts.sort()
        rows.append({"op": name, "first_ms": first_ms, "steady_us": ts[2]})
        print(f"{name:24s} first {first_ms:9.2f} ms   steady {ts[2]:9.1f} us", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                       "ops": rows}, f)


if __name__ == "__main__":
    main()
