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
googlenet       6,624,904    1.50             Szegedy et al. 2015 (Inception v1) as in
                                              torchvision: BN after every conv, 3x3
                                              (not 5x5) "5x5" branch, no aux classifiers
resnet18        11,689,512   1.81             He et al. 2016
resnet50        25,557,032   4.09             He et al. 2016, v1.5 (stride on the 3x3)
densenet121     7,978,856    2.83             Huang et al. 2017, growth 32, (6,12,24,16)
mobilenet_v2    3,504,872    0.30             Sandler et al. 2018, width 1.0
squeezenet1_1   1,235,496    0.35             Iandola et al. 2016, v1.1
==============  ===========  ===============  ==========================================

Dropout layers are kept (they are identities in eval mode and vanish from exported
graphs). GoogLeNet's optional input transform (``transform_input``) is not applied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

__all__ = [
    "MODELS",
    "make_inputs",
    "alexnet",
    "vgg16",
    "googlenet",
    "resnet18",
    "resnet50",
    "densenet121",
    "mobilenet_v2",
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
class BasicConv2d(nn.Sequential):
    """Convolution (no bias), batch norm (eps 1e-3), ReLU: torchvision's GoogLeNet unit."""

    def __init__(self, cin: int, cout: int, kernel_size: int, stride: int = 1, padding: int = 0):
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


# ---------------------------------------------------------------------- MobileNetV2
class ConvBNReLU6(nn.Sequential):
    """Convolution (no bias), batch norm, ReLU6."""

    def __init__(self, cin: int, cout: int, kernel_size: int = 3, stride: int = 1, groups: int = 1):
        super().__init__(
            nn.Conv2d(
                cin, cout, kernel_size, stride, (kernel_size - 1) // 2, groups=groups, bias=False
            ),
            nn.BatchNorm2d(cout),
            nn.ReLU6(inplace=True),
        )


class InvertedResidual(nn.Module):
    """1x1 expansion (t), 3x3 depthwise, linear 1x1 projection; residual when shapes allow."""

    def __init__(self, cin: int, cout: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = int(round(cin * expand_ratio))
        self.use_res_connect = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvBNReLU6(cin, hidden, 1))
        layers += [
            ConvBNReLU6(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (Sandler et al., "Inverted Residuals and Linear Bottlenecks", CVPR 2018)."""

    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))  # fmt: skip

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [ConvBNReLU6(3, 32, stride=2)]
        cin = 32
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(ConvBNReLU6(cin, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.features(x))
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
def _with_size(model: nn.Module, image_size: int) -> nn.Module:
    if isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 32:
        raise ValueError(f"image_size must be an int >= 32, got {image_size!r}")
    model.image_size = image_size
    return model


def alexnet(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """AlexNet, torchvision variant (61.1 M parameters, 0.71 GMACs at 224x224)."""
    return _with_size(AlexNet(num_classes), image_size)


def vgg16(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """VGG-16 without batch norm (138.4 M parameters, 15.47 GMACs at 224x224)."""
    return _with_size(VGG(_VGG16_CFG, num_classes), image_size)


def googlenet(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """GoogLeNet as in torchvision, BN, no aux logits (6.62 M parameters, 1.50 GMACs)."""
    return _with_size(GoogLeNet(num_classes), image_size)


def resnet18(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """ResNet-18 (11.69 M parameters, 1.81 GMACs at 224x224)."""
    return _with_size(ResNet(BasicBlock, (2, 2, 2, 2), num_classes), image_size)


def resnet50(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """ResNet-50 v1.5 (25.56 M parameters, 4.09 GMACs at 224x224)."""
    return _with_size(ResNet(Bottleneck, (3, 4, 6, 3), num_classes), image_size)


def densenet121(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """DenseNet-121 (7.98 M parameters, 2.83 GMACs at 224x224)."""
    return _with_size(DenseNet(num_classes=num_classes), image_size)


def mobilenet_v2(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """MobileNetV2, width 1.0 (3.50 M parameters, 0.30 GMACs at 224x224)."""
    return _with_size(MobileNetV2(num_classes), image_size)


def squeezenet1_1(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """SqueezeNet 1.1 (1.235 M parameters, 0.35 GMACs at 224x224)."""
    return _with_size(SqueezeNet(num_classes), image_size)


MODELS: dict[str, Callable[..., nn.Module]] = {
    f.__name__: f
    for f in (
        alexnet,
        vgg16,
        googlenet,
        resnet18,
        resnet50,
        densenet121,
        mobilenet_v2,
        squeezenet1_1,
    )
}


def make_inputs(
    model: nn.Module, batch: int, generator: torch.Generator
) -> tuple[torch.Tensor, ...]:
    """Example input of an image model: one ``[batch, 3, size, size]`` float32 tensor."""
    size = model.image_size
    return (torch.randn(batch, 3, size, size, generator=generator),)
