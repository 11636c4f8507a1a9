#!/usr/bin/env python3
"""Builds the ONNX zoo the import tests ship (tests/data/onnx/zoo/): real architectures from
torchvision, timm and transformers at small widths, random weights, eval mode, each exported by
both of torch's exporters.

    onnx_zoo.py OUT_DIR [--only NAME,NAME]

Run where torch, torchvision, timm, transformers and onnxscript are installed (the GPU host);
the files it writes are committed, so the tests need none of them. Per model NAME:
  NAME.dynamo.onnx        torch.onnx.export(dynamo=True): the default exporter since torch 2.9
                          (opset 18 and later, local functions, value-info of its own)
  NAME.torchscript.onnx   torch.onnx.export(dynamo=False), opset 17
  NAME.input_K.npy        the inputs, batch 2
  NAME.output_0.npy       torch's output on them (eager, float32, on the CPU)
and zoo.txt, one line per model and exporter:
  NAME EXPORTER FAMILY STATUS [WHY]
with STATUS "ok" where the exporter wrote a file ONNX Runtime runs and agrees with torch on
(1e-4 relative), else "export-failed" with the exporter's first line of complaint. The batch dim
(and the sequence dim of text models) is exported as dynamic; the tests also run the files at
other batch sizes.
"""
import os
import sys
import traceback

import numpy as np
import torch
import torch.nn as nn

BATCH = 2


class FirstTensor(nn.Module):
    """Wraps a model whose forward returns a tuple, dict or ModelOutput: the one tensor named."""

    def __init__(self, model, key=None, names=None):
        super().__init__()
        self.model, self.key, self.names = model, key, names

    def forward(self, *args):
        out = self.model(**dict(zip(self.names, args))) if self.names else self.model(*args)
        if self.key is not None:
            return out[self.key]
        return out[0] if isinstance(out, (tuple, list)) else out


def image(size=32, channels=3):
    return (torch.randn(BATCH, channels, size, size),)


def batch_dynamic(names):
    return {n: {0: "batch"} for n in names}


# -- torchvision ---------------------------------------------------------------------------


def narrow_resnet(block, layers, widths=(4, 8, 16, 32), groups=1, base_width=64):
    """torchvision's ResNet code with other stage widths (its constructor fixes 64 to 512)."""
    from torchvision.models.resnet import ResNet

    class Narrow(ResNet):
        def __init__(self):
            nn.Module.__init__(self)
            self._norm_layer = nn.BatchNorm2d
            self.inplanes, self.dilation = widths[0], 1
            self.groups, self.base_width = groups, base_width
            self.conv1 = nn.Conv2d(3, widths[0], kernel_size=7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(widths[0])
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = self._make_layer(block, widths[0], layers[0])
            self.layer2 = self._make_layer(block, widths[1], layers[1], stride=2)
            self.layer3 = self._make_layer(block, widths[2], layers[2], stride=2)
            self.layer4 = self._make_layer(block, widths[3], layers[3], stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(widths[3] * block.expansion, 10)
            for m in self.modules():  # statistics that are not the identity, so folding matters
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.uniform_(-0.2, 0.2)
                    m.running_var.uniform_(0.5, 1.5)
                    m.weight.data.uniform_(0.5, 1.5)
                    m.bias.data.uniform_(-0.2, 0.2)

    return Narrow()


def resnet():
    from torchvision.models.resnet import BasicBlock

    return narrow_resnet(BasicBlock, [2, 2, 2, 2]), image(32)


def resnext():
    # torchvision's ResNeXt: grouped bottlenecks (groups 4, 4 channels a group) at a small depth.
    from torchvision.models.resnet import Bottleneck

    return narrow_resnet(Bottleneck, [1, 1, 1, 1], groups=4, base_width=16), image(32)


def mobilenet_v2():
    from torchvision.models import mobilenet_v2 as make
    from torchvision.ops.misc import Conv2dNormActivation

    # one block a stage (torchvision repeats them 1 to 4 times)
    stages = [[1, 16, 1, 1], [6, 24, 1, 2], [6, 32, 1, 2], [6, 64, 1, 2], [6, 96, 1, 1],
              [6, 160, 1, 2], [6, 320, 1, 1]]
    m = make(width_mult=0.25, num_classes=10, inverted_residual_setting=stages)
    # its last 1x1 conv widens to 1280 at any width_mult: 64 here, the fixtures stay small
    m.features[-1] = Conv2dNormActivation(80, 64, kernel_size=1, activation_layer=nn.ReLU6)
    m.classifier[-1] = nn.Linear(64, 10)
    return m, image(32)


def mobilenet_v3():
    from torchvision.models.mobilenetv3 import MobileNetV3, _mobilenet_v3_conf

    settings, last = _mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.25, reduced_tail=True)
    # its first eight blocks: hard swish, squeeze-excitation, strides; the head follows them
    return MobileNetV3(settings[:8], 64, num_classes=10), image(32)


def efficientnet():
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf

    settings, last = _efficientnet_conf("efficientnet_b0", width_mult=0.125, depth_mult=0.25)
    return EfficientNet(settings, 0.2, last_channel=last, num_classes=10), image(32)


def regnet():
    from torchvision.models.regnet import BlockParams, RegNet

    params = BlockParams.from_init_params(depth=4, w_0=8, w_a=8.0, w_m=2.0, group_width=8)
    return RegNet(params, num_classes=10), image(32)


def convnext():
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt

    cfg = [CNBlockConfig(8, 16, 1), CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)]
    return ConvNeXt(cfg, stochastic_depth_prob=0.0, num_classes=10), image(32)


def densenet():
    from torchvision.models.densenet import DenseNet

    return DenseNet(growth_rate=4, block_config=(2, 2), num_init_features=8, bn_size=2,
                    num_classes=10), image(32)


def shufflenet():
    from torchvision.models.shufflenetv2 import ShuffleNetV2

    return ShuffleNetV2([2, 2, 2], [8, 16, 32, 64, 128], num_classes=10), image(32)


def vit():
    from torchvision.models.vision_transformer import VisionTransformer

    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                             hidden_dim=32, mlp_dim=64, num_classes=10), image(32)


def swin():
    from torchvision.models.swin_transformer import SwinTransformer

    return SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                           window_size=[4, 4], stochastic_depth_prob=0.0,
                           num_classes=10), image(32)


def fcn():
    # Segmentation: a ResNet backbone, an FCN head and a bilinear upsample (Resize) to the input.
    from torchvision.models.segmentation.fcn import FCNHead, FCN
    from torchvision.models._utils import IntermediateLayerGetter
    from torchvision.models.resnet import BasicBlock

    backbone = narrow_resnet(BasicBlock, [1, 1, 1, 1])
    backbone = IntermediateLayerGetter(backbone, return_layers={"layer4": "out"})
    return FirstTensor(FCN(backbone, FCNHead(32, 5)), "out"), image(32)


# -- timm ----------------------------------------------------------------------------------


def deit():
    import timm

    m = timm.create_model("deit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8,
                          embed_dim=32, depth=2, num_heads=2, num_classes=10)
    return m, image(32)


def timm_efficientnet():
    # timm's EfficientNet builder (create_model fixes the multipliers of its named variants)
    from timm.models.efficientnet import _gen_efficientnet

    m = _gen_efficientnet("efficientnet_b0", channel_multiplier=0.125, depth_multiplier=0.25,
                          pretrained=False, num_classes=10)
    return m, image(32)


# -- transformers --------------------------------------------------------------------------

VOCAB, SEQ = 100, 16
TEXT = ["input_ids", "attention_mask"]


def text():
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    mask[1, SEQ - 5:] = 0  # the second row is padded
    return ids, mask


def small(cfg_cls, **kw):
    return cfg_cls(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=64, **kw)


def bert():
    from transformers import BertConfig, BertModel

    cfg = small(BertConfig, max_position_embeddings=64, attn_implementation="eager")
    return FirstTensor(BertModel(cfg), "last_hidden_state", TEXT), text()


def roberta():
    from transformers import RobertaConfig, RobertaModel

    cfg = small(RobertaConfig, max_position_embeddings=64, attn_implementation="eager")
    return FirstTensor(RobertaModel(cfg), "last_hidden_state", TEXT), text()


def distilbert():
    from transformers import DistilBertConfig, DistilBertModel

    cfg = DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                           max_position_embeddings=64, attn_implementation="eager")
    return FirstTensor(DistilBertModel(cfg), "last_hidden_state", TEXT), text()


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                     use_cache=False, attn_implementation="eager")
    return FirstTensor(GPT2LMHeadModel(cfg), "logits", TEXT), text()


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = small(LlamaConfig, num_key_value_heads=1, max_position_embeddings=64, use_cache=False,
                attn_implementation="eager")
    return FirstTensor(LlamaForCausalLM(cfg), "logits", TEXT), text()


def whisper_encoder():
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    cfg = WhisperConfig(num_mel_bins=16, d_model=32, encoder_layers=2, encoder_attention_heads=2,
                        encoder_ffn_dim=64, max_source_positions=16, attn_implementation="eager")
    return FirstTensor(WhisperEncoder(cfg), "last_hidden_state", ["input_features"]), (torch.randn(BATCH, 16, 32),)


def wav2vec2():
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    cfg = Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                         conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                         num_conv_pos_embedding_groups=4, attn_implementation="eager")
    return FirstTensor(Wav2Vec2Model(cfg), "last_hidden_state", ["input_values"]), (torch.randn(BATCH, 400),)


# -- recurrent -----------------------------------------------------------------------------


class Recurrent(nn.Module):
    """A sequence classifier: embeddings, a two-layer bidirectional LSTM or GRU, a linear head."""

    def __init__(self, cell):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.rnn = cell(16, 24, num_layers=2, batch_first=True, bidirectional=True)
        self.head = nn.Linear(48, 10)

    def forward(self, ids):
        out, _ = self.rnn(self.embed(ids))
        return self.head(out)


def lstm():
    return Recurrent(nn.LSTM), (torch.randint(0, VOCAB, (BATCH, SEQ)),)


def gru():
    return Recurrent(nn.GRU), (torch.randint(0, VOCAB, (BATCH, SEQ)),)


# name, family, builder, input names, dims that are dynamic beyond the batch
ZOO = [
    ("resnet", "torchvision", resnet, ["input"], {}),
    ("resnext", "torchvision", resnext, ["input"], {}),
    ("mobilenet_v2", "torchvision", mobilenet_v2, ["input"], {}),
    ("mobilenet_v3", "torchvision", mobilenet_v3, ["input"], {}),
    ("efficientnet", "torchvision", efficientnet, ["input"], {}),
    ("regnet", "torchvision", regnet, ["input"], {}),
    ("convnext", "torchvision", convnext, ["input"], {}),
    ("densenet", "torchvision", densenet, ["input"], {}),
    ("shufflenet", "torchvision", shufflenet, ["input"], {}),
    ("vit", "torchvision", vit, ["input"], {}),
    ("swin", "torchvision", swin, ["input"], {}),
    ("fcn", "torchvision", fcn, ["input"], {}),
    ("deit", "timm", deit, ["input"], {}),
    ("timm_efficientnet", "timm", timm_efficientnet, ["input"], {}),
    ("bert", "transformers", bert, ["input_ids", "attention_mask"], {1: "sequence"}),
    ("roberta", "transformers", roberta, ["input_ids", "attention_mask"], {1: "sequence"}),
    ("distilbert", "transformers", distilbert, ["input_ids", "attention_mask"], {1: "sequence"}),
    ("gpt2", "transformers", gpt2, ["input_ids", "attention_mask"], {1: "sequence"}),
    ("llama", "transformers", llama, ["input_ids", "attention_mask"], {1: "sequence"}),
    ("whisper_encoder", "transformers", whisper_encoder, ["input_features"], {}),
    ("wav2vec2", "transformers", wav2vec2, ["input_values"], {}),
    ("lstm", "recurrent", lstm, ["ids"], {1: "sequence"}),
    ("gru", "recurrent", gru, ["ids"], {1: "sequence"}),
]


def export(model, args, path, names, extra_dims, dynamo):
    axes = {n: {0: "batch", **(extra_dims if args[i].dim() > 1 else {})}
            for i, n in enumerate(names)}
    kwargs = dict(input_names=names, output_names=["output"])
    if dynamo:
        batch = torch.export.Dim("batch", min=1, max=64)
        # one Dim object per name: every input's "sequence" is the same symbol
        shared = {v: torch.export.Dim(v, min=2, max=64) for v in extra_dims.values()}
        dims = tuple({0: batch, **{k: shared[v] for k, v in extra_dims.items()}}
                     for _ in names)
        if isinstance(model, FirstTensor):  # forward(*args): one argument, a tuple
            dims = (dims,)
        torch.onnx.export(model, args, path, dynamo=True, dynamic_shapes=dims, **kwargs)
    else:
        axes["output"] = {0: "batch"}
        torch.onnx.export(model, args, path, dynamo=False, opset_version=17,
                          dynamic_axes=axes, do_constant_folding=True, **kwargs)


def strip_debug_text(path):
    """Drops the dynamo exporter's per-node debugging text (the Python stack trace and FX node
    that made each node: half of a small model's file, and the paths of the machine that ran
    it); the graph, its weights and its scope metadata (namespace, name_scopes,
    class_hierarchy) stay as written."""
    import onnx

    m = onnx.load(path, load_external_data=False)
    drop = ("pkg.torch.onnx.stack_trace", "pkg.torch.onnx.fx_node")
    for n in m.graph.node:
        keep = [(p.key, p.value) for p in n.metadata_props if p.key not in drop]
        del n.metadata_props[:]
        for k, v in keep:
            n.metadata_props.add(key=k, value=v)
    onnx.save(m, path)


def ort_agrees(path, args, want):
    import onnxruntime as ort

    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(s.get_inputs(), args)}
    got = s.run(None, feeds)[0]
    scale = max(1.0, float(np.abs(want).max()))
    err = float(np.abs(got - want).max()) / scale
    if got.shape != want.shape or err > 1e-4:
        raise RuntimeError(f"ONNX Runtime disagrees with torch: shape {got.shape} vs "
                           f"{want.shape}, error {err:.2e}")


def main():
    out = sys.argv[1]
    only = set(sys.argv[sys.argv.index("--only") + 1].split(",")) if "--only" in sys.argv else None
    os.makedirs(out, exist_ok=True)
    lines = []
    for name, family, build, names, extra in ZOO:
        if only and name not in only:
            continue
        torch.manual_seed(0)
        try:
            model, args = build()
            model.eval()
            with torch.no_grad():
                want = model(*args).detach().numpy()
        except Exception as e:  # noqa: BLE001: this torch's library lacks it; said, and skipped
            print(f"{name}: cannot be built here: {e}", file=sys.stderr)
            continue
        for k, a in enumerate(args):
            np.save(os.path.join(out, f"{name}.input_{k}.npy"), a.numpy())
        np.save(os.path.join(out, f"{name}.output_0.npy"), want)
        for exporter in ("dynamo", "torchscript"):
            path = os.path.join(out, f"{name}.{exporter}.onnx")
            try:
                export(model, args, path, names, extra, exporter == "dynamo")
                if exporter == "dynamo":
                    strip_debug_text(path)
                ort_agrees(path, args, want)
                status, why = "ok", ""
                size = os.path.getsize(path)
            except Exception as e:  # noqa: BLE001: recorded, the zoo goes on
                if os.path.exists(path):
                    os.remove(path)
                status = "export-failed"
                why = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
                size = 0
                traceback.print_exc(file=sys.stderr)
            lines.append(f"{name} {exporter} {family} {status} {why}".rstrip())
            print(f"{name:18} {exporter:12} {status:14} {size:>8} bytes {why}", flush=True)
    with open(os.path.join(out, "zoo.txt"), "w") as f:
        f.write(f"# torch {torch.__version__}; written by tests/tools/onnx_zoo.py\n")
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
