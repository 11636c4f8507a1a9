#!/usr/bin/env python3
"""torch's f32 matrix products on the shapes bench/cuda_gemm_algos.cpp times for cuBLASLt:
gpt12's training products, D[M,N] = A[M,K] B[K,N] with A or B stored transposed where marked.
TF32 off, as zc. One JSON object per product: the median of 20 event-timed calls after 3."""
import json
import sys

CASES = [(1024, 2304, 768, False, True), (1024, 768, 768, False, True),
         (1024, 3072, 768, False, True), (1024, 768, 3072, False, True),
         (1024, 768, 2304, False, False), (1024, 768, 768, False, False),
         (1024, 3072, 768, False, False), (1024, 768, 3072, False, False),
         (2304, 768, 1024, True, False), (768, 768, 1024, True, False),
         (3072, 768, 1024, True, False), (768, 3072, 1024, True, False)]


def main():
    import torch
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no GPU"}))
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    for m, n, k, ta, tb in CASES:
        a = torch.randn(k, m, device="cuda").t() if ta else torch.randn(m, k, device="cuda")
        b = torch.randn(n, k, device="cuda").t() if tb else torch.randn(k, n, device="cuda")
        for _ in range(3):
            torch.mm(a, b)
        times = []
        for _ in range(20):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.mm(a, b)
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) * 1e3)
        us = sorted(times)[len(times) // 2]
        print(json.dumps({"problem": f"M={m} N={n} K={k}{' A^T' if ta else ''}"
                                    f"{' B^T' if tb else ''}", "us": round(us, 1),
                          "tflops": round(2e-9 * m * n * k / us * 1e3, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
