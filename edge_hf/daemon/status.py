"""One typed snapshot of the daemon's health, read by everything that reports it.

The retained MQTT `stats` topic, the shutdown summary, Prometheus, systemd's STATUS= line and the
benchmarks all read `Pipeline.snapshot()`, so a counter is added up in one place only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SinkHealth:
    """What an alert sink says about itself (the MQTT publisher: broker link and outbox)."""

    name: str
    connected: bool
    queued: int  # alerts waiting for an acknowledgement
    dropped: int  # alerts given up (outbox full)
    degraded: bool = False  # the outbox cannot write: alerts are held in memory
    failed: str = ""  # why the sink can send nothing any more (the daemon stops): "" while it can
    connect_timeouts: int = 0  # connections the broker took without ever answering CONNECT


@dataclass(frozen=True)
class CameraSnapshot:
    """One camera's counters."""

    name: str
    state: str  # starting, online, stalled, ended, stopped
    frames_read: int
    stalls: int
    reconnects: int
    windows: int
    skipped: int
    dropped: int
    last_score: float
    events_started: int
    events_ended: int
    # what MQTT says: online, slow, overloaded, degraded, blind, stalled, offline
    status: str = "starting"
    events_escalated: int = 0  # falls still on the floor after escalate_after_s
    # (reason, count) of the decisions that raised no alarm (edge_hf.daemon.decisions.REASONS)
    no_alarm: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Snapshot:
    """The whole daemon at one instant."""

    cameras: tuple[CameraSnapshot, ...]
    batches: int
    windows: int
    inference_ms: tuple[float, ...]  # recent batches
    latency_ms: tuple[float, ...]  # recent windows: newest sample -> decision
    providers: tuple[str, ...]
    sinks: tuple[SinkHealth, ...] = ()
    overloaded: bool = False  # the machine skips windows (edge_hf.daemon.load)
    capacity_cameras: int | None = None  # about how many cameras it holds (None: not yet known)

    def stats_payload(self) -> dict[str, object]:
        """The JSON of the retained MQTT stats topic (keys unchanged since 0.1)."""
        cams = {
            c.name: {
                "state": c.state,
                "frames_read": c.frames_read,
                "stalls": c.stalls,
                "reconnects": c.reconnects,
                "windows": c.windows,
                "skipped": c.skipped,
                "dropped": c.dropped,
                "last_score": round(c.last_score, 4),
                "status": c.status,
            }
            for c in self.cameras
        }
        out: dict[str, object] = {
            "cameras": cams,
            "batches": self.batches,
            "windows": self.windows,
            "inference_ms_p50": round(float(np.median(self.inference_ms)), 2)
            if self.inference_ms
            else None,
            "providers": list(self.providers),
            "overloaded": self.overloaded,
            "capacity_cameras": self.capacity_cameras,
        }
        for s in self.sinks:
            if s.name == "mqtt":
                out["outbox_depth"], out["outbox_dropped"] = s.queued, s.dropped
                out["outbox_degraded"] = s.degraded
                out["mqtt_connect_timeouts"] = s.connect_timeouts
        return out

    def status_line(self) -> str:
        """Per-camera state for systemd's STATUS= (shown by `systemctl status`), and an outbox
        that cannot write."""
        line = "; ".join(f"{c.name}: {c.state}" for c in self.cameras)
        if any(s.degraded for s in self.sinks):
            line += "; outbox degraded (disk refuses writes: alerts held in memory)"
        return line

    def summary(self) -> str:
        """One line: windows, skips, drops, inference and capture-to-decision latency."""

        def pct(values: tuple[float, ...], q: float) -> float:
            return float(np.percentile(values, q)) if values else float("nan")

        cams = ", ".join(
            f"{c.name}: {c.windows} windows, {c.skipped} skipped, {c.dropped} dropped"
            for c in self.cameras
        )
        inf, lat = self.inference_ms, self.latency_ms
        return (
            f"{cams}; batch inference p50 {pct(inf, 50):.1f} ms p90 {pct(inf, 90):.1f} ms over "
            f"{self.batches} batches; newest frame -> decision p50 {pct(lat, 50):.1f} ms "
            f"p90 {pct(lat, 90):.1f} ms"
        )

    def totals(self) -> tuple[int, int, int]:
        """Windows classified, skipped and samples dropped, over every camera."""
        return (
            sum(c.windows for c in self.cameras),
            sum(c.skipped for c in self.cameras),
            sum(c.dropped for c in self.cameras),
        )
