"""Prometheus metrics for the daemon, read from the pipeline's own counters at scrape time.

Nothing on the hot path but one histogram observation per batch: the collector asks the capture
threads, rings, detectors and the MQTT sink for their numbers when Prometheus scrapes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from edge_hf.pipeline import Pipeline

LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)


class PipelineCollector(Collector):
    """Per-camera and pipeline-wide metrics from a running Pipeline."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.p = pipeline
        self._last: dict[str, tuple[float, int]] = {}

    def collect(self) -> Iterator[Any]:
        p = self.p
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
        now = time.monotonic()
        for cam in p.cameras:
            name = cam.cfg.name
            st = cam.thread.stats if cam.thread is not None else None
            if st is not None:
                t_prev, n_prev = self._last.get(name, (now, st.frames_read))
                rate = (st.frames_read - n_prev) / (now - t_prev) if now > t_prev else 0.0
                self._last[name] = (now, st.frames_read)
                fps.add_metric([name], rate)
                up.add_metric([name], 1.0 if st.state == "online" else 0.0)
                stalls.add_metric([name], st.stalls)
                reconnects.add_metric([name], st.reconnects)
            dropped.add_metric([name], cam.ring.dropped)
            skipped.add_metric([name], cam.skipped)
            windows.add_metric([name], cam.windows)
            score.add_metric([name], cam.detector.last_score)
            for kind in ("start", "end"):
                events.add_metric([name, kind], cam.detector.counts.get(kind, 0))
        yield from (fps, up, stalls, reconnects, dropped, skipped, windows, score, events)
        sink: Any = next(
            (s for s in getattr(p.sink, "sinks", (p.sink,)) if hasattr(s, "outbox")), None
        )
        if sink is not None:
            yield GaugeMetricFamily(
                "edge_hf_outbox_depth", "Alerts waiting for a broker ack", value=len(sink.outbox)
            )
            yield CounterMetricFamily(
                "edge_hf_outbox_dropped",
                "Alerts dropped because the outbox was full",
                value=sink.outbox.dropped,
            )
            yield GaugeMetricFamily(
                "edge_hf_mqtt_connected",
                "1 while connected to the broker",
                value=float(sink.connected.is_set()),
            )


class Metrics:
    """The registry, the inference-latency histogram and the HTTP endpoint."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.registry = CollectorRegistry()
        self.inference = Histogram(
            "edge_hf_inference_latency_seconds",
            "Time to stack and classify one batch of windows",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(PipelineCollector(pipeline))
        self._server: Any = None

    def serve(self, host: str, port: int) -> None:
        """Expose /metrics on host:port (loopback by default: metrics can reveal room activity)."""
        self._server = start_http_server(port, addr=host, registry=self.registry)

    def close(self) -> None:
        if self._server is not None:
            server, thread = self._server
            server.shutdown()
            thread.join(5)
            self._server = None
