"""The contract a model carries in its ONNX metadata: window, interval, size, stats, classes."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO

INPUT_NAME, OUTPUT_NAME = "hyperframe", "logits"
CHANNEL_ORDER = "time-major-rgb"  # channels 3k..3k+2 are frame k's R, G, B, oldest frame first


# How a frame is brought to the model's size (see edge_hf.core.video.shrink). A model records the
# rule it was trained with (metadata `edge_hf.resize`) and the daemon resizes by that rule.
RESIZES = ("area", "linear2x-area")
RESIZE = "linear2x-area"  # what new models are trained with

# The person stage's pose model and how it runs unless configured (`person.model`, `person.side`,
# `person.rate_hz`; re-exported by edge_hf.core.pose). Here, with no OpenCV to load, so the
# config and the CLI read them as cheaply as the rest of the contract.
POSE_MODEL = Path("models/person-movenet-multipose-lightning.onnx")
POSE_SIDE = 256  # the long side MoveNet runs at (the size it was trained at)
POSE_RATE_HZ = 5.0  # pose ticks a second per camera


@dataclass(frozen=True)
class PersonCropRule:
    """How a person-crop model's window follows the people (edge_hf.core.personcrop cuts by it).

    Data the contract carries (metadata `edge_hf.crop_rule`, this as JSON), so it lives here and
    the contract needs no crop or pose module to check it.
    """

    margin: float = 0.3
    min_fraction: float = 0.5
    lookback_s: float = 0.6
    hold_s: float = 3.0
    rate_hz: float = POSE_RATE_HZ  # the pose ticks the model was trained with (person.rate_hz)

    def __post_init__(self) -> None:
        if not 0.0 < self.min_fraction <= 1.0 or self.margin < 0:
            raise ValueError(f"min_fraction in (0, 1] and margin >= 0 (got {self})")
        if self.lookback_s <= 0 or self.hold_s < self.lookback_s or self.rate_hz <= 0:
            raise ValueError(f"lookback_s > 0, hold_s >= lookback_s, rate_hz > 0 (got {self})")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PersonCropRule:
        return cls(**{k: float(v) for k, v in json.loads(text).items()})


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
    # The class of "a person on the floor after a fall" when the model has one (classes adl,
    # falling, down): the daemon can then confirm a fall by the person staying down.
    down_class: str | None = None
    # The operating point the model was benchmarked at, used unless the config sets its own.
    threshold: float | None = None
    confirm_s: float | None = None
    # How frames are brought to input_size (edge_hf.core.video.RESIZES); models exported before
    # the key existed were trained with "area".
    resize: str = "area"
    # Models averaged into this one (`export_onnx` of several checkpoints: its output is the log
    # of their mean softmax, so the daemon's softmax gives the mean probabilities); 1: one model.
    members: int = 1
    # Each window is also scored mirrored left-right and the probabilities averaged over both
    # views (test-time augmentation inside the ONNX graph): twice the compute per window.
    mirrored: bool = False
    # "person": trained on person-centred windows (edge_hf.core.personcrop), cut by the rule in
    # `crop_rule` (JSON of PersonCropRule): the daemon must run the person stage to feed it.
    # "full" (models without the key): the whole frame.
    crop: str = "full"
    crop_rule: str = ""

    @property
    def members_note(self) -> str:
        """The words after the backbone's name for an ensemble or a mirrored model ("" for a
        single plain model)."""
        n = self.members
        note = f" x{n} (an ensemble: the mean of {n} models' probabilities)" if n > 1 else ""
        return note + (", each window also seen mirrored" if self.mirrored else "")

    def to_metadata(self) -> dict[str, str]:
        extra = {"edge_hf.down_class": self.down_class} if self.down_class else {}
        if self.threshold is not None:
            extra["edge_hf.threshold"] = f"{self.threshold:g}"
        if self.confirm_s is not None:
            extra["edge_hf.confirm_s"] = f"{self.confirm_s:g}"
        if self.crop != "full":
            extra["edge_hf.crop"] = self.crop
            extra["edge_hf.crop_rule"] = self.crop_rule
        return extra | {
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
            "edge_hf.resize": self.resize,
            "edge_hf.members": str(self.members),
            "edge_hf.mirrored": "1" if self.mirrored else "0",
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
            classes = tuple(json.loads(get("classes")))
            for key in ("fall_class", "down_class"):
                name = meta.get(f"edge_hf.{key}")
                if (name or key == "fall_class") and name not in classes:
                    raise ValueError(f"{key} {name!r} is not among the classes {list(classes)}")
            h, w = (int(v) for v in get("input_size").split(","))
            mean, std = json.loads(get("mean")), json.loads(get("std"))
            return cls(
                window=int(get("window")),
                interval_ms=float(get("interval_ms")),
                input_size=(h, w),
                mean=(float(mean[0]), float(mean[1]), float(mean[2])),
                std=(float(std[0]), float(std[1]), float(std[2])),
                classes=classes,
                fall_class=get("fall_class"),
                backbone=get("backbone"),
                volumes=int(meta.get("edge_hf.volumes", "1")),
                channel_order=get("channel_order"),
                down_class=meta.get("edge_hf.down_class") or None,
                threshold=_float_or_none(meta.get("edge_hf.threshold")),
                confirm_s=_float_or_none(meta.get("edge_hf.confirm_s")),
                resize=meta.get("edge_hf.resize", "area"),
                members=int(meta.get("edge_hf.members", "1")),
                mirrored=_flag(meta.get("edge_hf.mirrored", "0"), "mirrored"),
                crop=meta.get("edge_hf.crop", "full"),
                crop_rule=meta.get("edge_hf.crop_rule", ""),
            )
        except (ValueError, IndexError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{source}: bad edge_hf metadata ({exc})") from None

    def __post_init__(self) -> None:
        """Refuse a contract no window could satisfy (one line, naming the value)."""
        problems = []
        if self.window < 1 or self.window % 2 == 0:
            problems.append(f"window {self.window} (T must be odd and >= 1)")
        if not math.isfinite(self.interval_ms) or self.interval_ms <= 0:
            problems.append(f"interval_ms {self.interval_ms} (must be > 0)")
        if min(self.input_size) < 8:
            problems.append(f"input_size {list(self.input_size)} (at least 8x8)")
        if not all(0.0 <= m <= 1.0 for m in self.mean):
            problems.append(f"mean {list(self.mean)} (0-1 scale: pixel / 255)")
        if not all(0.0 < s <= 1.0 for s in self.std):
            problems.append(f"std {list(self.std)} (0-1 scale, > 0)")
        if self.volumes < 1:
            problems.append(f"volumes {self.volumes}")
        if self.members < 1:
            problems.append(f"members {self.members}")
        if self.threshold is not None and not 0.0 < self.threshold < 1.0:
            problems.append(f"threshold {self.threshold} (in (0, 1))")
        if self.confirm_s is not None and not 0.0 <= self.confirm_s <= 60.0:
            problems.append(f"confirm_s {self.confirm_s} (0 to 60 s)")
        if self.resize not in RESIZES:
            problems.append(f"resize {self.resize!r} ({' or '.join(RESIZES)})")
        if self.crop not in ("full", "person"):
            problems.append(f"crop {self.crop!r} (full or person; a newer edge_hf's model?)")
        elif self.crop == "person":
            try:
                PersonCropRule.from_json(self.crop_rule)
            except (ValueError, TypeError, AttributeError) as exc:
                problems.append(f"crop_rule {self.crop_rule!r} ({exc})")
        if not self.classes or len(set(self.classes)) != len(self.classes):
            problems.append(f"classes {list(self.classes)} (non-empty, unique)")
        if problems:
            raise ValueError("; ".join(problems))


def _float_or_none(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


def _flag(text: str, key: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError(f"{key} {text!r} (0 or 1)")
    return text == "1"


def _varint(f: BinaryIO) -> int | None:
    """A protobuf varint from `f`; None at the end of the file."""
    value, shift = 0, 0
    while True:
        b = f.read(1)
        if not b:
            return None if shift == 0 else _truncated()
        value |= (b[0] & 0x7F) << shift
        if b[0] < 0x80:
            return value
        shift += 7
        if shift > 63:
            raise ValueError("malformed protobuf varint")


def _truncated() -> int:
    raise ValueError("the file ends inside a protobuf field (truncated?)")


def _entry(blob: bytes) -> tuple[str, str]:
    """A StringStringEntryProto: field 1 the key, field 2 the value."""
    import io

    f, out = io.BytesIO(blob), {1: "", 2: ""}
    while (tag := _varint(f)) is not None:
        if tag & 7 != 2:
            raise ValueError("unexpected wire type in a metadata entry")
        n = _varint(f) or 0
        out[tag >> 3] = f.read(n).decode("utf-8", "replace")
    return out[1], out[2]


def read_metadata(path: Path) -> dict[str, str]:
    """The ONNX file's metadata_props (ModelProto field 14), read without loading the graph.

    Top-level fields are walked and every other one (the graph with its weights, field 7) is
    skipped by seeking past it, so this costs a few reads however large the model is. The daemon
    needs the contract (input shape) before it creates its one ONNX Runtime session: TensorRT's
    optimisation profiles are options of that session.
    """
    meta: dict[str, str] = {}
    size = path.stat().st_size
    with path.open("rb") as f:
        while (tag := _varint(f)) is not None:
            if f.tell() > size:
                _truncated()
            field, wire = tag >> 3, tag & 7
            if wire == 0:
                _varint(f)
            elif wire == 1:
                f.seek(8, 1)
            elif wire == 5:
                f.seek(4, 1)
            elif wire == 2:
                n = _varint(f)
                if n is None:
                    _truncated()
                    break
                if field == 14:
                    blob = f.read(n)
                    if len(blob) != n:
                        _truncated()
                    key, value = _entry(blob)
                    meta[key] = value
                else:
                    f.seek(n, 1)
                    if f.tell() > size:
                        _truncated()
            else:
                raise ValueError(f"not an ONNX file (protobuf wire type {wire})")
    return meta
