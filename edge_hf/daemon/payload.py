"""What a fall decision sends: the `FallEvent` every sink sends, and the JSON it is written in.

`FallEvent` is one `start`, `escalation` or `end` of a fall on a camera, with the `ModelInfo` of
the model that raised it and, on a start, its `Evidence` (the picture, never serialised).
`as_dict` / `to_json` are its payload (times as UTC ISO-8601, scores to 4 decimals: `iso`,
`probability`); `from_dict` the one way back (`unix`). `strict_json` is the one encoder of every
payload (events, clip notices, stats, discovery, the journal): never a `NaN` a strict parser
refuses. The decision that makes these events is `edge_hf.daemon.events`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np

from edge_hf.core.errors import shown
from edge_hf.daemon.skeleton import Skeleton


def iso(t: float) -> str:
    """UTC ISO-8601 with milliseconds and a Z, from Unix seconds."""
    return (
        datetime.fromtimestamp(t, tz=timezone.utc)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def strict_json(value: Any, **kwargs: Any) -> str:
    """JSON as the standard has it, the one encoder of every payload: a number JSON cannot carry
    (NaN, infinities) becomes null, never the `NaN` that strict parsers refuse."""
    return json.dumps(_finite(value), allow_nan=False, **kwargs)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def probability(x: float) -> float:
    """A score as an event carries it: 4 decimals in [0, 1]; a model's NaN or infinity is 0
    (the event schema has no place for "unknown")."""
    x = float(x)
    return round(min(1.0, max(0.0, x)), 4) if math.isfinite(x) else 0.0


def unix(t: Any) -> float:
    """Unix seconds from `iso`'s text (or a number of seconds); ValueError otherwise."""
    if isinstance(t, str):
        return datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp()
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        raise ValueError(f"{t!r} is not a time")
    return float(t)


@dataclass(frozen=True)
class ModelInfo:
    """What an event says about the model that raised it."""

    name: str
    window: int
    interval_ms: float

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "window": self.window, "interval_ms": self.interval_ms}


@dataclass(frozen=True)
class Evidence:
    """The picture of a fall's start, handed to `SnapshotSink`: the window's centre frame at the
    camera's resolution (BGR) when the ring kept it, else as the model saw it (RGB); or, with
    `snapshots.mode: skeleton`, no picture and the people to draw (`skeleton`)."""

    camera_bgr: np.ndarray | None
    model_rgb: np.ndarray | None
    skeleton: Skeleton | None = None
    t: float | None = None  # the window's newest sample time (the camera's clock): event clips


@dataclass(frozen=True)
class FallEvent:
    """One `start`, `escalation` or `end` of a fall on a camera; the payload every sink sends."""

    event_id: str
    type: str  # "start", "escalation" (still on the floor after escalate_after_s) or "end"
    camera: str
    device_id: str
    time: float  # Unix seconds
    started_at: float
    score: float
    peak_score: float
    model: ModelInfo
    snapshot: str | None = None
    # end only: recovered, got_up, max_duration (unlatched); acknowledged, timeout (latched);
    # shutdown, restart (an earlier run left it open)
    end_reason: str | None = None
    # start only, with snapshots on: the picture (never serialised; SnapshotSink takes it)
    evidence: Evidence | None = field(default=None, compare=False, repr=False)
    # the person stage's person the fall is about: track id and box (x0, y0, x1, y1, 0-1 of the
    # camera's view); None without the person stage or when it saw nobody down
    person: tuple[int, tuple[float, float, float, float]] | None = None
    # escalation: seconds since the fall's start; end with got_up: how long the person was down
    down_s: float | None = None
    # start only: the snapshot's JPEG bytes, encoded once by SnapshotSink (never serialised; the
    # MQTT sink publishes them without reading the file back)
    jpeg: bytes | None = field(default=None, compare=False, repr=False)
    # start only, with the person stage: how many other people were upright in view; the `floor`
    # zone the person lies in; "others_present" when person.when_others_present is `flag`
    others_present: int | None = None
    zone: str | None = None
    flag: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON payload (times as UTC ISO-8601, scores to 4 decimals)."""
        out: dict[str, Any] = {
            "event_id": self.event_id,
            "type": self.type,
            "camera": self.camera,
            "device_id": self.device_id,
            "time": iso(self.time),
            "started_at": iso(self.started_at),
            "score": probability(self.score),
            "peak_score": probability(self.peak_score),
            "model": self.model.as_dict(),
        }
        if self.snapshot is not None:
            out["snapshot"] = self.snapshot
        if self.person is not None:
            track, box = self.person
            out["person"] = {"track": track, "box": [round(float(v), 3) for v in box]}
        if self.others_present is not None:
            out["others_present"] = self.others_present
        for key in ("zone", "flag"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.type == "end":
            out["ended_at"] = iso(self.time)
            out["end_reason"] = self.end_reason
            if self.down_s is not None:
                out["down_s"] = round(float(self.down_s), 1)
        if self.type == "escalation" and self.down_s is not None:
            out["down_s"] = round(float(self.down_s), 1)
        return out

    def to_json(self) -> str:
        return strict_json(self.as_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: Any) -> FallEvent:
        """An event from its `as_dict` payload (times as ISO-8601 or Unix seconds): the one way
        back from JSON (the journal of open events). KeyError / TypeError / ValueError when it
        is not one."""
        if not isinstance(d, dict):
            raise TypeError(f"{type(d).__name__}, not an object")
        for key in ("event_id", "type", "camera", "device_id"):
            if not isinstance(d[key], str) or not d[key]:
                raise ValueError(f"{key} {shown(d[key])} is not a name")
        model = d["model"]
        if not isinstance(model, dict):
            raise TypeError("model is not an object")
        snapshot, reason = d.get("snapshot"), d.get("end_reason")
        person = None
        if isinstance(d.get("person"), dict):
            box = tuple(float(v) for v in d["person"]["box"])
            if len(box) != 4:
                raise ValueError("person.box is not 4 numbers")
            person = (int(d["person"]["track"]), box)
        others, zone, flag = d.get("others_present"), d.get("zone"), d.get("flag")
        down_s = d.get("down_s")
        return cls(
            d["event_id"], d["type"], d["camera"], d["device_id"],
            unix(d.get("time", d["started_at"])), unix(d["started_at"]),
            float(d.get("score", 0.0)), float(d["peak_score"]),
            ModelInfo(str(model["name"]), int(model["window"]), float(model["interval_ms"])),
            snapshot if isinstance(snapshot, str) else None,
            reason if isinstance(reason, str) else None,
            person=person,
            others_present=int(others) if isinstance(others, int) else None,
            zone=zone if isinstance(zone, str) else None,
            flag=flag if isinstance(flag, str) else None,
            down_s=float(down_s) if isinstance(down_s, (int, float)) else None,
        )  # fmt: skip
