#!/usr/bin/env python3
"""Writes a ResNet as an ONNX file in the form torch.onnx.export gives it, with random weights.

    make_resnet_onnx.py OUT.onnx [--depth 18|34|50|101|152] [--width W] [--batch N]
                        [--size S] [--classes K] [--batch-norm] [--seed S]

The graph is torchvision's ResNet (stem conv 7x7/2, max pool 3x3/2, four stages of basic or
bottleneck blocks, global average pool, flatten, fully connected), exported in eval mode: each
batch norm folded into its convolution's weight and bias (--batch-norm keeps them as
BatchNormalization nodes), node names in torch's module scopes ("/layer1/layer1.0/conv1/Conv"),
initializers named as torch's state dict ("layer1.0.conv1.weight"), opset 17. --width scales
every channel count (64 by default), so tests can use a small copy of the real architecture.
Weights are drawn so that activations keep their scale through the depth. The batch dim is
symbolic ("batch"); --batch only fills the file's shape info.

Needs numpy and onnx (pip install onnx numpy). Used by the benchmarks (bench/onnx_peer.py) and
the tests (the ResNet-shaped model against ONNX Runtime).
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BLOCKS = {18: ("basic", [2, 2, 2, 2]), 34: ("basic", [3, 4, 6, 3]),
          50: ("bottleneck", [3, 4, 6, 3]), 101: ("bottleneck", [3, 4, 23, 3]),
          152: ("bottleneck", [3, 8, 36, 3])}


class Graph:
    def __init__(self, rng, batch_norm):
        self.nodes, self.inits, self.rng, self.batch_norm = [], [], rng, batch_norm
        self.count = 0

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def node(self, op, inputs, scope, attrs=None, suffix=""):
        self.count += 1
        out = f"{scope}/{op}{suffix}_output_0"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"{scope}/{op}{suffix}",
                                           **(attrs or {})))
        return out

    def conv_bn(self, x, cin, cout, k, stride, scope, prefix, gain=1.0):
        """A convolution and its batch norm (folded, as torch exports eval mode)."""
        fan_in = cin * k * k
        w = self.rng.standard_normal((cout, cin, k, k)) * gain * np.sqrt(2.0 / fan_in)
        attrs = dict(kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4,
                     dilations=[1, 1], group=1)
        if not self.batch_norm:
            b = self.rng.standard_normal(cout) * 0.1
            return self.node("Conv", [x, self.init(f"{prefix}.weight", w),
                                      self.init(f"{prefix}.bias", b)], f"{scope}", attrs)
        y = self.node("Conv", [x, self.init(f"{prefix}.weight", w)], scope, attrs)
        bn = prefix.replace("conv", "bn").replace("downsample.0", "downsample.1")
        bscope = scope.rsplit("/", 1)[0] + "/" + bn.rsplit(".", 1)[-1]
        params = [self.init(f"{bn}.weight", 1 + 0.1 * self.rng.standard_normal(cout)),
                  self.init(f"{bn}.bias", 0.1 * self.rng.standard_normal(cout)),
                  self.init(f"{bn}.running_mean", 0.1 * self.rng.standard_normal(cout)),
                  self.init(f"{bn}.running_var", 1 + 0.1 * np.abs(self.rng.standard_normal(cout)))]
        return self.node("BatchNormalization", [y] + params, bscope, dict(epsilon=1e-5))


def block(g, x, kind, cin, planes, stride, name):
    scope = f"/{name.split('.')[0]}/{name}"
    expansion = 4 if kind == "bottleneck" else 1
    cout = planes * expansion
    if kind == "basic":
        h = g.conv_bn(x, cin, planes, 3, stride, f"{scope}/conv1", f"{name}.conv1")
        h = g.node("Relu", [h], f"{scope}/relu")
        h = g.conv_bn(h, planes, cout, 3, 1, f"{scope}/conv2", f"{name}.conv2", gain=0.5)
    else:
        h = g.conv_bn(x, cin, planes, 1, 1, f"{scope}/conv1", f"{name}.conv1")
        h = g.node("Relu", [h], f"{scope}/relu")
        h = g.conv_bn(h, planes, planes, 3, stride, f"{scope}/conv2", f"{name}.conv2")
        h = g.node("Relu", [h], f"{scope}/relu", suffix="_1")
        h = g.conv_bn(h, planes, cout, 1, 1, f"{scope}/conv3", f"{name}.conv3", gain=0.5)
    skip = x
    if stride != 1 or cin != cout:
        skip = g.conv_bn(x, cin, cout, 1, stride, f"{scope}/downsample/downsample.0",
                         f"{name}.downsample.0")
    y = g.node("Add", [h, skip], scope)
    return g.node("Relu", [y], f"{scope}/relu", suffix="_2"), cout


def resnet(depth, width, batch, size, classes, batch_norm, seed):
    kind, layers = BLOCKS[depth]
    g = Graph(np.random.default_rng(seed), batch_norm)
    x = g.conv_bn("input", 3, width, 7, 2, "/conv1", "conv1")
    x = g.node("Relu", [x], "/relu")
    x = g.node("MaxPool", [x], "/maxpool",
               dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=0))
    cin = width
    for stage, count in enumerate(layers):
        planes = width * (2 ** stage)
        for i in range(count):
            x, cin = block(g, x, kind, cin, planes, 2 if (i == 0 and stage > 0) else 1,
                           f"layer{stage + 1}.{i}")
    x = g.node("GlobalAveragePool", [x], "/avgpool")
    x = g.node("Flatten", [x], "", dict(axis=1))
    w = g.rng.standard_normal((classes, cin)) / np.sqrt(cin)
    out = g.node("Gemm", [x, g.init("fc.weight", w), g.init("fc.bias", np.zeros(classes))],
                 "/fc", dict(alpha=1.0, beta=1.0, transB=1))
    g.nodes[-1].output[0] = "output"
    graph = helper.make_graph(
        g.nodes, f"resnet{depth}",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, size, size])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", classes])],
        g.inits)
    model = helper.make_model(graph, producer_name="zc bench/make_resnet_onnx.py",
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--depth", type=int, default=50, choices=sorted(BLOCKS))
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--batch-norm", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    model = resnet(a.depth, a.width, a.batch, a.size, a.classes, a.batch_norm, a.seed)
    onnx.checker.check_model(model)
    onnx.save(model, a.out)
    print(f"{a.out}: ResNet-{a.depth}, width {a.width}, {len(model.graph.node)} nodes, "
          f"{sum(int(np.prod(t.dims)) for t in model.graph.initializer)} parameters")


if __name__ == "__main__":
    main()
