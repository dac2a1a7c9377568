"""Mobile image classifiers (depthwise convolutions), layer for layer as in torchvision.

Every model is written here (torchvision is not a dependency) and follows the
torchvision reference implementation, so parameter counts and multiply-accumulate
counts match the torchvision model table exactly:

==================  ==========  ===============  =========================================
model               parameters  GMACs (224x224)  reference
==================  ==========  ===============  =========================================
mobilenet_v2        3,504,872   0.30             Sandler et al. 2018, width 1.0: ReLU6
mobilenet_v3_large  5,483,032   0.22             Howard et al. 2019, width 1.0: hardswish,
                                                 squeeze-excitation with hardsigmoid
efficientnet_b0     5,288,548   0.39             Tan & Le 2019: MBConv, SiLU, squeeze-
                                                 excitation with sigmoid
shufflenet_v2_x1_0  2,278,604   0.14             Ma et al. 2018, 1.0x: channel split
                                                 (chunk), channel shuffle (reshape,
                                                 transpose), depthwise 3x3
==================  ==========  ===============  =========================================

The operator kinds they add to the zoo: depthwise convolutions (``groups`` equal to
the channels), ReLU6 / hardswish / hardsigmoid (clips), sigmoid and SiLU gates of
squeeze-excitation blocks (a global average pool, two 1x1 convolutions and a
broadcast multiply), and ShuffleNet's channel split and shuffle. Dropout layers are
kept (identities in eval mode; they vanish from exported graphs); EfficientNet's
stochastic depth is an identity at inference and is left out.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from hetsim.graphs.zoo.cnn import make_inputs, with_size

__all__ = [
    "MODELS",
    "make_inputs",
    "mobilenet_v2",
    "mobilenet_v3_large",
    "efficientnet_b0",
    "shufflenet_v2_x1_0",
    "MobileNetV2",
    "MobileNetV3",
    "EfficientNet",
    "ShuffleNetV2",
]


def _make_divisible(v: float, divisor: int = 8) -> int:
    """Round ``v`` to a multiple of ``divisor``, never below 90 % of ``v`` (torchvision's)."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


class ConvBNAct(nn.Sequential):
    """Convolution (no bias, "same" padding), batch norm, optional activation.

    torchvision's ``Conv2dNormActivation``; ``groups=cin`` makes it depthwise.
    """

    def __init__(
        self,
        cin: int,
        cout: int,
        kernel_size: int = 3,
        stride: int = 1,
        groups: int = 1,
        activation: Callable[[], nn.Module] | None = None,
        eps: float = 1e-5,
    ) -> None:
        layers: list[nn.Module] = [
            nn.Conv2d(
                cin, cout, kernel_size, stride, (kernel_size - 1) // 2, groups=groups, bias=False
            ),
            nn.BatchNorm2d(cout, eps=eps),
        ]
        if activation is not None:
            layers.append(activation())
        super().__init__(*layers)


class SqueezeExcitation(nn.Module):
    """Squeeze-excitation (Hu et al. 2018): global pool, 1x1 reduce, 1x1 expand, gate.

    The input is scaled channel-wise by ``gate(fc2(act(fc1(avgpool(x)))))``.
    """

    def __init__(
        self,
        channels: int,
        squeeze: int,
        activation: Callable[[], nn.Module] = nn.ReLU,
        gate: Callable[[], nn.Module] = nn.Sigmoid,
    ) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = activation()
        self.scale_activation = gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.activation(self.fc1(self.avgpool(x)))
        return self.scale_activation(self.fc2(scale)) * x


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


# ---------------------------------------------------------------------- MobileNetV3
class MobileNetV3Block(nn.Module):
    """1x1 expansion, kxk depthwise, optional hardsigmoid SE, linear 1x1 projection.

    torchvision's MobileNetV3 ``InvertedResidual``: ReLU or hardswish, batch norm
    eps 1e-3, no expansion conv when the expanded width equals the input width.
    """

    def __init__(
        self, cin: int, kernel: int, expanded: int, cout: int, se: bool, hs: bool, stride: int
    ) -> None:
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        act = nn.Hardswish if hs else nn.ReLU
        layers: list[nn.Module] = []
        if expanded != cin:
            layers.append(ConvBNAct(cin, expanded, 1, activation=act, eps=1e-3))
        layers.append(
            ConvBNAct(expanded, expanded, kernel, stride, expanded, activation=act, eps=1e-3)
        )
        if se:
            squeeze = _make_divisible(expanded // 4)
            layers.append(SqueezeExcitation(expanded, squeeze, nn.ReLU, nn.Hardsigmoid))
        layers.append(ConvBNAct(expanded, cout, 1, eps=1e-3))
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return y + x if self.use_res_connect else y


class MobileNetV3(nn.Module):
    """MobileNetV3-Large (Howard et al., "Searching for MobileNetV3", ICCV 2019).

    torchvision's ``mobilenet_v3_large`` at width 1.0: 15 bottlenecks, a 960-channel
    last convolution, a 1280-unit hardswish classifier layer (5,483,032 parameters).
    """

    #: input, kernel, expanded, output, squeeze-excitation, hardswish, stride
    SETTINGS = (
        (16, 3, 16, 16, False, False, 1), (16, 3, 64, 24, False, False, 2),
        (24, 3, 72, 24, False, False, 1), (24, 5, 72, 40, True, False, 2),
        (40, 5, 120, 40, True, False, 1), (40, 5, 120, 40, True, False, 1),
        (40, 3, 240, 80, False, True, 2), (80, 3, 200, 80, False, True, 1),
        (80, 3, 184, 80, False, True, 1), (80, 3, 184, 80, False, True, 1),
        (80, 3, 480, 112, True, True, 1), (112, 3, 672, 112, True, True, 1),
        (112, 5, 672, 160, True, True, 2), (160, 5, 960, 160, True, True, 1),
        (160, 5, 960, 160, True, True, 1),
    )  # fmt: skip

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [ConvBNAct(3, 16, 3, 2, activation=nn.Hardswish, eps=1e-3)]
        layers += [MobileNetV3Block(*cfg) for cfg in self.SETTINGS]
        layers.append(ConvBNAct(160, 960, 1, activation=nn.Hardswish, eps=1e-3))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(960, 1280),
            nn.Hardswish(inplace=True),
            nn.Dropout(0.2),
            nn.Linear(1280, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


# --------------------------------------------------------------------- EfficientNet
class MBConv(nn.Module):
    """Mobile inverted bottleneck: 1x1 expansion, kxk depthwise, sigmoid SE, 1x1 projection.

    SiLU activations; the SE block squeezes to a quarter of the *input* channels.
    """

    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        expanded = _make_divisible(cin * expand_ratio)
        layers: list[nn.Module] = []
        if expanded != cin:
            layers.append(ConvBNAct(cin, expanded, 1, activation=nn.SiLU))
        layers += [
            ConvBNAct(expanded, expanded, kernel, stride, expanded, activation=nn.SiLU),
            SqueezeExcitation(expanded, max(1, cin // 4), nn.SiLU, nn.Sigmoid),
            ConvBNAct(expanded, cout, 1),
        ]
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return y + x if self.use_res_connect else y


class EfficientNet(nn.Module):
    """EfficientNet-B0 (Tan & Le, "EfficientNet: Rethinking Model Scaling for CNNs", ICML 2019).

    torchvision's ``efficientnet_b0`` (width and depth 1.0, 5,288,548 parameters);
    stochastic depth, active only in training, is left out.
    """

    #: expand ratio, kernel, stride, input, output, layers
    SETTINGS = ((1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2),
                (6, 3, 2, 40, 80, 3), (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4),
                (6, 3, 1, 192, 320, 1))  # fmt: skip

    def __init__(self, num_classes: int = 1000, dropout: float = 0.2) -> None:
        super().__init__()
        layers: list[nn.Module] = [ConvBNAct(3, 32, 3, 2, activation=nn.SiLU)]
        for t, k, s, cin, cout, n in self.SETTINGS:
            stage = [MBConv(cin, cout, k, s, t)]
            stage += [MBConv(cout, cout, k, 1, t) for _ in range(n - 1)]
            layers.append(nn.Sequential(*stage))
        layers.append(ConvBNAct(320, 1280, 1, activation=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


# --------------------------------------------------------------------- ShuffleNetV2
def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """Interleave the channels of ``groups`` groups: reshape, transpose, reshape."""
    n, c, h, w = x.shape
    x = x.reshape(n, groups, c // groups, h, w).transpose(1, 2)
    return x.reshape(n, c, h, w)


class ShuffleUnit(nn.Module):
    """ShuffleNetV2 unit: split the channels (stride 1) or duplicate the input (stride 2).

    One branch is 1x1-BN-ReLU, 3x3 depthwise-BN, 1x1-BN-ReLU; the other the identity
    (stride 1) or 3x3 depthwise-BN, 1x1-BN-ReLU (stride 2). The halves are
    concatenated and their channels shuffled.
    """

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        half = cout // 2
        if stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False),
                nn.BatchNorm2d(cin),
                nn.Conv2d(cin, half, 1, bias=False),
                nn.BatchNorm2d(half),
                nn.ReLU(inplace=True),
            )
        self.branch2 = nn.Sequential(
            nn.Conv2d(cin if stride > 1 else half, half, 1, bias=False),
            nn.BatchNorm2d(half),
            nn.ReLU(inplace=True),
            nn.Conv2d(half, half, 3, stride, 1, groups=half, bias=False),
            nn.BatchNorm2d(half),
            nn.Conv2d(half, half, 1, bias=False),
            nn.BatchNorm2d(half),
            nn.ReLU(inplace=True),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), 1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), 1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """ShuffleNet V2 1.0x (Ma et al., "ShuffleNet V2: Practical Guidelines", ECCV 2018).

    torchvision's ``shufflenet_v2_x1_0``: stages of 4, 8, 4 units with 116, 232, 464
    channels, a 1024-channel 1x1 convolution, global mean (2,278,604 parameters).
    """

    def __init__(
        self,
        repeats: tuple[int, ...] = (4, 8, 4),
        channels: tuple[int, ...] = (24, 116, 232, 464, 1024),
        num_classes: int = 1000,
    ) -> None:
        super().__init__()
        self.conv1 = nn.Sequential(
            nn.Conv2d(3, channels[0], 3, 2, 1, bias=False),
            nn.BatchNorm2d(channels[0]),
            nn.ReLU(inplace=True),
        )
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = channels[0]
        stages = []
        for n, cout in zip(repeats, channels[1:4]):
            units = [ShuffleUnit(cin, cout, 2)] + [ShuffleUnit(cout, cout, 1) for _ in range(n - 1)]
            stages.append(nn.Sequential(*units))
            cin = cout
        self.stage2, self.stage3, self.stage4 = stages
        self.conv5 = nn.Sequential(
            nn.Conv2d(cin, channels[4], 1, bias=False),
            nn.BatchNorm2d(channels[4]),
            nn.ReLU(inplace=True),
        )
        self.fc = nn.Linear(channels[4], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.conv1(x))
        x = self.conv5(self.stage4(self.stage3(self.stage2(x))))
        return self.fc(x.mean([2, 3]))


# ------------------------------------------------------------------------- registry
def mobilenet_v2(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """MobileNetV2, width 1.0 (3.50 M parameters, 0.30 GMACs at 224x224)."""
    return with_size(MobileNetV2(num_classes), image_size)


def mobilenet_v3_large(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """MobileNetV3-Large, width 1.0 (5.48 M parameters, 0.22 GMACs at 224x224)."""
    return with_size(MobileNetV3(num_classes), image_size)


def efficientnet_b0(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """EfficientNet-B0 (5.29 M parameters, 0.39 GMACs at 224x224)."""
    return with_size(EfficientNet(num_classes), image_size)


def shufflenet_v2_x1_0(*, image_size: int = 224, num_classes: int = 1000) -> nn.Module:
    """ShuffleNet V2 1.0x (2.28 M parameters, 0.14 GMACs at 224x224)."""
    return with_size(ShuffleNetV2(num_classes=num_classes), image_size)


MODELS: dict[str, Callable[..., nn.Module]] = {
    f.__name__: f for f in (mobilenet_v2, mobilenet_v3_large, efficientnet_b0, shufflenet_v2_x1_0)
}
