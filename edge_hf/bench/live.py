"""Benchmarks, live part: how many cameras one machine sustains, and what an alert costs in time.

- Capacity: N file cameras played in real time, sampled every 100 ms, through our batched pipeline
  (one ONNX Runtime session, the newest window of every camera in one batch) and the naive layout
  (one pipeline and one session per camera). A level is sustained when no window is skipped, no
  frame dropped and every camera got at least 90 % of its windows.
- Latency and memory: the real daemon (`edge-hf run`, a separate process) on looping fall clips,
  publishing to a local Mosquitto; a subscriber on loopback timestamps every event against the
  capture time of the window's newest frame (the event's `time`); the daemon's RSS is sampled.
"""

from __future__ import annotations

import json
import logging
import math
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from edge_hf.core.errors import UserError
from edge_hf.core.posehead import PoseHead
from edge_hf.daemon.app import build_pipeline
from edge_hf.daemon.config import CameraConfig, Config, ModelConfig, PersonConfig
from edge_hf.daemon.payload import FallEvent
from edge_hf.daemon.pipeline import Pipeline
from edge_hf.daemon.sinks import QuietSink

log = logging.getLogger(__name__)

SETTLE_S = 2.0  # counters are read this long after the cameras opened, and again at the end


class _CountingSink(QuietSink):
    """An alert sink that only counts (capacity runs measure the pipeline, not the broker)."""

    def __init__(self) -> None:
        self.events = 0

    def send(self, event: FallEvent) -> None:
        self.events += 1


POSE_HEAD = Path("models/pose-head.json")  # the shipped person stage's learned head, if there


def _config(
    model: Path,
    video: Path,
    names: list[str],
    state_dir: Path,
    person: Path | None = None,
    second_look: bool = False,
    sequence: Path | None = None,
) -> Config:
    head = POSE_HEAD if person is not None and POSE_HEAD.is_file() else None
    if head is not None and (PoseHead.load(head).contract_look() is not None) != second_look:
        head = None  # (fitted on the other poses; the head costs next to nothing anyway)
    return Config(
        device_id="bench",
        model=ModelConfig(path=model, providers=["cpu"]),
        cameras=[CameraConfig(name=n, source=str(video), loop=True) for n in names],
        state_dir=state_dir,
        max_batch=max(16, len(names)),
        person=PersonConfig(model=person, head=head, second_look=second_look, sequence=sequence),
    )


def _counters(pipelines: list[Pipeline]) -> tuple[int, int, int]:
    totals = [p.snapshot().totals() for p in pipelines]
    return (
        sum(t[0] for t in totals),
        sum(t[1] for t in totals),
        sum(t[2] for t in totals),
    )


def run_cameras(
    model: Path,
    video: Path,
    n: int,
    seconds: float,
    mode: str,
    state_dir: Path,
    person: Path | None = None,
    person_threaded: bool = True,
    second_look: bool = False,
    sequence: Path | None = None,
) -> dict[str, Any]:
    """Run `n` real-time file cameras for `seconds`; `mode` is "batched" or "per_camera";
    `person`: the pose model, the person stage on (its default 5 Hz per camera), in its own
    thread or (`person_threaded` False) in the inference loop, with `second_look` or not, with
    the pose-sequence model `sequence` or not."""
    names = [f"cam{i:02d}" for i in range(n)]
    if mode == "batched":
        cfg = _config(model, video, names, state_dir, person, second_look, sequence)
        pipelines = [build_pipeline(cfg, _CountingSink())]
    elif mode == "per_camera":
        pipelines = [
            build_pipeline(
                _config(model, video, [c], state_dir, person, second_look, sequence),
                _CountingSink(),
            )
            for c in names
        ]
    else:
        raise ValueError(f"mode {mode!r}: choose batched or per_camera")
    for p in pipelines:
        p.person_threaded = person_threaded
        p.start()
    threads = [threading.Thread(target=p.run, daemon=True) for p in pipelines]
    for t in threads:
        t.start()
    time.sleep(SETTLE_S)
    w0, s0, d0 = _counters(pipelines)
    pose0 = sum(p.person.counters.frames for p in pipelines if p.person is not None)
    t0, cpu0 = time.monotonic(), time.process_time()
    busy0 = sum(p.stats.busy_ms for p in pipelines)
    time.sleep(seconds)
    w1, s1, d1 = _counters(pipelines)
    elapsed = time.monotonic() - t0
    cpu_cores = (time.process_time() - cpu0) / elapsed
    # Share of the run the inference loop(s) spent stacking and classifying (summed over the
    # per-camera pipelines): near 1 in the batched layout, the one inference thread is the bound.
    busy = (sum(p.stats.busy_ms for p in pipelines) - busy0) / 1000 / elapsed
    latency = [ms for p in pipelines for ms in list(p.snapshot().latency_ms)[-200 * n :]]
    # One batch's stacking + inference (ms): the goal is latency p99 <= this p99 + 30 ms.
    batches = [ms for p in pipelines for ms in list(p.snapshot().inference_ms)[-200:]]
    pose_frames = sum(p.person.counters.frames for p in pipelines if p.person is not None)
    pose_ms = sum(p.person.counters.busy_ms for p in pipelines if p.person is not None)
    looks = sum(p.person.counters.looks for p in pipelines if p.person is not None)
    for p in pipelines:
        p.stop.set()
    for t in threads:
        t.join(30)
    interval_s = pipelines[0].cameras[0].interval_s
    expected = n * elapsed / interval_s
    windows, skipped, dropped = w1 - w0, s1 - s0, d1 - d0
    # The person stage keeps only each camera's newest frame: one that falls behind loses pose
    # frames silently, so it must also keep up (5 Hz a camera) for the level to count.
    person_on = any(p.person is not None for p in pipelines)
    rate = pipelines[0].cfg.person.rate_hz
    pose_expected = n * elapsed * rate if person_on else 0.0
    pose_done = pose_frames - pose0
    return {
        "cameras": n,
        "mode": mode,
        "seconds": round(elapsed, 1),
        "windows": windows,
        "expected_windows": round(expected),
        "skipped": skipped,
        "dropped": dropped,
        "cpu_cores": round(cpu_cores, 2),
        "inference_busy": round(busy, 2),
        "latency_p50_ms": round(float(np.percentile(latency, 50)), 1) if latency else None,
        "latency_p90_ms": round(float(np.percentile(latency, 90)), 1) if latency else None,
        "latency_p99_ms": round(float(np.percentile(latency, 99)), 1) if latency else None,
        "batch_p99_ms": round(float(np.percentile(batches, 99)), 1) if batches else None,
        "pose_ms_per_frame": round(pose_ms / pose_frames, 1) if pose_frames else None,
        "looks_per_pose_frame": round(looks / pose_frames, 2) if pose_frames else None,
        "pose_frames": pose_done if person_on else None,
        "expected_pose_frames": round(pose_expected) if person_on else None,
        "person_threaded": person_threaded if person_on else None,
        "sustained": skipped == 0
        and dropped == 0
        and windows >= 0.9 * expected
        and pose_done >= 0.9 * pose_expected,
    }


def capacity(
    model: Path,
    video: Path,
    mode: str,
    seconds: float,
    state_dir: Path,
    max_cameras: int = 64,
    max_runs: int = 12,
    progress: Callable[[str], None] = print,
    person: Path | None = None,
    label: str = "",
    person_threaded: bool = True,
    second_look: bool = False,
    sequence: Path | None = None,
) -> dict[str, Any]:
    """Largest sustained camera count: double until a level fails, then bisect (`max_runs`)."""
    runs: list[dict[str, Any]] = []

    def trial(n: int) -> bool:
        for attempt in range(2):
            r = run_cameras(
                model,
                video,
                n,
                seconds,
                mode,
                state_dir,
                person,
                person_threaded,
                second_look,
                sequence,
            )
            runs.append(r)
            verdict = "sustained" if r["sustained"] else "NOT sustained"
            pose = (
                f", {r['pose_frames']}/{r['expected_pose_frames']} pose frames"
                if r["pose_frames"] is not None else ""
            )  # fmt: skip
            progress(
                f"capacity {mode}: {n} cameras: {r['windows']}/{r['expected_windows']} windows, "
                f"{r['skipped']} skipped, {r['dropped']} dropped{pose}: {verdict}"
            )
            # A near miss (a few skipped windows, perhaps from a noisy neighbour on a shared
            # machine) gets one more try; a level that misses by more has failed.
            near_miss = r["skipped"] + r["dropped"] <= 0.02 * r["expected_windows"]
            if r["sustained"] or not near_miss or attempt == 1 or len(runs) >= max_runs:
                return bool(r["sustained"])
        return False

    best, fail, n = 0, None, 1
    while n <= max_cameras and len(runs) < max_runs:
        if not trial(n):
            fail = n
            break
        best, n = n, n * 2
    while fail is not None and fail - best > 1 and len(runs) < max_runs:
        mid = (best + fail) // 2
        if trial(mid):
            best = mid
        else:
            fail = mid
    return {"mode": mode, "max_cameras": best, "first_failure": fail, "runs": runs,
            "pipeline": label or model.name}  # fmt: skip


# ---------------------------------------------------------------------- latency and RSS


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def soak(
    model: Path,
    video: Path,
    cameras: int,
    duration_s: float,
    workdir: Path,
    threshold: float = 0.75,
    progress: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the daemon for `duration_s` against a local broker; event latency and RSS over time."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    from edge_hf.bench.broker import Broker

    broker = Broker(workdir / "broker").start()
    cfg = {
        "device_id": "bench",
        "model": {"path": str(model.resolve()), "providers": ["cpu"], "threshold": threshold},
        "cameras": [
            {"name": f"cam{i}", "source": str(video.resolve()), "loop": True}
            for i in range(cameras)
        ],
        "detection": {"k": 2, "n": 3, "end_after": 3, "cooldown_s": 0, "latch": False},
        "mqtt": {"enabled": True, "host": "127.0.0.1", "port": broker.port},
        "state_dir": str(workdir / "state"),
        "stats_interval_s": 30,
    }
    cfg_path = workdir / "bench.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    latencies: list[float] = []

    def on_message(_c: object, _u: object, msg: mqtt.MQTTMessage) -> None:
        now = time.time()
        event = json.loads(msg.payload)
        latencies.append((now - datetime.fromisoformat(event["time"]).timestamp()) * 1000)

    sub = mqtt.Client(CallbackAPIVersion.VERSION2)
    sub.on_connect = lambda c, *_: c.subscribe("edge_hf/bench/+/event", qos=1)
    sub.on_message = on_message
    sub.connect("127.0.0.1", broker.port)
    sub.loop_start()
    cmd = [sys.executable, "-c", "import sys; from edge_hf.cli import main; sys.exit(main())"]
    log_path = workdir / "daemon.log"
    with log_path.open("wb") as daemon_log:
        daemon = subprocess.Popen(
            [*cmd, "run", "--config", str(cfg_path)], stdout=daemon_log, stderr=subprocess.STDOUT
        )
        rss: list[tuple[float, float]] = []
        t0 = time.monotonic()
        next_note = t0 + 60
        try:
            while (elapsed := time.monotonic() - t0) < duration_s:
                if daemon.poll() is not None:
                    raise UserError(f"the daemon exited after {elapsed:.0f} s; see {log_path}")
                mb = _rss_mb(daemon.pid)
                if mb is not None:
                    rss.append((elapsed, mb))
                if time.monotonic() >= next_note:
                    next_note += 60
                    progress(
                        f"soak: {elapsed:.0f}/{duration_s:.0f} s, {len(latencies)} events, "
                        f"RSS {mb or float('nan'):.0f} MB"
                    )
                time.sleep(2.0)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(60)
            time.sleep(1.0)
            sub.loop_stop()
            broker.stop()
    summary = [ln for ln in log_path.read_text().splitlines() if "windows," in ln]
    return {
        "cameras": cameras,
        "duration_s": duration_s,
        "events": len(latencies),
        **_percentiles(latencies),
        **_rss_summary(rss),
        "daemon_summary": summary[-1] if summary else None,
    }


def _percentiles(ms: list[float]) -> dict[str, float | None]:
    if not ms:
        return {"latency_p50_ms": None, "latency_p99_ms": None, "latency_max_ms": None}
    return {
        "latency_p50_ms": round(float(np.percentile(ms, 50)), 1),
        "latency_p99_ms": round(float(np.percentile(ms, 99)), 1),
        "latency_max_ms": round(max(ms), 1),
    }


def _rss_summary(rss: list[tuple[float, float]], warm_s: float = 30.0) -> dict[str, Any]:
    """RSS after warm-up, at the end, its peak, and the fitted slope (MB per hour)."""
    steady = [(t, mb) for t, mb in rss if t >= warm_s] or rss
    if len(steady) < 2:
        return {
            "rss_start_mb": None,
            "rss_end_mb": None,
            "rss_max_mb": None,
            "rss_slope_mb_h": None,
        }
    t, mb = np.array(steady).T
    slope_h = float(np.polyfit(t, mb, 1)[0]) * 3600
    return {
        "rss_start_mb": round(float(mb[0]), 1),
        "rss_end_mb": round(float(mb[-1]), 1),
        "rss_max_mb": round(float(mb.max()), 1),
        "rss_slope_mb_h": round(slope_h, 2) if math.isfinite(slope_h) else None,
        "rss_samples": [[round(float(a), 1), round(float(b), 1)] for a, b in steady[::5]],
    }
