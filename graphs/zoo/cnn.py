"""Convolutional image classifiers, layer for layer as in torchvision.

Every model is written here (torchvision is not a dependency) and follows the
torchvision reference implementation, so parameter counts and multiply-accumulate
counts match the torchvision model table exactly:

==============  ===========  ===============  ==========================================
model           parameters   GMACs (224x224)  reference
==============  ===========  ===============  ==========================================
alexnet         61,100,840   0.71             Krizhevsky et al. 2012; torchvision variant
                                              (one-GPU "One weird trick" layout, 64-192-
                                              384-256-256 channels)
vgg16           138,357,544  15.47            Simonyan & Zisserman 2015, config D, no BN
googlenet       6,624,904    1.50             Szegedy et al. 2015 (the first Inception) as in
                                              torchvision: BN after every conv, 3x3
                                              (not 5x5) "5x5" branch, no aux classifiers
resnet18        11,689,512   1.81             He et al. 2016
resnet50        25,557,032   4.09             He et al. 2016, v1.5 (stride on the 3x3)
densenet121     7,978,856    2.83             Huang et al. 2017, growth 32, (6,12,24,16)
inception_v3    23,834,568   5.71 (299x299)   Szegedy et al. 2016 as in torchvision: BN
                                              after every conv, factorised 1x7/7x1
                                              convs, no aux classifier
squeezenet1_1   1,235,496    0.35             Iandola et al. 2016, v1.1
==============  ===========  ===============  ==========================================

Dropout layers are kept (they are identities in eval mode and vanish from exported
graphs). The optional input transforms of GoogLeNet and ``inception_v3``
(``transform_input``) are not applied. The depthwise-convolution models (MobileNets,
EfficientNet, ShuffleNet) are in :mod:`graphs.zoo.mobile`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence

import torch
from torch import nn
from torch.nn import functional as F

__all__ = [
    "MODELS",
    "make_inputs",
    "alexnet",
    "vgg16",
    "googlenet",
    "inception_v3",
    "resnet18",
    "resnet50",
    "densenet121",
    "squeezenet1_1",
]


# --------------------------------------------------------------------------- ResNet
class BasicBlock(nn.Module):
    """Two 3x3 convolutions with an identity (or 1x1 projection) shortcut."""

    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = _projection(inplanes, planes * self.expansion, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride: ResNet v1.5), 1x1 expand (x4)."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _projection(inplanes, planes * self.expansion, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


def _projection(inplanes: int, outplanes: int, stride: int) -> nn.Module | None:
    if stride == 1 and inplanes == outplanes:
        return None
    return nn.Sequential(
        nn.Conv2d(inplanes, outplanes, 1, stride, bias=False), nn.BatchNorm2d(outplanes)
    )


class ResNet(nn.Module):
    """ResNet (He et al., "Deep Residual Learning for Image Recognition", CVPR 2016)."""

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        layers: Sequence[int],
        num_classes: int = 1000,
    ) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        inplanes = 64
        stages = []
        for i, (planes, n) in enumerate(zip((64, 128, 256, 512), layers)):
            blocks = []
            for j in range(n):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(block(inplanes, planes, stride))
                inplanes = planes * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512 * block.expansion, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# ------------------------------------------------------------------------------ VGG
class VGG(nn.Module):
    """VGG (Simonyan & Zisserman, ICLR 2015) without batch norm."""

    def __init__(self, cfg: Sequence[int | str], num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, int(v), 3, padding=1), nn.ReLU(inplace=True)]
                cin = int(v)
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(7)
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


_VGG16_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M"] + [512, 512, 512, "M"] * 2


# -------------------------------------------------------------------------- AlexNet
class AlexNet(nn.Module):
    """AlexNet as in torchvision (Krizhevsky 2014, "One weird trick", single tower)."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d(6)
        self.classifier = nn.Sequential(
            nn.Dropout(),
            nn.Linear(256 * 6 * 6, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


# ------------------------------------------------------------------------ GoogLeNet
_Size = int | tuple[int, int]


class BasicConv2d(nn.Sequential):
    """Convolution (no bias), batch norm (eps 1e-3), ReLU: torchvision's GoogLeNet unit."""

    def __init__(
        self, cin: int, cout: int, kernel_size: _Size, stride: int = 1, padding: _Size = 0
    ) -> None:
        super().__init__(
            nn.Conv2d(cin, cout, kernel_size, stride, padding, bias=False),
            nn.BatchNorm2d(cout, eps=0.001),
            nn.ReLU(inplace=True),
        )


class Inception(nn.Module):
    """Inception module: 1x1 | 1x1-3x3 | 1x1-3x3 (torchvision's "5x5") | pool-1x1."""

    def __init__(
        self, cin: int, ch1: int, ch3red: int, ch3: int, ch5red: int, ch5: int, pool_proj: int
    ) -> None:
        super().__init__()
        self.branch1 = BasicConv2d(cin, ch1, 1)
        self.branch2 = nn.Sequential(BasicConv2d(cin, ch3red, 1), BasicConv2d(ch3red, ch3, 3, 1, 1))
        self.branch3 = nn.Sequential(BasicConv2d(cin, ch5red, 1), BasicConv2d(ch5red, ch5, 3, 1, 1))
        self.branch4 = nn.Sequential(
            nn.MaxPool2d(3, 1, 1, ceil_mode=True), BasicConv2d(cin, pool_proj, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branches = (self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x))
        return torch.cat(branches, 1)


class GoogLeNet(nn.Module):
    """GoogLeNet (Szegedy et al., "Going Deeper with Convolutions", CVPR 2015).

    torchvision's layout: batch norm after every convolution, the "5x5" branch with a
    3x3 kernel, no auxiliary classifiers (6,624,904 parameters).
    """

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = BasicConv2d(3, 64, 7, 2, 3)
        self.maxpool1 = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.conv2 = BasicConv2d(64, 64, 1)
        self.conv3 = BasicConv2d(64, 192, 3, 1, 1)
        self.maxpool2 = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.inception3a = Inception(192, 64, 96, 128, 16, 32, 32)
        self.inception3b = Inception(256, 128, 128, 192, 32, 96, 64)
        self.maxpool3 = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.inception4a = Inception(480, 192, 96, 208, 16, 48, 64)
        self.inception4b = Inception(512, 160, 112, 224, 24, 64, 64)
        self.inception4c = Inception(512, 128, 128, 256, 24, 64, 64)
        self.inception4d = Inception(512, 112, 144, 288, 32, 64, 64)
        self.inception4e = Inception(528, 256, 160, 320, 32, 128, 128)
        self.maxpool4 = nn.MaxPool2d(2, 2, ceil_mode=True)
        self.inception5a = Inception(832, 256, 160, 320, 32, 128, 128)
        self.inception5b = Inception(832, 384, 192, 384, 48, 128, 128)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool1(self.conv1(x))
        x = self.maxpool2(self.conv3(self.conv2(x)))
        x = self.maxpool3(self.inception3b(self.inception3a(x)))
        x = self.inception4c(self.inception4b(self.inception4a(x)))
        x = self.maxpool4(self.inception4e(self.inception4d(x)))
        x = self.inception5b(self.inception5a(x))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(self.dropout(x))


# ---------------------------------------------------------------------- inception_v3
class InceptionA(nn.Module):
    """35x35 module: 1x1 | 1x1-5x5 | 1x1-3x3-3x3 | avg pool 3x3 (stride 1)-1x1."""

    def __init__(self, cin: int, pool_features: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(cin, 64, 1)
        self.branch5x5_1 = BasicConv2d(cin, 48, 1)
        self.branch5x5_2 = BasicConv2d(48, 64, 5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(cin, 64, 1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, 3, padding=1)
        self.branch_pool = BasicConv2d(cin, pool_features, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.branch1x1(x)
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = self.branch_pool(F.avg_pool2d(x, 3, 1, 1))
        return torch.cat((b1, b5, b3, bp), 1)


class InceptionB(nn.Module):
    """35 -> 17 grid reduction: 3x3/2 | 1x1-3x3-3x3/2 | max pool 3x3/2."""

    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch3x3 = BasicConv2d(cin, 384, 3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(cin, 64, 1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.branch3x3(x)
        b3dbl = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat((b3, b3dbl, F.max_pool2d(x, 3, 2)), 1)


class InceptionC(nn.Module):
    """17x17 module with 7x7 convolutions factorised into 1x7 and 7x1 (``c7`` channels)."""

    def __init__(self, cin: int, c7: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(cin, 192, 1)
        self.branch7x7_1 = BasicConv2d(cin, c7, 1)
        self.branch7x7_2 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7_3 = BasicConv2d(c7, 192, (7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = BasicConv2d(cin, c7, 1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = BasicConv2d(c7, 192, (1, 7), padding=(0, 3))
        self.branch_pool = BasicConv2d(cin, 192, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.branch1x1(x)
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        b7dbl = self.branch7x7dbl_2(self.branch7x7dbl_1(x))
        b7dbl = self.branch7x7dbl_5(self.branch7x7dbl_4(self.branch7x7dbl_3(b7dbl)))
        bp = self.branch_pool(F.avg_pool2d(x, 3, 1, 1))
        return torch.cat((b1, b7, b7dbl, bp), 1)


class InceptionD(nn.Module):
    """17 -> 8 grid reduction: 1x1-3x3/2 | 1x1-1x7-7x1-3x3/2 | max pool 3x3/2."""

    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch3x3_1 = BasicConv2d(cin, 192, 1)
        self.branch3x3_2 = BasicConv2d(192, 320, 3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(cin, 192, 1)
        self.branch7x7x3_2 = BasicConv2d(192, 192, (1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(192, 192, (7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(192, 192, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_2(self.branch7x7x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(b7))
        return torch.cat((b3, b7, F.max_pool2d(x, 3, 2)), 1)


class InceptionE(nn.Module):
    """8x8 module with expanded filter banks: 3x3s split into parallel 1x3 and 3x1."""

    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(cin, 320, 1)
        self.branch3x3_1 = BasicConv2d(cin, 384, 1)
        self.branch3x3_2a = BasicConv2d(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(384, 384, (3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(cin, 448, 1)
        self.branch3x3dbl_2 = BasicConv2d(448, 384, 3, padding=1)
        self.branch3x3dbl_3a = BasicConv2d(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(384, 384, (3, 1), padding=(1, 0))
        self.branch_pool = BasicConv2d(cin, 192, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.branch1x1(x)
        b3 = self.branch3x3_1(x)
        b3 = torch.cat((self.branch3x3_2a(b3), self.branch3x3_2b(b3)), 1)
        b3dbl = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        b3dbl = torch.cat((self.branch3x3dbl_3a(b3dbl), self.branch3x3dbl_3b(b3dbl)), 1)
        bp = self.branch_pool(F.avg_pool2d(x, 3, 1, 1))
        return torch.cat((b1, b3, b3dbl, bp), 1)


class Inception3(nn.Module):
    """The third Inception network (Szegedy et al., "Rethinking the Inception Architecture", CVPR 2016).

    torchvision's ``inception_v3`` at inference: BN (eps 1e-3) after every
    convolution, 299x299 inputs (at least 75x75: the last grid reduction needs a 3x3
    input), no auxiliary classifier: 23,834,568 parameters, torchvision's 27,161,264
    less the 3,326,696 of ``AuxLogits`` (which runs in training only).
    """

    def __init__(self, num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        self.Conv2d_1a_3x3 = BasicConv2d(3, 32, 3, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(32, 32, 3)
        self.Conv2d_2b_3x3 = BasicConv2d(32, 64, 3, padding=1)
        self.maxpool1 = nn.MaxPool2d(3, 2)
        self.Conv2d_3b_1x1 = BasicConv2d(64, 80, 1)
        self.Conv2d_4a_3x3 = BasicConv2d(80, 192, 3)
        self.maxpool2 = nn.MaxPool2d(3, 2)
        self.Mixed_5b = InceptionA(192, 32)
        self.Mixed_5c = InceptionA(256, 64)
        self.Mixed_5d = InceptionA(288, 64)
        self.Mixed_6a = InceptionB(288)
        self.Mixed_6b = InceptionC(768, 128)
        self.Mixed_6c = InceptionC(768, 160)
        self.Mixed_6d = InceptionC(768, 160)
        self.Mixed_6e = InceptionC(768, 192)
        self.Mixed_7a = InceptionD(768)
        self.Mixed_7b = InceptionE(1280)
        self.Mixed_7c = InceptionE(2048)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x)))
        x = self.maxpool2(self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(self.maxpool1(x))))
        x = self.Mixed_6a(self.Mixed_5d(self.Mixed_5c(self.Mixed_5b(x))))
        x = self.Mixed_6e(self.Mixed_6d(self.Mixed_6c(self.Mixed_6b(x))))
        x = self.Mixed_7c(self.Mixed_7b(self.Mixed_7a(x)))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(self.dropout(x))


# ------------------------------------------------------------------------- DenseNet
class DenseLayer(nn.Module):
    """BN-ReLU-1x1 (4k channels) then BN-ReLU-3x3 (k channels), concatenated to the input."""

    def __init__(self, cin: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(cin)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, 1, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv1(self.relu1(self.norm1(x)))
        y = self.conv2(self.relu2(self.norm2(y)))
        return torch.cat((x, y), 1)


class Transition(nn.Sequential):
    """BN-ReLU-1x1 conv halving the channels, then 2x2 average pooling."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(
            nn.BatchNorm2d(cin),
            nn.ReLU(inplace=True),
            nn.Conv2d(cin, cout, 1, bias=False),
            nn.AvgPool2d(2, 2),
        )


class DenseNet(nn.Module):
    """DenseNet-BC (Huang et al., "Densely Connected Convolutional Networks", CVPR 2017).

    Each dense layer concatenates its output to its input (the memory-efficient
    torchvision variant concatenates all earlier features once per layer; the
    arithmetic and parameters are the same).
    """

    def __init__(
        self,
        growth: int = 32,
        block_config: Sequence[int] = (6, 12, 24, 16),
        num_init_features: int = 64,
        bn_size: int = 4,
        num_classes: int = 1000,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(3, num_init_features, 7, 2, 3, bias=False),
            nn.BatchNorm2d(num_init_features),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        ]
        c = num_init_features
        for i, n in enumerate(block_config):
            for _ in range(n):
                layers.append(DenseLayer(c, growth, bn_size))
                c += growth
            if i != len(block_config) - 1:
                layers.append(Transition(c, c // 2))
                c //= 2
        layers += [nn.BatchNorm2d(c), nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(c, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


# ----------------------------------------------------------------------- SqueezeNet
class Fire(nn.Module):
    """Squeeze 1x1, then parallel 1x1 and 3x3 expands, concatenated."""

    def __init__(self, cin: int, squeeze: int, e1: int, e3: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze, e1, 1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze, e3, 3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.squeeze_activation(self.squeeze(x))
        a = self.expand1x1_activation(self.expand1x1(x))
        b = self.expand3x3_activation(self.expand3x3(x))
        return torch.cat((a, b), 1)


class SqueezeNet(nn.Module):
    """SqueezeNet 1.1 (Iandola et al. 2016; the v1.1 layout of the reference repository)."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(64, 16, 64, 64),
            Fire(128, 16, 64, 64),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(128, 32, 128, 128),
            Fire(256, 32, 128, 128),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(256, 48, 192, 192),
            Fire(384, 48, 192, 192),
            Fire(384, 64, 256, 256),
            Fire(512, 64, 256, 256),
        )
        self.classifier = nn.Sequential(
            nn.Dropout(0.5),
            nn.Conv2d(512, num_classes, 1),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.classifier(self.features(x)), 1)


# ------------------------------------------------------------------------- registry
def with_size(model: nn.Module, image_size: int, minimum: int = 32) -> nn.Module:
    if isinstance(image_size, bool) or not isinstance(image_size, numbers.Integral) or image_size < minimum:
        raise ValueError(f"image_size must be an int >= {minimum}, got {image_size!r}")
    model.image_size = image_size
    return model


def alexnet(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """AlexNet, torchvision variant (61.1 M parameters, 0.71 GMACs at 224x224)."""
    return with_size(AlexNet(num_classes), image_size)


def vgg16(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """VGG-16 without batch norm (138.4 M parameters, 15.47 GMACs at 224x224)."""
    return with_size(VGG(_VGG16_CFG, num_classes), image_size)


def googlenet(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """GoogLeNet as in torchvision, BN, no aux logits (6.62 M parameters, 1.50 GMACs)."""
    return with_size(GoogLeNet(num_classes), image_size)


def inception_v3(*, image_size: int = 299, num_classes: int = 1000) -> nn.Module:
    """torchvision's ``inception_v3``, no aux logits (23.83 M parameters, 5.71 GMACs at 299)."""
    return with_size(Inception3(num_classes), image_size, minimum=75)


def resnet18(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """ResNet-18 (11.69 M parameters, 1.81 GMACs at 224x224)."""
    return with_size(ResNet(BasicBlock, (2, 2, 2, 2), num_classes), image_size)


def resnet50(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """ResNet-50 v1.5 (25.56 M parameters, 4.09 GMACs at 224x224)."""
    return with_size(ResNet(Bottleneck, (3, 4, 6, 3), num_classes), image_size)


def densenet121(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """DenseNet-121 (7.98 M parameters, 2.83 GMACs at 224x224)."""
    return with_size(DenseNet(num_classes=num_classes), image_size)


def squeezenet1_1(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """SqueezeNet 1.1 (1.235 M parameters, 0.35 GMACs at 224x224)."""
    return with_size(SqueezeNet(num_classes), image_size)


MODELS: dict[str, Callable[..., nn.Module]] = {
    f.__name__: f
    for f in (
        alexnet,
        vgg16,
        googlenet,
        inception_v3,
        resnet18,
        resnet50,
        densenet121,
        squeezenet1_1,
    )
}


def make_inputs(
    model: nn.Module, batch: int, generator: torch.Generator
) -> tuple[torch.Tensor, ...]:
    """Example input of an image model: one ``[batch, 3, size, size]`` float32 tensor."""
    size = model.image_size
    return (torch.randn(batch, 3, size, size, generator=generator),)
