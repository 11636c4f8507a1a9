#!/usr/bin/env python3
"""torch's causal scaled_dot_product_attention on the CPU, on the shapes bench/codegen.cpp's
BM_Attention times for zc: [4, 4, 128, 64] (gpt-small's), then [1, 12, T, 64] for T = 1024 and
4096. f32, all of the CPU's threads (torch.get_num_threads()). One JSON object per shape: the
median of up to 2 s of calls after 3 (at least 5)."""
import json
import time


def main():
    import torch
    torch.manual_seed(0)
    for batch, heads, t in [(4, 4, 128), (1, 12, 1024), (1, 12, 4096)]:
        q, k, v = (torch.randn(batch, heads, t, 64) for _ in range(3))
        call = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        for _ in range(3):
            call()
        times, until = [], time.perf_counter() + 2
        while len(times) < 5 or (time.perf_counter() < until and len(times) < 1000):
            start = time.perf_counter()
            call()
            times.append((time.perf_counter() - start) * 1e3)
        ms = sorted(times)[len(times) // 2]
        print(json.dumps({"shape": [batch, heads, t, 64], "ms": round(ms, 3),
                          "threads": torch.get_num_threads(),
                          "gflops": round(2e-6 * batch * heads * t * t * 64 / ms, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
