"""The contract a model carries in its ONNX metadata: window, interval, size, stats, classes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from edge_hf.errors import UserError

INPUT_NAME, OUTPUT_NAME = "hyperframe", "logits"
CHANNEL_ORDER = "time-major-rgb"  # channels 3k..3k+2 are frame k's R, G, B, oldest frame first


@dataclass(frozen=True)
class ModelContract:
    """What the daemon needs to know about a model, read from (and written to) its ONNX metadata."""

    window: int
    interval_ms: float
    input_size: tuple[int, int]  # (H, W)
    mean: tuple[float, float, float]  # 0-1 scale, per RGB channel
    std: tuple[float, float, float]
    classes: tuple[str, ...]
    fall_class: str
    backbone: str
    volumes: int = 1
    channel_order: str = CHANNEL_ORDER

    def to_metadata(self) -> dict[str, str]:
        return {
            "edge_hf.window": str(self.window),
            "edge_hf.interval_ms": f"{self.interval_ms:g}",
            "edge_hf.input_size": f"{self.input_size[0]},{self.input_size[1]}",
            "edge_hf.mean": json.dumps(list(self.mean)),
            "edge_hf.std": json.dumps(list(self.std)),
            "edge_hf.stats_scale": "0-1 (pixel / 255)",
            "edge_hf.classes": json.dumps(list(self.classes)),
            "edge_hf.fall_class": self.fall_class,
            "edge_hf.channel_order": self.channel_order,
            "edge_hf.backbone": self.backbone,
            "edge_hf.volumes": str(self.volumes),
        }

    @classmethod
    def from_metadata(cls, meta: dict[str, str], source: str = "model") -> ModelContract:
        """Parse the metadata; a missing or malformed key is a one-line error naming it."""

        def get(key: str) -> str:
            if f"edge_hf.{key}" not in meta:
                raise ValueError(
                    f"{source}: metadata key edge_hf.{key} is missing (not an edge_hf export?)"
                )
            return meta[f"edge_hf.{key}"]

        try:
            h, w = (int(v) for v in get("input_size").split(","))
            mean, std = json.loads(get("mean")), json.loads(get("std"))
            return cls(
                window=int(get("window")),
                interval_ms=float(get("interval_ms")),
                input_size=(h, w),
                mean=(float(mean[0]), float(mean[1]), float(mean[2])),
                std=(float(std[0]), float(std[1]), float(std[2])),
                classes=tuple(json.loads(get("classes"))),
                fall_class=get("fall_class"),
                backbone=get("backbone"),
                volumes=int(meta.get("edge_hf.volumes", "1")),
                channel_order=get("channel_order"),
            )
        except (ValueError, IndexError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{source}: bad edge_hf metadata ({exc})") from None


def read_contract(path: Path) -> ModelContract:
    """The model's contract from its ONNX metadata; a one-line UserError if unusable."""
    import onnxruntime as ort

    if not path.is_file():
        raise UserError(f"model.path: {path} does not exist (see models/ for shipped models)")
    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own InvalidProtobuf/Fail types
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"model.path: {path} is not a loadable ONNX model ({msg})") from None
    try:
        return ModelContract.from_metadata(session.get_modelmeta().custom_metadata_map, str(path))
    except ValueError as exc:
        raise UserError(f"model.path: {exc}") from None
