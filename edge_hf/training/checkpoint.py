"""A trained model on disk: the checkpoint (.pt) with its resolved config, and an exported model
(.onnx) behind the same nn.Module call interface.

Below `train`, `evaluate` and `export`, which all read models, so that none of them needs another.
"""

from __future__ import annotations

import pickle
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import nn

from edge_hf.core.contract import INPUT_NAME, OUTPUT_NAME
from edge_hf.core.errors import UserError
from edge_hf.core.runtime import contract_of, open_session
from edge_hf.training.config import TrainConfig
from edge_hf.training.models import build_model


def save_checkpoint(
    path: Path, model: nn.Module, cfg: TrainConfig, classes: list[str], **extra: Any
) -> None:
    """The weights, the resolved config and the class names (and `extra`) in one file."""
    torch.save(
        {"model": model.state_dict(), "config": asdict(cfg), "classes": classes, **extra}, path
    )


def read_checkpoint(path: Path) -> dict[str, Any]:
    """The saved dict of an edge_hf checkpoint; a one-line error if it is not one."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as exc:
        raise UserError(f"{path}: cannot read this checkpoint ({exc})") from None
    if not isinstance(ckpt, dict) or "config" not in ckpt:
        raise UserError(f"{path}: not an edge_hf checkpoint (no saved config)")
    return ckpt


def load_checkpoint(path: Path) -> tuple[nn.Module, TrainConfig, list[str]]:
    """The trained model (eval mode), its resolved config and its class names."""
    ckpt = read_checkpoint(path)
    cfg = TrainConfig.from_dict(ckpt["config"])
    classes = list(ckpt["classes"])
    # Only the architecture matters here: the weights come from the checkpoint.
    model = build_model(
        cfg.backbone, cfg.window, len(classes), cfg.volumes, stem_kernel=cfg.stem_kernel
    )
    model.load_state_dict(ckpt["model"])
    model.eval()
    return model, cfg, classes


class OnnxClassifier(nn.Module):
    """An exported model behind the nn.Module call interface, run by ONNX Runtime on the CPU."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.session = open_session(path)
        self.contract = contract_of(self.session, path)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.session.run([OUTPUT_NAME], {INPUT_NAME: x.numpy()})[0]
        return torch.from_numpy(out)
