#!/usr/bin/env python3
"""Exports the real-architecture models the ONNX import tests ship (tests/data/onnx/), with torch.

    export_torch_models.py OUT_DIR [--resnet50 PATH]

Run where torch, torchvision and transformers are installed (the GPU host); the files it writes
are committed, so the tests need none of them. Random weights, eval mode, opset 17:
  resnet18_w8.onnx   torchvision's ResNet-18 code (BasicBlock, [2, 2, 2, 2]) at 1/8 of its width,
                     10 classes, input [batch, 3, 64, 64]: conv, folded batch norm, max pool,
                     residual adds, global average pool, flatten, Gemm
  gpt2_tiny.onnx     transformers' GPT2LMHeadModel (2 layers, 64 wide, 4 heads, vocabulary 100,
                     64 positions), input_ids [batch, sequence] to logits: the decoder's
                     embeddings, causal attention, layer norms, GELU and the tied head
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
    from torchvision.models.resnet import BasicBlock, ResNet

    class Narrow(ResNet):
        """torchvision's ResNet with every width divided by 8 (its constructor fixes them)."""

        def __init__(self):
            nn.Module.__init__(self)
            self._norm_layer = nn.BatchNorm2d
            self.inplanes, self.dilation, self.groups, self.base_width = 8, 1, 1, 64
            self.conv1 = nn.Conv2d(3, 8, kernel_size=7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = self._make_layer(BasicBlock, 8, 2)
            self.layer2 = self._make_layer(BasicBlock, 16, 2, stride=2)
            self.layer3 = self._make_layer(BasicBlock, 32, 2, stride=2)
            self.layer4 = self._make_layer(BasicBlock, 64, 2, stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(64, 10)
            for m in self.modules():  # statistics that are not the identity, so folding matters
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.uniform_(-0.2, 0.2)
                    m.running_var.uniform_(0.5, 1.5)
                    m.weight.data.uniform_(0.5, 1.5)
                    m.bias.data.uniform_(-0.2, 0.2)

    return Narrow()


def gpt2_tiny():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=100, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                        use_cache=False)
    model = GPT2LMHeadModel(config)

    class Logits(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            return self.m(input_ids=input_ids, use_cache=False).logits

    return Logits(model)


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
