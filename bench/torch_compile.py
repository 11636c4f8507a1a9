#!/usr/bin/env python3
"""torch.compile on the models `zc bench` measures, built as zc builds them.

    python3 bench/torch_compile.py [--models seed64,gpt12] [--device cuda|cpu]
                                   [--mode default|reduce-overhead] [--dtypes f32,bf16]
                                   [--train] [--profile] [--json FILE] [--timeout S]

Models (zc's reference models, mirrored layer by layer; weights drawn from the same
distributions, not the same values):
  seed64           Linear(10, 10), then 64 x [Linear(10, 10), ReLU, sigmoid, Linear(10, 10),
                   ReLU]; input [10, 10]  (zc::models::seed_model(64))
  seed64_regional  the same model with each of its 64 layers wrapped in torch.compile by hand
                   (the regional-compilation recipe; zc's "manual" regions)
  gpt12            12 pre-LayerNorm transformer blocks of d_model 768 and 12 heads, as
                   zc::nn::TransformerBlock: x + attn(ln1(x)), then h + proj(gelu_tanh(fc(ln2(h))))
                   with a fused input projection Linear(768, 2304), causal scaled dot-product
                   attention and an MLP of 3072; no embeddings, no LM head; input [8, 128, 768]
                   in eval mode (zc bench's "gpt12"; the shape of torch.compile's transformer
                   figures, whose nn.TransformerEncoder differs: ReLU MLP, no causal mask)
  gpt_small        zc::models::gpt(gpt_small_config(4)): token and position embeddings, 4 of those
                   blocks at d_model 256 and 4 heads, a final LayerNorm and the LM head tied to
                   the token embedding (vocabulary 1024); input 4 x 128 tokens (zc bench's
                   "gpt-small", the model of the CPU speed figures)

Every scenario runs in its own fresh python process, as a user's job would start:
  cold       an empty TORCHINDUCTOR_CACHE_DIR (and TRITON_CACHE_DIR under it); then saves the
             Mega-Cache blob (torch.compiler.save_cache_artifacts)
  warm       the same cache directory again
  load_mega  an empty cache directory warmed by torch.compiler.load_cache_artifacts(blob)

What is timed: `import torch` (import_ms); the blob's load (mega_load_ms); the first call of the
compiled model, Dynamo, AOTAutograd, Inductor (or their cache loads) and one forward pass, up to
its result on the device (first_call_ms); per call in steady state, compiled and eager: 3 calls
to settle, then the median of 50 (call; synchronize) (compiled_ms_per_call, eager_ms_per_call).
TF32 is off (allow_tf32 = False for matmul and cuDNN): zc computes f32 in full precision by
default. dtype bf16 (gpt12 only: model.to(torch.bfloat16), bf16 input) is reported as its own
rows.

--train times a training step instead of a forward, as `zc bench`'s train rows do: the model
in train mode, MSE loss against a fixed random target, backward, torch.optim.AdamW (lr 1e-4,
its default foreach implementation, not compiled: the recipe of torch.compile's training
figures); scenarios train_cold and train_warm (fresh processes, an empty cache directory and
then the same one); first_call_ms is the whole first step, compiled_ms_per_call and
eager_ms_per_call a step in steady state (the eager model with its own optimizer).

--mode default is what the published torch.compile figures for these two models used.
--mode reduce-overhead adds CUDA graphs (one graph launch per call), the launch-overhead
removal that zc's CUDA backend is to have by default; bench/gpu-host.sh runs both.

Output: one JSON object per scenario on stdout (and all of them in --json FILE), each with
every key of SCHEMA below; a scenario that failed has "error" set and null figures. Exit code 0
when every scenario ran, 1 when one failed, 3 when nothing could run (no torch, or no GPU for
--device cuda), with the reason on stderr.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

SCHEMA = ("schema", "model", "dtype", "device", "mode", "scenario", "import_ms",
          "mega_load_ms", "first_call_ms", "compiled_ms_per_call", "eager_ms_per_call",
          "mega_bytes", "graphs", "params", "process_ms", "torch", "gpu", "error")
SCHEMA_VERSION = 1
MODELS = ("seed64", "seed64_regional", "gpt12", "gpt_small")
SCENARIOS = ("cold", "warm", "load_mega")
TRAIN_SCENARIOS = ("train_cold", "train_warm")


def modules(torch):
    """zc's reference modules in torch, layer by layer (see the module docstring); GPT is
    zc::models::gpt (token and position embeddings, the blocks, a final LayerNorm and an LM head
    tied to the token embedding), which bench/torch_dynamic.py calls at many lengths."""
    nn, F = torch.nn, torch.nn.functional

    class SeedLayer(nn.Module):
        def __init__(self, d=10):
            super().__init__()
            self.linear1 = nn.Linear(d, d)
            self.relu1 = nn.ReLU()
            self.linear2 = nn.Linear(d, d)
            self.relu2 = nn.ReLU()

        def forward(self, x):
            return self.relu2(self.linear2(torch.sigmoid(self.relu1(self.linear1(x)))))

    class SeedModel(nn.Module):
        def __init__(self, n_layers=64, d=10, wrap=lambda m: m):
            super().__init__()
            self.linear = nn.Linear(d, d)
            self.layers = nn.ModuleList([wrap(SeedLayer(d)) for _ in range(n_layers)])

        def forward(self, x):
            y = self.linear(x)
            for layer in self.layers:
                y = layer(y)
            return y

    class MultiheadAttention(nn.Module):
        # One fused input projection (d -> 3d) split into q, k, v, as GPT-2's c_attn and zc.
        def __init__(self, d_model, num_heads, causal=True):
            super().__init__()
            self.d_model, self.num_heads, self.causal = d_model, num_heads, causal
            self.in_proj = nn.Linear(d_model, 3 * d_model)
            self.out_proj = nn.Linear(d_model, d_model)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.in_proj(x).split(d, dim=-1)

            def heads(u):
                return u.reshape(b, t, self.num_heads, d // self.num_heads).transpose(1, 2)

            y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v),
                                               is_causal=self.causal)
            return self.out_proj(y.transpose(1, 2).reshape(b, t, d))

    class TransformerBlock(nn.Module):
        # Pre-LayerNorm (eps 1e-5), GELU with the tanh approximation, MLP ratio 4; with
        # `dropout`, nanoGPT's on both residual branches in training mode (zc's TransformerBlock).
        def __init__(self, d_model, num_heads, causal=True, mlp_ratio=4, dropout=0.0):
            super().__init__()
            self.dropout = dropout
            self.ln1 = nn.LayerNorm(d_model)
            self.attn = MultiheadAttention(d_model, num_heads, causal)
            self.ln2 = nn.LayerNorm(d_model)
            self.fc = nn.Linear(d_model, mlp_ratio * d_model)
            self.proj = nn.Linear(mlp_ratio * d_model, d_model)

        def forward(self, x):
            def branch(b):
                return F.dropout(b, self.dropout, self.training) if self.dropout else b
            h = x + branch(self.attn(self.ln1(x)))
            return h + branch(self.proj(F.gelu(self.fc(self.ln2(h)), approximate="tanh")))

    class GPT(nn.Module):
        def __init__(self, vocab, block_size, n_layer, n_head, d_model):
            super().__init__()
            self.wte = nn.Embedding(vocab, d_model)
            self.wpe = nn.Embedding(block_size, d_model)
            self.blocks = nn.Sequential(*[TransformerBlock(d_model, n_head) for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(d_model)
            with torch.no_grad():  # GPT-2's std 0.02, as zc draws them
                self.wte.weight.mul_(0.02)
                self.wpe.weight.mul_(0.02)

        def forward(self, tokens):
            x = self.wte(tokens) + self.wpe.weight[: tokens.shape[1]]
            return self.ln_f(self.blocks(x)) @ self.wte.weight.t()

    return SimpleNamespace(SeedModel=SeedModel, TransformerBlock=TransformerBlock, GPT=GPT)


def build(name, torch, compile_fn, dropout=0.0):
    """The model and input, as zc builds them (see the module docstring); compile_fn wraps each
    layer of seed64_regional; gpt12's blocks get `dropout` (--dropout)."""
    m = modules(torch)
    SeedModel, TransformerBlock = m.SeedModel, m.TransformerBlock
    nn = torch.nn
    if name == "seed64":
        return SeedModel(), torch.randn(10, 10)
    if name == "seed64_regional":
        return SeedModel(wrap=compile_fn), torch.randn(10, 10)
    if name == "gpt12":
        blocks = nn.Sequential(*[TransformerBlock(768, 12, dropout=dropout) for _ in range(12)])
        return blocks, torch.randn(8, 128, 768)
    if name == "gpt_small":
        return m.GPT(1024, 128, 4, 4, 256), torch.randint(0, 1024, (4, 128))
    raise SystemExit(f"torch_compile.py: unknown model '{name}'; expected one of {MODELS}")


def setup(torch, device_name):
    """TF32 off (zc computes f32 in full precision), the device, whether it is a GPU, and a
    function that waits for it."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device(device_name)
    cuda = device.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize()
    return device, cuda, sync


def child(spec):
    """One scenario in this process; prints its row after "RESULT "."""
    t = time.perf_counter()
    import torch
    import_ms = (time.perf_counter() - t) * 1e3
    device, cuda, sync = setup(torch, spec["device"])

    mega_load_ms = 0.0
    if spec["scenario"] == "load_mega":
        with open(spec["blob"], "rb") as f:
            blob = f.read()
        t = time.perf_counter()
        torch.compiler.load_cache_artifacts(blob)
        mega_load_ms = (time.perf_counter() - t) * 1e3
    mode = None if spec["mode"] == "default" else spec["mode"]
    regional = spec["model"] == "seed64_regional"
    torch.manual_seed(0)
    eager, x = build(spec["model"], torch, lambda m: torch.compile(m, mode=mode),
                     spec.get("dropout", 0.0))
    dtype = torch.bfloat16 if spec["dtype"] == "bf16" else torch.float32
    eager = eager.to(device=device, dtype=dtype).eval()
    x = x.to(device=device, dtype=dtype) if x.is_floating_point() else x.to(device)  # tokens
    # The regional model is eager around its compiled layers: it has no eager twin here.
    model = eager if regional else torch.compile(eager, mode=mode)

    def steady_ms(fn):
        for _ in range(3):
            fn(x)
        sync()
        times = []
        for _ in range(50):
            t = time.perf_counter()
            fn(x)
            sync()
            times.append(time.perf_counter() - t)
        times.sort()
        return times[len(times) // 2] * 1e3

    def measure(compiled_call, eager_call):
        """The first call of the compiled side, then both in steady state."""
        sync()
        t = time.perf_counter()
        compiled_call(x)
        sync()
        first = (time.perf_counter() - t) * 1e3
        compiled_ms = steady_ms(compiled_call)
        if spec.get("profile"):
            profile_kernels(torch, lambda: compiled_call(x), sync)
        return first, compiled_ms, None if regional else steady_ms(eager_call)

    if spec.get("train"):
        eager.train()
        target = torch.randn_like(x)

        def trainer(m):
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4)

            def step(inp):
                opt.zero_grad(set_to_none=True)
                loss = torch.nn.functional.mse_loss(m(inp), target)
                loss.backward()
                opt.step()
                return loss
            return step

        first_call_ms, compiled_ms, eager_ms = measure(trainer(model), trainer(eager))
    else:
        with torch.no_grad():
            first_call_ms, compiled_ms, eager_ms = measure(model, eager)
    graphs = None
    try:
        from torch._dynamo.utils import counters
        graphs = counters["stats"].get("unique_graphs")
    except Exception:  # the counters are internal: a missing one leaves the field null
        pass
    mega_bytes = None
    if spec["scenario"] == "cold":
        saved = torch.compiler.save_cache_artifacts()
        blob = saved[0] if saved else b""
        with open(spec["blob"], "wb") as f:
            f.write(blob)
        mega_bytes = len(blob)
    row = {
        "import_ms": import_ms, "mega_load_ms": mega_load_ms, "first_call_ms": first_call_ms,
        "compiled_ms_per_call": compiled_ms, "eager_ms_per_call": eager_ms,
        "mega_bytes": mega_bytes, "graphs": graphs,
        "params": sum(p.numel() for p in eager.parameters()), "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(device) if cuda else None,
    }
    print("RESULT " + json.dumps(row), flush=True)


def profile_kernels(torch, call, sync, calls=5):
    """--profile: the GPU kernels of `calls` calls under torch.profiler, longest first, on stderr
    (zc's counterpart is ZC_LOGS=kernels)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        sync()
    print(f"torch.profiler: kernels of {calls} calls", file=sys.stderr)
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=80,
                                    max_name_column_width=110), file=sys.stderr, flush=True)


def probe(device):
    """Whether torch imports and, for cuda, sees a GPU; prints the reason when not."""
    import torch
    if device == "cuda" and not torch.cuda.is_available():
        print(f"torch {torch.__version__} sees no CUDA GPU "
              f"(torch.version.cuda = {torch.version.cuda})", flush=True)
        sys.exit(3)


def run(spec, cache_dir, timeout):
    """Runs one scenario in a fresh process with `cache_dir` as Inductor's cache; its row."""
    env = dict(os.environ)
    env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    env["TRITON_CACHE_DIR"] = os.path.join(cache_dir, "triton")
    row = dict.fromkeys(SCHEMA)
    row.update(schema=SCHEMA_VERSION, model=spec["model"], dtype=spec["dtype"],
               device=spec["device"], mode=spec["mode"], scenario=spec["scenario"])
    t = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        row["error"] = f"timed out after {timeout} s; raise --timeout"
        return row
    row["process_ms"] = (time.perf_counter() - t) * 1e3
    if spec.get("profile"):  # the kernel table is the scenario's stderr
        sys.stderr.write(p.stderr)
    result = [line for line in p.stdout.splitlines() if line.startswith("RESULT ")]
    if p.returncode != 0 or not result:
        row["error"] = (p.stderr or p.stdout)[-2000:] or f"exit code {p.returncode}"
        return row
    row.update(json.loads(result[0][len("RESULT "):]))
    return row


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(json.loads(sys.argv[2]))
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "--probe":
        probe(sys.argv[2])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="seed64,gpt12",
                    help="comma-separated: " + ", ".join(MODELS))
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--mode", default="default", choices=("default", "reduce-overhead"))
    ap.add_argument("--dtypes", default=None,
                    help="f32 and/or bf16 (bf16 applies to gpt12); default f32,bf16 on cuda, "
                         "f32 on cpu")
    ap.add_argument("--train", action="store_true",
                    help="time a training step (scenarios train_cold, train_warm)")
    ap.add_argument("--dropout", type=float, default=0.0,
                    help="gpt12's blocks with this dropout on both residual branches (in "
                    "training, --train); zc bench --child --dropout P builds the same")
    ap.add_argument("--profile", action="store_true",
                    help="after the steady-state calls, print the kernels of 5 compiled calls "
                         "under torch.profiler to the scenario's stderr")
    ap.add_argument("--json", help="write every row to FILE, one JSON object per line")
    ap.add_argument("--scenarios", default=None,
                    help="comma-separated subset of the scenarios to run, in their order "
                         "(default all: " + ", ".join(SCENARIOS) + "; with --train: " +
                         ", ".join(TRAIN_SCENARIOS) + ")")
    ap.add_argument("--timeout", type=float, default=900,
                    help="seconds one scenario's process may take")
    args = ap.parse_args()
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            ap.error(f"unknown model '{m}'; expected one of {', '.join(MODELS)}")
    dtypes = (args.dtypes or ("f32,bf16" if args.device == "cuda" else "f32")).split(",")
    for d in dtypes:
        if d not in ("f32", "bf16"):
            ap.error(f"unknown dtype '{d}'; expected f32 or bf16")

    scenarios = TRAIN_SCENARIOS if args.train else SCENARIOS
    if args.scenarios:
        wanted = args.scenarios.split(",")
        for s in wanted:
            if s not in scenarios:
                ap.error(f"unknown scenario '{s}'; expected some of {', '.join(scenarios)}")
        scenarios = tuple(s for s in scenarios if s in wanted)

    p = subprocess.run([sys.executable, __file__, "--probe", args.device],
                       capture_output=True, text=True)
    if p.returncode != 0:
        lines = (p.stdout.strip() or p.stderr.strip()).splitlines()
        why = lines[-1] if lines else f"exit code {p.returncode}"
        print(f"torch_compile.py: nothing measured on {args.device}: {why}", file=sys.stderr)
        return 3

    rows, scratch = [], []
    for model in models:
        for dtype in dtypes:
            if dtype == "bf16" and model != "gpt12":
                continue
            cache_dir = tempfile.mkdtemp(prefix="torch-compile-cache-")
            blob_dir = tempfile.mkdtemp(prefix="torch-compile-mega-")
            blob = os.path.join(blob_dir, "mega.bin")
            scratch += [cache_dir, blob_dir]
            for scenario in scenarios:
                spec = {"model": model, "dtype": dtype, "device": args.device,
                        "mode": args.mode, "scenario": scenario, "blob": blob,
                        "train": args.train, "profile": args.profile, "dropout": args.dropout}
                if scenario == "load_mega" and not os.path.exists(blob):
                    row = dict.fromkeys(SCHEMA)
                    row.update(schema=SCHEMA_VERSION, model=model, dtype=dtype,
                               device=args.device, mode=args.mode, scenario=scenario,
                               error="the cold scenario saved no Mega-Cache blob")
                else:
                    print(f"  {model} {dtype} {args.device} {args.mode}: {scenario} ...",
                          file=sys.stderr, flush=True)
                    where = cache_dir
                    if scenario == "load_mega":  # an empty directory, warmed by the blob alone
                        where = tempfile.mkdtemp(prefix="torch-compile-cache-")
                        scratch.append(where)
                    row = run(spec, where, args.timeout)
                rows.append(row)
                print(json.dumps(row), flush=True)
    for d in scratch:
        shutil.rmtree(d, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    failed = [r for r in rows if r["error"]]
    for r in failed:
        last = r["error"].strip().splitlines()[-1:] or [""]
        print(f"torch_compile.py: {r['model']} {r['dtype']} {r['scenario']} failed: {last[0]}",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
