#!/usr/bin/env python3
"""Exports the real-architecture models the ONNX import tests ship (tests/data/onnx/), with torch.

    export_torch_models.py OUT_DIR [--resnet50 PATH]

Run where torch and torchvision are installed (the GPU host); the files it writes
are committed, so the tests need none of them. Random weights, eval mode, opset 17:
  resnet18_w8.onnx   torchvision's ResNet-18 code (BasicBlock, [2, 2, 2, 2]) at 1/8 of its width,
                     10 classes, input [batch, 3, 64, 64]: conv, folded batch norm, max pool,
                     residual adds, global average pool, flatten, Gemm
  gpt2_tiny.onnx     a GPT-2-shaped decoder as GPT-2's reference code writes it (2 layers, 64
                     wide, 4 heads, vocabulary 100, 64 positions), input_ids [batch, sequence]
                     to logits: embeddings, masked causal attention, layer norms, GELU(tanh), the
                     tied head. (transformers' GPT2LMHeadModel does not export at opset 17:
                     its masks use aten::diff.)
--resnet50 also writes torchvision's ResNet-50 (random weights, batch symbolic, 224x224), the
benchmarks' model (100 MB: not committed).
Each file's inputs and ONNX Runtime's outputs on them are written beside it as .npy
(NAME.input_0.npy, NAME.output_0.npy) for the record; the tests run ONNX Runtime themselves.
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn


def export(model, args, path, input_names, output_names, dynamic_axes):
    model.eval()
    kwargs = dict(input_names=input_names, output_names=output_names, dynamic_axes=dynamic_axes,
                  opset_version=17, do_constant_folding=True)
    try:  # the TorchScript exporter: opset 17 as asked, module scopes in the node names
        torch.onnx.export(model, args, path, dynamo=False, **kwargs)
        how = "torchscript exporter"
    except Exception as e:  # newer torch without it
        print(f"{path}: the TorchScript exporter failed ({e}); trying dynamo", file=sys.stderr)
        torch.onnx.export(model, args, path, dynamo=True, **kwargs)
        how = "dynamo exporter"
    size = os.path.getsize(path)
    print(f"{path}: {size} bytes ({how}, torch {torch.__version__})")


def resnet18_narrow():
    """torchvision's ResNet-18 with every width divided by 8 (onnx_zoo.py's narrow ResNet)."""
    from torchvision.models.resnet import BasicBlock

    from onnx_zoo import narrow_resnet

    return narrow_resnet(BasicBlock, [2, 2, 2, 2], widths=(8, 16, 32, 64))


class Gpt2Block(nn.Module):
    """GPT-2's block as its reference code writes it (nanoGPT's form): pre-LayerNorm causal
    self-attention with one fused QKV projection and a masked softmax, then a GELU(tanh) MLP."""

    def __init__(self, d, heads, context):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("bias", torch.tril(torch.ones(context, context, dtype=torch.bool)),
                             persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5)
        att = att.masked_fill(~self.bias[:t, :t], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(nn.functional.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt2Tiny(nn.Module):
    """A GPT-2-shaped decoder: token and position embeddings, 2 blocks, a final LayerNorm and the
    head tied to the token embedding; input_ids [batch, sequence] to logits."""

    def __init__(self, vocab=100, context=64, d=64, heads=4, layers=2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.h = nn.ModuleList(Gpt2Block(d, heads, context) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, input_ids):
        t = input_ids.shape[1]
        x = self.wte(input_ids) + self.wpe(torch.arange(t, device=input_ids.device))
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


def gpt2_tiny():
    return Gpt2Tiny()


def reference(path, inputs):
    import onnxruntime as ort

    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {i.name: x for i, x in zip(s.get_inputs(), inputs)}
    base = path[:-len(".onnx")]
    for k, x in enumerate(inputs):
        np.save(f"{base}.input_{k}.npy", x)
    for k, y in enumerate(s.run(None, feeds)):
        np.save(f"{base}.output_{k}.npy", y)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    path = os.path.join(out, "resnet18_w8.onnx")
    x = torch.randn(2, 3, 64, 64)
    export(resnet18_narrow(), (x,), path, ["input"], ["logits"],
           {"input": {0: "batch"}, "logits": {0: "batch"}})
    reference(path, [x.numpy()])
    path = os.path.join(out, "gpt2_tiny.onnx")
    ids = torch.randint(0, 100, (2, 12))
    export(gpt2_tiny(), (ids,), path, ["input_ids"], ["logits"],
           {"input_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch", 1: "sequence"}})
    reference(path, [ids.numpy()])
    if "--resnet50" in sys.argv:
        import torchvision

        path = sys.argv[sys.argv.index("--resnet50") + 1]
        export(torchvision.models.resnet50(), (torch.randn(1, 3, 224, 224),), path, ["input"],
               ["logits"], {"input": {0: "batch"}, "logits": {0: "batch"}})


if __name__ == "__main__":
    main()
