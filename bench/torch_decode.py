"""torch.compile's decoding, as the gpt-fast recipe runs it, beside bench/llm_decode (zc).

A plain-torch Llama (RMSNorm, rotary embeddings, SwiGLU, grouped-query attention) with a static
KV cache per layer, updated with index_copy_ at the step's positions; the prompt runs once
(prefill, compiled with dynamic shapes) and then one decode step per token, compiled with
mode="reduce-overhead" and fullgraph=True (CUDA graphs on a GPU). Greedy. The same shapes and
the same JSON fields as bench/llm_decode:

  python3 bench/torch_decode.py [--device cuda|cpu] [--prompt 128] [--new 256] [--batch 1]
                                [--runs 3] [--small] [--eager]

Run 0 is cold (an empty Inductor cache when TORCHINDUCTOR_CACHE_DIR names a fresh directory):
its first token includes the compiles. TinyLlama-1.1B's shape, random weights, bf16 on a GPU.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

TINYLLAMA = dict(vocab=32000, hidden=2048, inner=5632, layers=22, heads=32, kv_heads=4,
                 max_pos=2048, eps=1e-5, theta=10000.0)
SMALL = dict(vocab=512, hidden=128, inner=352, layers=4, heads=8, kv_heads=2, max_pos=1024,
             eps=1e-5, theta=10000.0)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.kv_heads = c["heads"], c["kv_heads"]
        self.dim = c["hidden"] // c["heads"]
        self.q = nn.Linear(c["hidden"], self.heads * self.dim, bias=False)
        self.k = nn.Linear(c["hidden"], self.kv_heads * self.dim, bias=False)
        self.v = nn.Linear(c["hidden"], self.kv_heads * self.dim, bias=False)
        self.o = nn.Linear(self.heads * self.dim, c["hidden"], bias=False)
        self.k_cache = None
        self.v_cache = None

    def allocate(self, batch, length, dtype, device):
        shape = (batch, self.kv_heads, length, self.dim)
        if self.k_cache is not None and self.k_cache.shape == shape:
            return  # kept, as gpt-fast's setup_caches is once: the compiled step stays valid
        self.k_cache = torch.zeros(shape, dtype=dtype, device=device)
        self.v_cache = torch.zeros(shape, dtype=dtype, device=device)

    def forward(self, x, cos, sin, pos, mask):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.heads, self.dim).transpose(1, 2)
        k = self.k(x).view(b, t, self.kv_heads, self.dim).transpose(1, 2)
        v = self.v(x).view(b, t, self.kv_heads, self.dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask,
                                           enable_gqa=True)
        return self.o(y.transpose(1, 2).reshape(b, t, self.heads * self.dim))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attn = Attention(c)
        self.gate = nn.Linear(c["hidden"], c["inner"], bias=False)
        self.up = nn.Linear(c["hidden"], c["inner"], bias=False)
        self.down = nn.Linear(c["inner"], c["hidden"], bias=False)
        self.n1, self.n2 = RMSNorm(c["hidden"], c["eps"]), RMSNorm(c["hidden"], c["eps"])

    def forward(self, x, cos, sin, pos, mask):
        h = x + self.attn(self.n1(x), cos, sin, pos, mask)
        g = self.n2(h)
        return h + self.down(F.silu(self.gate(g)) * self.up(g))


class Llama(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed = nn.Embedding(c["vocab"], c["hidden"])
        self.layers = nn.ModuleList(Layer(c) for _ in range(c["layers"]))
        self.norm = RMSNorm(c["hidden"], c["eps"])
        self.head = nn.Linear(c["hidden"], c["vocab"], bias=False)
        dim = c["hidden"] // c["heads"]
        inv = 1.0 / (c["theta"] ** (torch.arange(0, dim, 2).float() / dim))
        ang = torch.outer(torch.arange(c["max_pos"]).float(), inv)
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)
        self.length = 0

    def allocate(self, batch, length):
        p = self.head.weight
        for layer in self.layers:
            layer.attn.allocate(batch, length, p.dtype, p.device)
        self.length = length

    def forward(self, ids, pos):
        cos, sin = self.cos[pos].to(self.head.weight.dtype), self.sin[pos].to(self.head.weight.dtype)
        keys = torch.arange(self.length, device=ids.device)
        mask = keys[None, :] <= pos[:, None]  # [T, L]: a query at p sees 0..p
        h = self.embed(ids)
        for layer in self.layers:
            h = layer(h, cos, sin, pos, mask)
        return self.head(self.norm(h))


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def generate(model, prefill, step, ids, new, device):
    b, t = ids.shape
    model.allocate(b, t + new)
    t0 = time.perf_counter()
    logits = prefill(model, ids, torch.arange(t, device=device))
    token = logits[:, -1].argmax(-1, keepdim=True)
    sync(device)
    first = (time.perf_counter() - t0) * 1e3
    out = [token]
    for i in range(new - 1):
        pos = torch.tensor([t + i], device=device)
        token = step(model, token, pos)[:, -1].argmax(-1, keepdim=True)
        out.append(token.clone())
    sync(device)
    total = (time.perf_counter() - t0) * 1e3
    return torch.cat(out, 1), first, total - first


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--eager", action="store_true")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"skipped": "no GPU"}))
        return
    torch.manual_seed(0)
    cuda = args.device == "cuda"
    with torch.device(args.device):
        model = Llama(SMALL if args.small else TINYLLAMA)
    for p in model.parameters():  # initializer_range 0.02, as transformers draws
        if p.dim() > 1:
            nn.init.normal_(p, std=0.02)
    model = model.to(torch.bfloat16 if cuda else torch.float32).eval()

    def run(m, ids, pos):
        return m(ids, pos)

    prefill, step = run, run
    if not args.eager:
        prefill = torch.compile(run, dynamic=True, fullgraph=True)
        step = torch.compile(run, mode="reduce-overhead" if cuda else "default", fullgraph=True)
    ids = torch.randint(0, model.embed.num_embeddings, (args.batch, args.prompt),
                        device=args.device)
    with torch.inference_mode():
        for r in range(args.runs):
            tokens, first, decode = generate(model, prefill, step, ids, args.new, args.device)
            steps = tokens.shape[1]
            print(json.dumps({
                "bench": "torch_decode", "model": "llama-small" if args.small
                else "tinyllama-1.1b-shape", "device": args.device,
                "dtype": "bf16" if cuda else "f32", "compiled": not args.eager,
                "batch": args.batch, "prompt": args.prompt, "new_tokens": steps, "run": r,
                "first_token_ms": round(first, 3), "decode_ms": round(decode, 3),
                "tokens_per_s": round((steps - 1) / (decode / 1e3), 1) if decode > 0 else 0.0}),
                flush=True)


if __name__ == "__main__":
    main()
