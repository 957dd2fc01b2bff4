"""The Prometheus endpoint serves the daemon's counters while it runs over a real video."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from edge_hf.training.synth import write_demo_clips
from tests.broker import Broker, free_port


def _scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def test_metrics_during_a_run(broker: Broker, tiny_onnx: Path, tmp_path: Path) -> None:
    (clip,) = [p for p in write_demo_clips(tmp_path / "demo") if "fall" in p.name]
    port = free_port()
    config = tmp_path / "c.yaml"
    config.write_text(
        f"device_id: t\nmodel: {{path: {tiny_onnx}, providers: [cpu]}}\n"
        f"cameras:\n  - {{name: hall, source: {clip}, loop: true}}\n"
        f"  - {{name: gone, source: {tmp_path / 'missing.mp4'}}}\n"
        f"mqtt: {{enabled: true, port: {broker.port}}}\n"
        f"metrics: {{enabled: true, port: {port}}}\nstate_dir: {tmp_path}/state\n"
    )
    proc = subprocess.Popen([sys.executable, "-m", "edge_hf.cli", "run", "--config", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 40
        m: dict[str, float] = {}
        while time.monotonic() < deadline:
            try:
                m = _scrape(port)
                if m.get('edge_hf_windows_total{camera="hall"}', 0) >= 20:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        assert m.get('edge_hf_windows_total{camera="hall"}', 0) >= 20, m
        # The demo clip plays at 15 fps in real time; the rate is measured between two scrapes.
        assert 5 <= m['edge_hf_capture_fps{camera="hall"}'] <= 30, m
        assert m['edge_hf_camera_online{camera="hall"}'] == 1.0
        assert m['edge_hf_camera_online{camera="gone"}'] == 0.0
        assert m['edge_hf_camera_stalls_total{camera="gone"}'] >= 1
        assert m['edge_hf_camera_reconnects_total{camera="gone"}'] >= 1
        assert 'edge_hf_frames_dropped_total{camera="hall"}' in m
        assert 'edge_hf_windows_skipped_total{camera="hall"}' in m
        assert 0 <= m['edge_hf_last_score{camera="hall"}'] <= 1
        assert 'edge_hf_events_total{camera="hall",type="start"}' in m
        # One producing camera: one window per batch, so batches and windows agree (same scrape).
        batches, windows = (
            m["edge_hf_inference_latency_seconds_count"],
            m['edge_hf_windows_total{camera="hall"}'],
        )
        assert abs(batches - windows) <= 1, (batches, windows)
        assert m['edge_hf_windows_total{camera="gone"}'] == 0
        assert m["edge_hf_mqtt_connected"] == 1.0
        assert m["edge_hf_outbox_depth"] <= 2 and m["edge_hf_outbox_dropped_total"] == 0
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
    assert proc.returncode == 0
