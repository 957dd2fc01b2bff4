"""Prometheus metrics for the daemon, read from the pipeline's own counters at scrape time.

Nothing on the hot path but one histogram observation per batch: at scrape time the collector
reads one `Snapshot` (the same typed numbers as the MQTT stats topic and the shutdown summary).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from edge_hf.daemon.decisions import REASONS
from edge_hf.daemon.status import Snapshot

LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)


class SnapshotCollector(Collector):
    """Per-camera and pipeline-wide metrics from the daemon's status snapshot."""

    def __init__(self, snapshot: Callable[[], Snapshot]) -> None:
        self.snapshot = snapshot
        self._last: dict[str, tuple[float, int]] = {}

    def collect(self) -> Iterator[Any]:
        snap = self.snapshot()
        fps = GaugeMetricFamily("edge_hf_capture_fps", "Frames read per second", labels=["camera"])
        up = GaugeMetricFamily(
            "edge_hf_camera_online", "1 if the camera delivers frames", labels=["camera"]
        )
        stalls = CounterMetricFamily(
            "edge_hf_camera_stalls", "Times the camera stalled", labels=["camera"]
        )
        reconnects = CounterMetricFamily(
            "edge_hf_camera_reconnects", "Reopen attempts", labels=["camera"]
        )
        dropped = CounterMetricFamily(
            "edge_hf_frames_dropped",
            "Samples overwritten before any window used them",
            labels=["camera"],
        )
        skipped = CounterMetricFamily(
            "edge_hf_windows_skipped",
            "Windows not classified because inference was behind",
            labels=["camera"],
        )
        windows = CounterMetricFamily("edge_hf_windows", "Windows classified", labels=["camera"])
        score = GaugeMetricFamily(
            "edge_hf_last_score", "Fall probability of the latest window", labels=["camera"]
        )
        events = CounterMetricFamily("edge_hf_events", "Fall events", labels=["camera", "type"])
        refused = CounterMetricFamily(
            "edge_hf_no_alarm",
            "Possible falls that raised no alarm, by reason (edge_hf.daemon.decisions.REASONS)",
            labels=["camera", "reason"],
        )
        now = time.monotonic()
        for cam in snap.cameras:
            name = cam.name
            t_prev, n_prev = self._last.get(name, (now, cam.frames_read))
            rate = (cam.frames_read - n_prev) / (now - t_prev) if now > t_prev else 0.0
            self._last[name] = (now, cam.frames_read)
            fps.add_metric([name], rate)
            up.add_metric([name], 1.0 if cam.state == "online" else 0.0)
            stalls.add_metric([name], cam.stalls)
            reconnects.add_metric([name], cam.reconnects)
            dropped.add_metric([name], cam.dropped)
            skipped.add_metric([name], cam.skipped)
            windows.add_metric([name], cam.windows)
            score.add_metric([name], cam.last_score)
            events.add_metric([name, "start"], cam.events_started)
            events.add_metric([name, "end"], cam.events_ended)
            events.add_metric([name, "escalation"], cam.events_escalated)
            counted = dict(cam.no_alarm)
            for reason in REASONS:  # every reason from the start: a rate needs the zero
                refused.add_metric([name, reason], counted.get(reason, 0))
        yield from (fps, up, stalls, reconnects, dropped, skipped, windows, score, events, refused)
        for sink in snap.sinks:
            if sink.name != "mqtt":
                continue
            yield GaugeMetricFamily(
                "edge_hf_outbox_depth", "Alerts waiting for a broker ack", value=sink.queued
            )
            yield CounterMetricFamily(
                "edge_hf_outbox_dropped",
                "Alerts dropped because the outbox was full",
                value=sink.dropped,
            )
            yield GaugeMetricFamily(
                "edge_hf_outbox_degraded",
                "1 while the outbox cannot write to disk (alerts held in memory)",
                value=float(sink.degraded),
            )
            yield GaugeMetricFamily(
                "edge_hf_mqtt_connected",
                "1 while connected to the broker",
                value=float(sink.connected),
            )


class Metrics:
    """The registry, the inference-latency histogram and the HTTP endpoint."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.inference = Histogram(
            "edge_hf_inference_latency_seconds",
            "Time to stack and classify one batch of windows",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._server: Any = None

    def watch(self, snapshot: Callable[[], Snapshot]) -> None:
        """Read the daemon's numbers from `snapshot` at every scrape."""
        self.registry.register(SnapshotCollector(snapshot))

    def serve(self, host: str, port: int) -> None:
        """Expose /metrics on host:port (loopback by default: metrics can reveal room activity)."""
        self._server = start_http_server(port, addr=host, registry=self.registry)

    def close(self) -> None:
        if self._server is not None:
            server, thread = self._server
            server.shutdown()
            thread.join(5)
            self._server = None
