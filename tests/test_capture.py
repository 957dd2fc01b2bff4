"""Capture: what the capture thread says about the picture it samples (#42 item 14), a camera
too slow for the model, and a capture thread that raises."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from edge_hf.core.video import to_model_rgb
from edge_hf.daemon.capture import CaptureThread, picture_problem
from edge_hf.daemon.pipeline import Pipeline
from edge_hf.daemon.ring import FrameRing
from edge_hf.daemon.sinks import RecordingSink
from edge_hf.daemon.sources import OpenCVSource
from edge_hf.training.synth import write_video
from tests.conftest import SHARED_DATA, live, moving_clip, wait_or_fail, wait_until

ROOT = Path(__file__).resolve().parents[1]
DEMO_MODEL = ROOT / "models" / "fall-synth-mobilenet_v3_small-t3.onnx"
VTEST = SHARED_DATA / "capture" / "vtest.avi"
needs_vtest = pytest.mark.skipif(not VTEST.is_file(), reason="../shared/data/capture absent")
SIZE = (160, 160)


def _vtest_frames(n: int, step: int = 3) -> list[np.ndarray]:
    """`n` frames of vtest.avi `step` frames apart, BGR at camera resolution."""
    cap = cv2.VideoCapture(str(VTEST))
    out = []
    for i in range(n * step):
        ok, frame = cap.read()
        assert ok
        if i % step == 0:
            out.append(frame)
    cap.release()
    return out


def _model(frame_bgr: np.ndarray) -> np.ndarray:
    return to_model_rgb(frame_bgr, SIZE)


def _covered(k: int, shape: tuple[int, int, int] = (480, 640, 3)) -> np.ndarray:
    """A lens covered in daylight: flat grey with a sensor's noise (sd 8), new every frame."""
    rng = np.random.default_rng(k)
    return np.clip(128 + rng.normal(0, 8, shape), 0, 255).astype(np.uint8)


def _frozen_with_clock(frame: np.ndarray, k: int) -> np.ndarray:
    """A frozen stream whose burnt-in clock still ticks."""
    out = frame.copy()
    cv2.putText(out, f"2026-12-07 12:00:{k:02d}.{k % 10}", (10, 40), cv2.FONT_HERSHEY_SIMPLEX, 1.2,
                (255, 255, 255), 2)  # fmt: skip
    return out


@needs_vtest
def test_a_real_street_is_neither_blind_featureless_nor_unchanged() -> None:
    frames = [_model(f) for f in _vtest_frames(20)]
    assert [picture_problem(b, a) for a, b in itertools.pairwise(frames)] == [""] * 19


def test_a_covered_lens_with_sensor_noise_is_featureless() -> None:
    """Before, a flat grey picture with noise was neither black nor unchanged: `online`."""
    frames = [_model(_covered(k)) for k in range(5)]
    assert [picture_problem(b, a) for a, b in itertools.pairwise(frames)] == ["featureless"] * 4


@needs_vtest
def test_a_frozen_stream_with_a_ticking_clock_is_unchanged() -> None:
    """Before, the clock's few changing pixels counted as a live picture."""
    still = _vtest_frames(1)[0]
    frames = [_model(_frozen_with_clock(still, k)) for k in range(6)]
    problems = [picture_problem(b, a) for a, b in itertools.pairwise(frames)]
    assert problems == ["unchanged"] * 5


def test_a_black_picture_is_black() -> None:
    dark = np.full((120, 160, 3), 5, np.uint8)
    assert picture_problem(dark, None) == "black"


def test_the_live_daemon_reports_a_covered_lens_blind(tmp_path: Path) -> None:
    from edge_hf.daemon.app import build_pipeline
    from edge_hf.daemon.config import Config

    video = tmp_path / "covered.mp4"
    write_video(video, (_covered(k, (96, 128, 3)) for k in range(20)), 10.0, (128, 96))
    cfg = Config.model_validate({
        "device_id": "box", "model": {"path": str(DEMO_MODEL), "providers": ["cpu"]},
        "cameras": [{"name": "hall", "source": str(video), "loop": True, "blind_after_s": 1.0}],
        "state_dir": str(tmp_path / "state"),
    })  # fmt: skip
    sink = RecordingSink()
    with live(build_pipeline(cfg, sink, score_history=None)):
        assert wait_until(lambda: ("hall", "blind") in sink.statuses, 20)


# ------------------------------------------------------------------ faults


class _FaultySource(OpenCVSource):
    """A real file source whose grab() raises once, after a few frames (a driver fault)."""

    faults = 0

    def grab(self) -> float | None:
        got = super().grab()
        self.reads = getattr(self, "reads", 0) + 1
        if _FaultySource.faults == 0 and self.reads >= 5:
            _FaultySource.faults += 1
            raise RuntimeError("simulated driver fault")
        return got


def test_a_capture_thread_that_raises_comes_back(caplog: pytest.LogCaptureFixture) -> None:
    video = moving_clip()
    stop = threading.Event()
    ring = FrameRing(16, (32, 32, 3))
    thread = CaptureThread(
        "cam", lambda: _FaultySource(str(video), live=False, loop=True), ring, interval_s=0.01,
        size=(32, 32), stop=stop, max_backoff_s=0.5,
    )  # fmt: skip
    with caplog.at_level(logging.ERROR):
        thread.start()
        deadline = time.monotonic() + 20
        while thread.stats.frames_read < 50 and time.monotonic() < deadline:
            time.sleep(0.05)
    stop.set()
    thread.join(10)
    assert _FaultySource.faults == 1 and thread.stats.reconnects >= 1
    assert thread.stats.frames_read >= 50, "frames again after the fault"
    assert any("capture failed" in r.message for r in caplog.records)


# ------------------------------------------------------------------ slow and blind cameras, live


def _video(path: Path, fps: float, seconds: float, black: bool = False) -> Path:
    rng = np.random.default_rng(1)
    frames = (
        np.zeros((96, 128, 3), np.uint8) if black else rng.integers(0, 256, (96, 128, 3), np.uint8)
        for _ in range(round(fps * seconds))
    )
    write_video(path, frames, fps, (128, 96))
    return path


def _camera(tmp_path: Path, video: Path, **camera: object) -> tuple[Pipeline, RecordingSink]:
    """A live one-camera pipeline (camera hall, looping `video`; run it with `live`) and the sink
    it reports to."""
    from edge_hf.daemon.app import build_pipeline
    from edge_hf.daemon.config import Config

    cfg = Config.model_validate({
        "device_id": "box", "model": {"path": str(DEMO_MODEL), "providers": ["cpu"]},
        "cameras": [{"name": "hall", "source": str(video), "loop": True, **camera}],
        "state_dir": str(tmp_path / "state"),
    })  # fmt: skip
    sink = RecordingSink()
    return build_pipeline(cfg, sink, score_history=None), sink


def test_a_camera_too_slow_for_the_model_is_reported_slow(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    video = _video(tmp_path / "3fps.mp4", 3.0, 2.0)
    pipeline, sink = _camera(tmp_path, video)
    with caplog.at_level(logging.WARNING), live(pipeline):
        wait_or_fail(lambda: ("hall", "slow") in sink.statuses, 30, "the camera's slow status")
    statuses = [s for _, s in sink.statuses]
    assert "slow" in statuses, statuses
    assert any("frames/s but the model samples every 100 ms" in r.message for r in caplog.records)


def test_a_black_camera_is_reported_blind_and_a_live_one_is_not(tmp_path: Path) -> None:
    black = _video(tmp_path / "black.mp4", 10.0, 2.0, black=True)
    pipeline, sink = _camera(tmp_path, black, blind_after_s=1.0)
    with live(pipeline):
        wait_or_fail(lambda: ("hall", "blind") in sink.statuses, 30, "the camera's blind status")
    assert "blind" in [s for _, s in sink.statuses]
    noisy = _video(tmp_path / "noisy.mp4", 10.0, 2.0)
    pipeline, sink = _camera(tmp_path, noisy, blind_after_s=1.0)
    with live(pipeline):
        # Not a fixed sleep: 2.5 s of its frames (a file plays in real time), then a status
        # update after them (one follows every batch): blind, it would have been said by then.
        wait_or_fail(lambda: pipeline.snapshot().cameras[0].frames_read >= 25, 30, "25 frames")
        batches = pipeline.snapshot().batches
        wait_or_fail(lambda: pipeline.snapshot().batches >= batches + 2, 30, "two more batches")
    assert {s for _, s in sink.statuses} <= {"online", "offline"}
