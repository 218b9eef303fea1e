#!/usr/bin/python3
"""Exports the real-model test architectures from PyTorch with fixed seeds.

Runs under Debian's /usr/bin/python3 (python3-torch). For each model writes OUT/<name>/model.onnx
and OUT/<name>/input_0.npy, torch_output_0.npy. make_models.py turns these into ONNX backend-test
cases with ONNX Runtime outputs as the reference.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


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


MODELS = {
    "model_mlp": (MLP, (4, 784)),
    "model_resnet18": (ResNet18, (1, 3, 64, 64)),
    "model_mobilenetv2": (MobileNetV2, (1, 3, 64, 64)),
    "model_transformer_encoder": (TransformerEncoder, (2, 16, 64)),
}


def randomize_batchnorm(model, gen):
    # Fresh BatchNorm statistics are 0/1, which would hide scale/shift bugs.
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=gen) * 0.1)


def main(out_dir):
    for name, (cls, shape) in MODELS.items():
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
                          input_names=["input"], output_names=["output"], do_constant_folding=True)
        np.save(os.path.join(case, "input_0.npy"), x.numpy())
        np.save(os.path.join(case, "torch_output_0.npy"), y.numpy())
        print(f"exported {name}: input {tuple(shape)}, output {tuple(y.shape)}")


if __name__ == "__main__":
    main(sys.argv[1])
