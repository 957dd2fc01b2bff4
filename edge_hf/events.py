"""Per-camera fall decisions: smoothed scores -> `start` / `end` events with stable ids.

A window's fall probability is smoothed (k of the last n above threshold, or the median of the
last n). Smoothed above threshold starts an event; `end_after` consecutive windows below the
threshold, or `max_event_s`, end it; a cooldown keeps one fall from raising a second event.
The event dict built here is the one every sink sends (JSON lines today, MQTT next).
"""

from __future__ import annotations

import logging
import statistics
import uuid
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from edge_hf.config import DetectionConfig

log = logging.getLogger(__name__)
_NAMESPACE = uuid.UUID("6f2f6c1e-9a7e-4c55-9d8e-2f0d3f0c4e11")


def iso(t: float) -> str:
    """UTC ISO-8601 with milliseconds and a Z, from Unix seconds."""
    return (
        datetime.fromtimestamp(t, tz=timezone.utc)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


@dataclass(frozen=True)
class ModelInfo:
    """What an event says about the model that raised it."""

    name: str
    window: int
    interval_ms: float

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "window": self.window, "interval_ms": self.interval_ms}


class FallDetector:
    """Turns one camera's stream of fall scores into start/end events."""

    def __init__(
        self,
        camera: str,
        device_id: str,
        cfg: DetectionConfig,
        threshold: float,
        model: ModelInfo,
        snapshot_dir: Path | None = None,
    ) -> None:
        self.camera, self.device_id, self.cfg = camera, device_id, cfg
        self.threshold, self.model = threshold, model
        self.snapshot_dir = snapshot_dir if cfg.snapshot else None
        self._recent: deque[float] = deque(maxlen=cfg.n)
        self._event: dict[str, Any] | None = None
        self._below = 0
        self._cooldown_until = float("-inf")
        self.last_score = 0.0
        self.counts: dict[str, int] = {"start": 0, "end": 0}

    @property
    def active(self) -> bool:
        return self._event is not None

    def _smoothed_above(self) -> bool:
        if self.cfg.smoothing == "median":
            return (
                len(self._recent) == self.cfg.n
                and statistics.median(self._recent) >= self.threshold
            )
        return sum(s >= self.threshold for s in self._recent) >= self.cfg.k

    def update(
        self, score: float, t: float, centre_frame: np.ndarray | None = None
    ) -> list[dict[str, Any]]:
        """Feed one window's score at Unix time `t`; return the events it causes (0 or 1)."""
        self.last_score = score
        self._recent.append(score)
        if self._event is None:
            if t >= self._cooldown_until and self._smoothed_above():
                return [self._start(score, t, centre_frame)]
            return []
        ev = self._event
        ev["peak_score"] = max(ev["peak_score"], score)
        self._below = self._below + 1 if score < self.threshold else 0
        if self._below >= self.cfg.end_after:
            return [self._end(score, t, "recovered")]
        if t - ev["_started"] >= self.cfg.max_event_s:
            return [self._end(score, t, "max_duration")]
        return []

    def close(self, t: float) -> list[dict[str, Any]]:
        """End an open event (shutdown or camera gone)."""
        return [self._end(self.last_score, t, "shutdown")] if self._event is not None else []

    def _start(self, score: float, t: float, frame: np.ndarray | None) -> dict[str, Any]:
        # Stable and unique: the same camera never starts two events at the same instant, and a
        # replay of the same file gives the same ids.
        event_id = str(uuid.uuid5(_NAMESPACE, f"{self.device_id}/{self.camera}/{t:.3f}"))
        self._event = {"event_id": event_id, "_started": t, "peak_score": score}
        self._below = 0
        snapshot = self._snapshot(event_id, frame)
        if snapshot:
            self._event["snapshot"] = snapshot
        self.counts["start"] += 1
        log.info("%s: fall started (score %.2f) event %s", self.camera, score, event_id)
        return self._payload("start", score, t)

    def _end(self, score: float, t: float, reason: str) -> dict[str, Any]:
        payload = self._payload("end", score, t)
        payload["ended_at"] = iso(t)
        payload["end_reason"] = reason
        self._event = None
        self._recent.clear()
        self._cooldown_until = t + self.cfg.cooldown_s
        self.counts["end"] += 1
        log.info("%s: fall ended (%s) event %s", self.camera, reason, payload["event_id"])
        return payload

    def _payload(self, kind: str, score: float, t: float) -> dict[str, Any]:
        assert self._event is not None  # called only while an event is open
        ev = self._event
        out: dict[str, Any] = {
            "event_id": ev["event_id"],
            "type": kind,
            "camera": self.camera,
            "device_id": self.device_id,
            "time": iso(t),
            "started_at": iso(ev["_started"]),
            "score": round(float(score), 4),
            "peak_score": round(float(ev["peak_score"]), 4),
            "model": self.model.as_dict(),
        }
        if "snapshot" in ev:
            out["snapshot"] = ev["snapshot"]
        return out

    def _snapshot(self, event_id: str, frame: np.ndarray | None) -> str | None:
        """Write the window's centre frame as JPEG before the event goes out; None if off."""
        if self.snapshot_dir is None or frame is None:
            return None
        self.snapshot_dir.mkdir(parents=True, exist_ok=True)
        path = self.snapshot_dir / f"{event_id}.jpg"
        if not cv2.imwrite(str(path), cv2.cvtColor(frame, cv2.COLOR_RGB2BGR)):
            log.warning("%s: could not write snapshot %s", self.camera, path)
            return None
        return str(path)
