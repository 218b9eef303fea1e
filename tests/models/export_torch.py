#!/usr/bin/python3
"""Exports the real-model test architectures from PyTorch with fixed seeds.

Runs under Debian's /usr/bin/python3 (python3-torch). For each model writes OUT/<name>/model.onnx
and OUT/<name>/input_0.npy, torch_output_0.npy. make_models.py turns these into ONNX backend-test
cases with ONNX Runtime outputs as the reference.
"""
import inspect
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# torch >= 2.9 exports through dynamo by default (another graph, opset 18); the models and their
# ratchets are the TorchScript exporter's, which older torch (Debian's 1.13) uses without being asked.
TORCHSCRIPT_EXPORTER = ({"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {})


class MLP(nn.Module):
    """The classic 784-512-256-10 MNIST classifier."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 512), nn.Linear(512, 256), nn.Linear(256, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


class ResNet18(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        x = self.layers(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()]
        layers += [nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
                   nn.ReLU6(), nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.body(x) if self.use_res else self.body(x)


class MobileNetV2(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
        layers = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()]
        cin = 32
        for t, c, n, s in cfg:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += [nn.Conv2d(cin, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class EncoderLayer(nn.Module):
    """Post-norm transformer encoder layer with GELU, attention written out (exports to core ops)."""

    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = self.norm1(x + self.proj(y))
        return self.norm2(x + self.ff2(F.gelu(self.ff1(x))))


class TransformerEncoder(nn.Module):
    def __init__(self, d=64, heads=4, ff=128, layers=2):
        super().__init__()
        self.layers = nn.Sequential(*[EncoderLayer(d, heads, ff) for _ in range(layers)])

    def forward(self, x):
        return self.layers(x)


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = 4 * width
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return F.relu(self.body(x) + (self.down(x) if self.down is not None else x))


class ResNet50(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
            for i in range(blocks):
                layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = 4 * width
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.layers(self.stem(x)), 1), 1))


class Fire(nn.Module):
    def __init__(self, cin, squeeze, expand):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.e1, self.e3 = nn.Conv2d(squeeze, expand, 1), nn.Conv2d(squeeze, expand, 3, padding=1)

    def forward(self, x):
        s = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.e1(s)), F.relu(self.e3(s))], 1)


class SqueezeNet(nn.Module):
    """SqueezeNet 1.1."""

    def __init__(self, classes=1000):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True), Fire(64, 16, 64), Fire(128, 16, 64),
            nn.MaxPool2d(3, 2, ceil_mode=True), Fire(128, 32, 128), Fire(256, 32, 128),
            nn.MaxPool2d(3, 2, ceil_mode=True), Fire(256, 48, 192), Fire(384, 48, 192), Fire(384, 64, 256),
            Fire(512, 64, 256))
        self.classifier = nn.Conv2d(512, classes, 1)

    def forward(self, x):
        return torch.flatten(F.adaptive_avg_pool2d(F.relu(self.classifier(self.features(x))), 1), 1)


class ConvNeXtBlock(nn.Module):
    """One ConvNeXt block (7x7 depthwise, channels-last LayerNorm, 4x MLP with GELU, layer scale)."""

    def __init__(self, d=96):
        super().__init__()
        self.dw = nn.Conv2d(d, d, 7, padding=3, groups=d)
        self.norm = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.scale = nn.Parameter(torch.full((d,), 0.5))

    def forward(self, x):
        y = self.norm(self.dw(x).permute(0, 2, 3, 1))
        y = self.fc2(F.gelu(self.fc1(y))) * self.scale
        return x + y.permute(0, 3, 1, 2)


class Gpt2Block(nn.Module):
    """A GPT-2 block: pre-norm causal self-attention (mask as Where) and a tanh-GELU MLP."""

    def __init__(self, d=768, heads=12, seq=128):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("causal", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = torch.softmax(att.masked_fill(self.causal[:t, :t], float("-inf")), dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class LayerNormGeluResidual(nn.Module):
    def __init__(self, d=768):
        super().__init__()
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return x + F.gelu(self.norm(x))


class LstmTagger(nn.Module):
    """A two-layer LSTM over a batch of sequences and a linear head (ONNX LSTM: forward, zero states)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(32, 48, num_layers=2, batch_first=True)
        self.head = nn.Linear(48, 10)

    def forward(self, x):
        return self.head(self.lstm(x)[0])


class BiGruEncoder(nn.Module):
    """A bidirectional GRU (ONNX GRU: both directions, linear_before_reset) and the final states' sum."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(24, 40, batch_first=True, bidirectional=True)

    def forward(self, x):
        y, h = self.gru(x)
        return y.sum(dim=1) + h.transpose(0, 1).reshape(x.shape[0], -1)


# The real-model tests (small shapes: they run in every CI).
MODELS = {
    "model_mlp": (MLP, (4, 784)),
    "model_resnet18": (ResNet18, (1, 3, 64, 64)),
    "model_mobilenetv2": (MobileNetV2, (1, 3, 64, 64)),
    "model_transformer_encoder": (TransformerEncoder, (2, 16, 64)),
    "model_lstm": (LstmTagger, (2, 20, 32)),
    "model_bigru": (BiGruEncoder, (3, 15, 24)),
}


# The benchmark set at full size (bench/README.md; `make_models.py --bench OUT`): not run by the tests.
BENCH_MODELS = {
    "resnet18_224": (ResNet18, (1, 3, 224, 224)),
    "resnet50_224": (ResNet50, (1, 3, 224, 224)),
    "mobilenetv2_224": (MobileNetV2, (1, 3, 224, 224)),
    "squeezenet_224": (SqueezeNet, (1, 3, 224, 224)),
    "convnext_block_56": (ConvNeXtBlock, (1, 96, 56, 56)),
    "bert2_128": (lambda: TransformerEncoder(768, 12, 3072, 2), (1, 128, 768)),
    "bert12_128": (lambda: TransformerEncoder(768, 12, 3072, 12), (1, 128, 768)),  # BERT-base's 12 layers
    "gpt2_block_128": (Gpt2Block, (1, 128, 768)),
    "mlp_batch1": (MLP, (1, 784)),
    "mlp_batch64": (MLP, (64, 784)),
    "layernorm_gelu_residual": (LayerNormGeluResidual, (32, 128, 768)),
}


def model_class(name):
    return MODELS[name] if name in MODELS else BENCH_MODELS[name]


def randomize_batchnorm(model, gen):
    # Fresh BatchNorm statistics are 0/1, which would hide scale/shift bugs.
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=gen) * 0.1)


def main(out_dir, models=MODELS):
    for name, (cls, shape) in models.items():
        torch.manual_seed(0)
        gen = torch.Generator().manual_seed(1)
        model = cls().eval()
        with torch.no_grad():
            randomize_batchnorm(model, gen)
            x = torch.randn(*shape, generator=gen)
            y = model(x)
        case = os.path.join(out_dir, name)
        os.makedirs(case, exist_ok=True)
        torch.onnx.export(model, (x,), os.path.join(case, "model.onnx"), opset_version=13,
                          input_names=["input"], output_names=["output"], do_constant_folding=True,
                          **TORCHSCRIPT_EXPORTER)
        np.save(os.path.join(case, "input_0.npy"), x.numpy())
        np.save(os.path.join(case, "torch_output_0.npy"), y.numpy())
        print(f"exported {name}: input {tuple(shape)}, output {tuple(y.shape)}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--bench":
        main(sys.argv[2], BENCH_MODELS)
    else:
        main(sys.argv[1])
