"""Export a checkpoint to ONNX that carries its own contract, verified against PyTorch."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from edge_hf.core.contract import INPUT_NAME, OUTPUT_NAME, ModelContract
from edge_hf.core.runtime import open_session
from edge_hf.training.checkpoint import load_checkpoint
from edge_hf.training.config import contract_from_config

log = logging.getLogger(__name__)

OPSET = 17  # TensorRT 8.5+ (JetPack 5.1 and 6) parses it


class ExportError(Exception):
    """The exported model failed the ONNX checker or disagrees with PyTorch."""


class ProbabilityMean(nn.Module):
    """Several models of one contract as one: the log of their mean softmax probabilities.

    The output stays a valid logit vector for the daemon (softmax(log p) = p), so an ensemble
    runs through the classifier, calibration and detector unchanged, in one ONNX session.

    `mirrored`: each member also sees the window mirrored left-right (the same flip on every
    frame, as in training), and the mean runs over both views: twice the compute per window.
    """

    def __init__(self, members: list[nn.Module], mirrored: bool = False) -> None:
        super().__init__()
        self.members = nn.ModuleList(members)
        self.mirrored = mirrored

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        views = [x, x.flip(-1)] if self.mirrored else [x]
        probs = torch.stack([m(v).softmax(dim=1) for m in self.members for v in views])
        return probs.mean(dim=0).clamp_min(1e-12).log()  # (no mass on a class: still finite)


def export_onnx(
    checkpoint: Path | Sequence[Path],
    out: Path,
    atol: float = 1e-3,
    sample: torch.Tensor | None = None,
    threshold: float | None = None,
    confirm_s: float | None = None,
    mirrored: bool = False,
    static_padding: bool = True,
) -> ModelContract:
    """Write `out` from `checkpoint`, then run the ONNX checker and an ORT-vs-PyTorch parity check.

    `static_padding` (default): TensorFlow-"same" convolutions (EfficientNet-Lite0) get their
    padding computed for the model's fixed input size (`with_static_padding`), checked to give
    the same output; False keeps the padding computed at run time.

    Several checkpoints (one recipe, other seeds) become one model, `ProbabilityMean`, with
    their shared contract (`members` = how many); an ExportError names the first contract key
    on which they differ (a window built for one would be wrong for another).
    `mirrored`: the mean also over each window mirrored (test-time augmentation, `ProbabilityMean`).
    `threshold` / `confirm_s` record the operating point the model was benchmarked at: the daemon
    uses them unless its config sets `model.threshold` / `detection.confirm_s`.
    Raises ExportError when the checker fails or the largest logit difference exceeds `atol`.
    """
    paths = [checkpoint] if isinstance(checkpoint, Path) else list(checkpoint)
    if not paths:
        raise ExportError("no checkpoint to export")
    models, contracts = [], []
    for path in paths:
        model, cfg, classes = load_checkpoint(path)
        models.append(model)
        contracts.append(contract_from_config(cfg, classes))
    for path, contract in zip(paths[1:], contracts[1:], strict=True):
        if contract != contracts[0]:
            diff = [
                f"{f.name}: {getattr(contracts[0], f.name)!r} vs {getattr(contract, f.name)!r}"
                for f in fields(contract)
                if getattr(contract, f.name) != getattr(contracts[0], f.name)
            ]
            raise ExportError(f"{path} does not fit {paths[0]} in one model ({'; '.join(diff)})")
    contract = replace(
        contracts[0],
        threshold=threshold,
        confirm_s=confirm_s,
        members=len(models),
        mirrored=mirrored,
    )
    net = (
        models[0] if len(models) == 1 and not mirrored else ProbabilityMean(models, mirrored).eval()
    )
    h, w = contract.input_size
    channels = 3 * contract.window * contract.volumes
    x = sample if sample is not None else torch.randn(3, channels, h, w)
    if static_padding:
        net = with_static_padding(net, (channels, h, w), x)
    write_onnx(net, contract, out)
    check_parity(net, out, x, atol)
    return contract


class StaticSameConv(nn.Module):
    """A TensorFlow-"same" convolution (timm's `Conv2dSame`) whose padding was computed once for
    a fixed input size: a constant pad (only when it is uneven) and a plain conv, instead of the
    Shape/Ceil/Sub/Pad arithmetic the dynamic one exports (simpler for TensorRT)."""

    def __init__(self, conv: nn.Conv2d, pads: tuple[int, int, int, int]) -> None:
        super().__init__()
        left, right, top, bottom = pads
        even = left == right and top == bottom
        self.conv = nn.Conv2d(
            conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,  # type: ignore[arg-type]
            (top, left) if even else 0, conv.dilation, conv.groups, conv.bias is not None,  # type: ignore[arg-type]
        )  # fmt: skip
        self.conv.weight = conv.weight
        self.conv.bias = conv.bias
        self.pad = None if even else nn.ZeroPad2d(pads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x if self.pad is None else self.pad(x))


def _same_pads(size: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """(before, after) padding of TensorFlow "same", by timm's own rule (the one Conv2dSame
    applies at run time)."""
    from timm.layers.padding import get_same_padding

    total = int(get_same_padding(size, kernel, stride, dilation))
    return total // 2, total - total // 2


def with_static_padding(
    model: nn.Module, input_chw: tuple[int, int, int], sample: torch.Tensor
) -> nn.Module:
    """`model` with every `Conv2dSame` replaced by a `StaticSameConv` for inputs of `input_chw`
    (the model's fixed size); checked to give the same output on `sample` (ExportError if not).
    A model without same-padded convs comes back as it is."""
    same = [(n, m) for n, m in model.named_modules() if type(m).__name__ == "Conv2dSame"]
    if not same:
        return model
    sizes: dict[str, tuple[int, int]] = {}

    def record(name: str) -> Any:
        def hook(_module: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
            sizes.setdefault(name, (int(args[0].shape[-2]), int(args[0].shape[-1])))

        return hook

    hooks = [m.register_forward_pre_hook(record(n)) for n, m in same]
    with torch.no_grad():
        before = model.eval()(torch.zeros(1, *input_chw))
        reference = model(sample)
    for h in hooks:
        h.remove()
    for name, conv in same:
        (ih, iw), (kh, kw) = sizes[name], conv.kernel_size
        top, bottom = _same_pads(ih, kh, conv.stride[0], conv.dilation[0])
        left, right = _same_pads(iw, kw, conv.stride[1], conv.dilation[1])
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, attr, StaticSameConv(conv, (left, right, top, bottom)))
    with torch.no_grad():
        diff = float((model(sample) - reference).abs().max())
        diff = max(diff, float((model(torch.zeros(1, *input_chw)) - before).abs().max()))
    if diff > 1e-5:
        raise ExportError(f"static padding changed the output (max |diff| {diff:.2e})")
    log.info("static padding: %d same-padded convs fixed for %s input", len(same), input_chw)
    return model


def write_onnx(model: nn.Module, contract: ModelContract, out: Path) -> None:
    """Export `model` (dynamic batch, opset OPSET) with `contract` as metadata; run the checker."""
    import onnx

    h, w = contract.input_size
    channels = 3 * contract.window * contract.volumes
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(
        model,
        (torch.randn(2, channels, h, w),),
        str(out),
        input_names=[INPUT_NAME],
        output_names=[OUTPUT_NAME],
        dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}},
        opset_version=OPSET,
        dynamo=False,
    )
    proto = onnx.load(str(out))
    del proto.metadata_props[:]
    for key, value in contract.to_metadata().items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    proto.doc_string = (
        f"edge_hf {contract.backbone}{contract.members_note} T={contract.window} "
        f"classes={list(contract.classes)}"
    )
    onnx.save(proto, str(out))
    try:
        onnx.checker.check_model(str(out), full_check=True)
    except onnx.checker.ValidationError as exc:
        raise ExportError(f"{out}: ONNX checker failed: {exc}") from None


def check_parity(model: nn.Module, onnx_path: Path, x: torch.Tensor, atol: float) -> float:
    """Largest |ORT - PyTorch| logit difference on `x`; ExportError when above `atol`."""
    session = open_session(onnx_path)
    with torch.no_grad():
        expected = model.eval()(x).numpy()
    got = session.run([OUTPUT_NAME], {INPUT_NAME: x.numpy().astype(np.float32)})[0]
    if got.shape != expected.shape:
        raise ExportError(
            f"{onnx_path}: ONNX Runtime gives logits of shape {got.shape}, PyTorch {expected.shape}"
        )
    diff = float(np.abs(got - expected).max())
    if diff > atol:
        raise ExportError(
            f"{onnx_path}: ONNX Runtime and PyTorch disagree (max |diff| {diff:.2e} > {atol:g})"
        )
    log.info("parity: max |ORT - PyTorch| = %.2e on %d samples", diff, x.shape[0])
    return diff
