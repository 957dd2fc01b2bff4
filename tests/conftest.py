"""Shared fixtures: small synthetic video sets written once per test session, and the one
Mosquitto broker fixture every MQTT test uses."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnxruntime as ort
import pytest
import torch

from edge_hf.daemon.config import DetectionConfig
from edge_hf.daemon.events import FallDetector
from edge_hf.daemon.payload import ModelInfo
from edge_hf.training.synth import generate, write_video
from tests.broker import Broker

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """A Mosquitto broker on a free loopback port for one test; stopped after it (a test may
    stop and restart it: the port and settings stay)."""
    b = Broker(tmp_path / "broker").start()
    yield b
    b.stop()


def fall_detector(wall: Callable[[float], float] | None = None, **detection: Any) -> FallDetector:
    """Camera hall's FallDetector on device box, threshold 0.5: two windows of three over it
    start a fall, 10 s cooldown; `detection` sets other DetectionConfig keys (else their
    defaults: a fall stays latched until acknowledged); `wall`: its wall clock."""
    cfg = DetectionConfig(**{"k": 2, "n": 3, "cooldown_s": 10.0, **detection})
    return FallDetector("hall", "box", cfg, 0.5, ModelInfo("m.onnx", 3, 100.0), wall=wall)


@pytest.fixture(scope="session")
def synth_small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two clips per class at 15 fps, 160x120: real mp4 files with a manifest."""
    out = tmp_path_factory.mktemp("synth_small")
    generate(out, clips_per_class=2, fps=15.0, seed=5, width=160, height=120)
    return out


@pytest.fixture(scope="session")
def static_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A still scene: the same textured frame 30 times (lossless MJPG in an AVI)."""
    out = tmp_path_factory.mktemp("static") / "still.avi"
    rng = np.random.default_rng(0)
    frame = cv2.GaussianBlur(rng.integers(0, 256, (96, 128, 3), dtype=np.uint8), (9, 9), 3)
    writer = cv2.VideoWriter(str(out), cv2.VideoWriter.fourcc(*"MJPG"), 10.0, (128, 96))
    for _ in range(30):
        writer.write(frame)
    writer.release()
    return out


BITS = 8


def counter_video(path: Path, fps: float, seconds: float, size: tuple[int, int] = (64, 48)) -> Path:
    """A clip whose frame i shows i in binary as 8 black/white columns: time survives the codec."""
    w, h = size
    frames = []
    for i in range(round(fps * seconds)):
        f = np.zeros((h, w, 3), np.uint8)
        for b in range(BITS):
            if (i >> b) & 1:
                f[:, b * w // BITS : (b + 1) * w // BITS] = 255
        frames.append(f)
    write_video(path, iter(frames), fps, size)
    return path


def frame_number(frame: np.ndarray) -> int:
    """Read back the index that `counter_video` drew (frame as (H, W, 3) RGB or (H, W))."""
    gray = frame.mean(axis=2) if frame.ndim == 3 else frame
    w = gray.shape[1]
    bits = [
        gray[:, (b * w // BITS) + 2 : ((b + 1) * w // BITS) - 2].mean() > 127 for b in range(BITS)
    ]
    return sum(1 << b for b, on in enumerate(bits) if on)


def _random_export(out: Path, backbone: str) -> Path:
    """An untrained but real edge_hf export of `backbone` (T=3, 64x64, 6 classes), checked to
    answer differently to different windows (a random MobileNetV3-small does not in eval mode:
    tests of parity on such a model could not fail)."""
    from edge_hf.training.export import export_onnx
    from edge_hf.training.models import build_model
    from edge_hf.training.synth import CLASSES
    from edge_hf.training.train import TrainConfig, save_checkpoint

    cfg = TrainConfig(data="none", backbone=backbone, input_size=64)
    with torch.random.fork_rng():  # the same weights every run, other tests' RNG untouched
        torch.manual_seed(0)
        model = build_model(cfg.backbone, cfg.window, len(CLASSES))
    save_checkpoint(out / "tiny.pt", model, cfg, sorted(CLASSES))
    path = out / "tiny.onnx"
    export_onnx(out / "tiny.pt", path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((4, 9, 64, 64)).astype(np.float32)
    logits = session.run(None, {session.get_inputs()[0].name: x})[0]
    assert logits.std(axis=0).mean() > 1e-3, f"fixture {backbone} is input-independent"
    return path


@pytest.fixture(scope="session")
def tiny_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random efficientnet_lite0 export (the shipped backbone; `_random_export`)."""
    return _random_export(tmp_path_factory.mktemp("tiny_model"), "efficientnet_lite0")


@pytest.fixture(scope="session")
def tiny_resnet_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random resnet18 export (`_random_export`): where a test needs int8 to stay close to
    fp32. A random lite0's int8 error is larger than the spread of its logits between windows
    (untrained depthwise convs quantise poorly); the shipped model's is measured by make bench."""
    return _random_export(tmp_path_factory.mktemp("tiny_resnet"), "resnet18")


SHIPPED_MODEL = (
    Path(__file__).resolve().parents[1] / "models" / "fall-synth-mobilenet_v3_small-t3.onnx"
)


_MOVING: list[Path] = []


def moving_clip() -> Path:
    """A generated 768x576, 10 fps, 6 s clip of shapes moving over a texture (MJPG AVI), made
    once per session: what tests of capture, restart and fault handling read, so that they run
    wherever CI runs (vtest.avi's size and frame rate, without depending on ../shared)."""
    if not _MOVING:
        import tempfile

        out = Path(tempfile.mkdtemp(prefix="edge_hf_clip_")) / "moving.avi"
        rng = np.random.default_rng(3)
        base = cv2.GaussianBlur(rng.integers(0, 256, (576, 768, 3), dtype=np.uint8), (15, 15), 5)
        writer = cv2.VideoWriter(str(out), cv2.VideoWriter.fourcc(*"MJPG"), 10.0, (768, 576))
        for i in range(60):
            frame = base.copy()
            cv2.rectangle(frame, (40 + 10 * i, 200), (120 + 10 * i, 420), (30, 60, 200), -1)
            cv2.circle(frame, (700 - 8 * i, 100 + 3 * i), 40, (220, 220, 40), -1)
            writer.write(frame)
        writer.release()
        _MOVING.append(out)
    return _MOVING[0]


@contextmanager
def live(pipeline: Any) -> Iterator[threading.Thread]:
    """A built live pipeline started and run in a thread; stopped and joined on the way out."""
    pipeline.start()
    runner = threading.Thread(target=pipeline.run, kwargs={"drain_s": 1.0})
    runner.start()
    try:
        yield runner
    finally:
        pipeline.stop.set()
        runner.join(30)


def wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    """Poll `condition` until it holds or `timeout_s` passes; whether it held."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def wait_or_fail(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll `condition` until it holds; fail the test, naming `what` it waited for, if it has not
    within `timeout_s`. What a test waits on instead of sleeping long enough."""
    if not wait_until(condition, timeout_s):
        pytest.fail(f"waited {timeout_s:g} s for {what}; it never happened", pytrace=False)


def clip_frames(clip: Path, size: tuple[int, int] = (640, 480)) -> tuple[list[np.ndarray], float]:
    """Every frame of a real clip resized to `size` (w, h), and its frame rate: for composites
    and re-encoded copies in tests."""
    cap = cv2.VideoCapture(str(clip))
    fps = cap.get(cv2.CAP_PROP_FPS)
    out = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        out.append(cv2.resize(frame, size, interpolation=cv2.INTER_AREA))
    cap.release()
    return out, fps


def edge_hf_check(tmp_path: Path, model: Path, person: str) -> subprocess.CompletedProcess[str]:
    """`edge-hf check` in a subprocess on a one-camera config with `model` and the `person:`
    section's lines `person` (each indented two spaces, newline-terminated)."""
    path = tmp_path / "c.yaml"
    path.write_text(
        f"device_id: t\nmodel:\n  path: {model}\ncameras:\n  - name: a\n    source: x.mp4\n"
        f"state_dir: {tmp_path / 's'}\nperson:\n{person}"
    )
    return subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "check", "--config", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
