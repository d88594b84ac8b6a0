"""The vision models of the benchmark, written out here: ResNet-18/50, ViT-B/16, MobileNetV3-Large.

Why not torchvision: PyPI's Linux torchvision wheels are built against CUDA torch. Installed beside
the CPU-only torch this project is tested with, `import torchvision` raises (its `_C` extension
cannot load and 0.28 still registers fake kernels for `torchvision::nms`), and since transformers
imports torchvision whenever it is installed, GPT-2 and every other transformers model then fail to
import too. So the suite carries its own definitions of the four architectures, with torchvision's
module names: a torchvision state dict loads into them unchanged, and
tests/python/test_bench.py checks that outputs match torchvision's model where torchvision imports
(the GPU machine). Random initialisation; nothing is downloaded.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import torch
from torch import nn

# --------------------------------------------------------------------------------------------
# ResNet (v1.5: the stride of a bottleneck sits on its 3x3 convolution)
# --------------------------------------------------------------------------------------------


def _conv(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, k, stride, padding=(k - 1) // 2, groups=groups, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = _conv(cin, planes, 3, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv(planes, planes, 3)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = _shortcut(cin, planes, stride)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        skip = x if self.downsample is None else self.downsample(x)
        return self.relu(out + skip)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = _conv(cin, planes, 1)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = _conv(planes, planes, 3, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = _conv(planes, planes * 4, 1)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _shortcut(cin, planes * 4, stride)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        skip = x if self.downsample is None else self.downsample(x)
        return self.relu(out + skip)


def _shortcut(cin: int, cout: int, stride: int) -> nn.Module | None:
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(_conv(cin, cout, 1, stride), nn.BatchNorm2d(cout))


class ResNet(nn.Module):
    def __init__(self, block, layers: list[int], num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = 64
        for i, (planes, count) in enumerate(zip((64, 128, 256, 512), layers)):
            blocks = []
            for j in range(count):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(block(cin, planes, stride))
                cin = planes * block.expansion
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18() -> ResNet:
    return ResNet(BasicBlock, [2, 2, 2, 2])


def resnet50() -> ResNet:
    return ResNet(Bottleneck, [3, 4, 6, 3])


# --------------------------------------------------------------------------------------------
# ViT-B/16
# --------------------------------------------------------------------------------------------


class EncoderBlock(nn.Module):
    """Pre-norm transformer block: x + attention(ln_1(x)), then + mlp(ln_2(.))."""

    def __init__(self, heads: int, dim: int, mlp_dim: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(dim, heads, dropout=0.0, batch_first=True)
        self.dropout = nn.Dropout(0.0)
        self.ln_2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(
            nn.Linear(dim, mlp_dim),
            nn.GELU(),
            nn.Dropout(0.0),
            nn.Linear(mlp_dim, dim),
            nn.Dropout(0.0),
        )

    def forward(self, x):
        h = self.ln_1(x)
        h, _ = self.self_attention(h, h, h, need_weights=False)
        x = x + self.dropout(h)
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    def __init__(self, seq: int, layers: int, heads: int, dim: int, mlp_dim: int):
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.empty(1, seq, dim).normal_(std=0.02))
        self.dropout = nn.Dropout(0.0)
        self.layers = nn.Sequential(
            OrderedDict(
                (f"encoder_layer_{i}", EncoderBlock(heads, dim, mlp_dim)) for i in range(layers)
            )
        )
        self.ln = nn.LayerNorm(dim, eps=1e-6)

    def forward(self, x):
        return self.ln(self.layers(self.dropout(x + self.pos_embedding)))


class VisionTransformer(nn.Module):
    def __init__(
        self,
        image_size: int = 224,
        patch_size: int = 16,
        num_layers: int = 12,
        num_heads: int = 12,
        hidden_dim: int = 768,
        mlp_dim: int = 3072,
        num_classes: int = 1000,
    ):
        super().__init__()
        self.patch_size, self.hidden_dim = patch_size, hidden_dim
        self.conv_proj = nn.Conv2d(3, hidden_dim, patch_size, patch_size)
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden_dim))
        seq = (image_size // patch_size) ** 2 + 1
        self.encoder = Encoder(seq, num_layers, num_heads, hidden_dim, mlp_dim)
        self.heads = nn.Sequential(OrderedDict(head=nn.Linear(hidden_dim, num_classes)))
        fan_in = 3 * patch_size * patch_size
        nn.init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1 / fan_in))

    def forward(self, x):
        n = x.shape[0]
        x = self.conv_proj(x).reshape(n, self.hidden_dim, -1).permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1)
        return self.heads(self.encoder(x)[:, 0])


def vit_b_16(image_size: int = 224, **dims) -> VisionTransformer:
    return VisionTransformer(image_size=image_size, **dims)


# --------------------------------------------------------------------------------------------
# MobileNetV3-Large
# --------------------------------------------------------------------------------------------


def _divisible(v: float, by: int = 8) -> int:
    """Rounds channel counts to a multiple of 8, never more than 10% down."""
    out = max(by, int(v + by / 2) // by * by)
    return out + by if out < 0.9 * v else out


def _conv_bn_act(cin, cout, k, stride=1, groups=1, act=None) -> nn.Sequential:
    layers = [_conv(cin, cout, k, stride, groups), nn.BatchNorm2d(cout, eps=0.001, momentum=0.01)]
    if act is not None:
        layers.append(act(inplace=True))
    return nn.Sequential(*layers)


class SqueezeExcitation(nn.Module):
    def __init__(self, channels: int, squeeze: int):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = nn.ReLU()
        self.scale_activation = nn.Hardsigmoid()

    def forward(self, x):
        scale = self.fc2(self.activation(self.fc1(self.avgpool(x))))
        return x * self.scale_activation(scale)


class InvertedResidual(nn.Module):
    def __init__(self, cin, k, expanded, cout, se: bool, act, stride: int):
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        layers = []
        if expanded != cin:
            layers.append(_conv_bn_act(cin, expanded, 1, act=act))
        layers.append(_conv_bn_act(expanded, expanded, k, stride, groups=expanded, act=act))
        if se:
            layers.append(SqueezeExcitation(expanded, _divisible(expanded // 4)))
        layers.append(_conv_bn_act(expanded, cout, 1))
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        out = self.block(x)
        return out + x if self.use_res_connect else out


# input channels, kernel, expanded channels, output channels, squeeze-excitation, activation,
# stride: the Large configuration
_RE, _HS = nn.ReLU, nn.Hardswish
MOBILENET_V3_LARGE = [
    (16, 3, 16, 16, False, _RE, 1),
    (16, 3, 64, 24, False, _RE, 2),
    (24, 3, 72, 24, False, _RE, 1),
    (24, 5, 72, 40, True, _RE, 2),
    (40, 5, 120, 40, True, _RE, 1),
    (40, 5, 120, 40, True, _RE, 1),
    (40, 3, 240, 80, False, _HS, 2),
    (80, 3, 200, 80, False, _HS, 1),
    (80, 3, 184, 80, False, _HS, 1),
    (80, 3, 184, 80, False, _HS, 1),
    (80, 3, 480, 112, True, _HS, 1),
    (112, 3, 672, 112, True, _HS, 1),
    (112, 5, 672, 160, True, _HS, 2),
    (160, 5, 960, 160, True, _HS, 1),
    (160, 5, 960, 160, True, _HS, 1),
]


class MobileNetV3(nn.Module):
    def __init__(self, num_classes: int = 1000, last_channel: int = 1280):
        super().__init__()
        layers = [_conv_bn_act(3, 16, 3, 2, act=_HS)]
        layers += [InvertedResidual(*cfg) for cfg in MOBILENET_V3_LARGE]
        last_in = MOBILENET_V3_LARGE[-1][3]
        layers.append(_conv_bn_act(last_in, 6 * last_in, 1, act=_HS))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(6 * last_in, last_channel),
            nn.Hardswish(inplace=True),
            nn.Dropout(0.2, inplace=True),
            nn.Linear(last_channel, num_classes),
        )
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v3_large() -> MobileNetV3:
    return MobileNetV3()


MODELS = {
    "resnet18": resnet18,
    "resnet50": resnet50,
    "vit_b_16": vit_b_16,
    "mobilenet_v3_large": mobilenet_v3_large,
}
