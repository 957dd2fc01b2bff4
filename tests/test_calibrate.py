"""`edge-hf calibrate` on real footage (vtest.avi, 79 s of pedestrians) and a synthetic fall."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from edge_hf.daemon.app import build_pipeline
from edge_hf.daemon.calibrate import calibrate, smoothed_peak, write_threshold
from edge_hf.daemon.config import DetectionConfig, load_config
from edge_hf.daemon.sinks import RecordingSink
from edge_hf.training.synth import write_demo_clips
from tests.conftest import SHARED_DATA, SHIPPED_MODEL

VTEST = SHARED_DATA / "capture" / "vtest.avi"
pytestmark = pytest.mark.skipif(
    not (VTEST.exists() and SHIPPED_MODEL.exists()), reason="needs ../shared/data and the model"
)


def test_smoothed_peak_is_the_boundary_of_k_of_n() -> None:
    cfg = DetectionConfig(k=2, n=3)
    assert smoothed_peak([0.1, 0.9, 0.2, 0.8, 0.3], cfg) == 0.8  # 0.9 and 0.8 within 3 windows
    assert smoothed_peak([0.9, 0.1, 0.1, 0.8], cfg) == 0.1  # never two high ones within 3
    assert smoothed_peak([0.2, 0.6, 0.4], DetectionConfig(smoothing="median", n=3)) == 0.4


def _config(tmp_path: Path, threshold: float | None = None) -> Path:
    path = tmp_path / "c.yaml"
    extra = f"\n    threshold: {threshold}" if threshold is not None else ""
    path.write_text(
        f"device_id: box\nmodel:\n  path: {SHIPPED_MODEL}\n  providers: [cpu]\ncameras:\n"
        f"  - name: street  # pedestrians\n    source: /dev/video9{extra}\n"
        f"  - name: hall\n    source: /dev/video8\nstate_dir: {tmp_path / 'state'}\n"
    )
    return path


def _events(config: Path, video: Path, camera: str = "street") -> int:
    cfg = load_config(config)
    cam = next(c for c in cfg.cameras if c.name == camera).model_copy(update={"source": str(video)})
    sink = RecordingSink()
    build_pipeline(cfg.model_copy(update={"cameras": [cam]}), sink, score_history=None).replay()
    return sum(e.type == "start" for e in sink.events)


def test_the_calibrated_threshold_keeps_the_site_quiet_and_is_tight(tmp_path: Path) -> None:
    config = _config(tmp_path)
    result = calibrate(load_config(config), "street", VTEST, 0.0, margin=0.0)
    assert result.windows > 700 and result.p50 <= result.p90 <= result.p99 <= result.max
    assert result.events_at_current >= 1, "the default threshold alarms on these pedestrians"
    write_threshold(config, "street", result.threshold + 0.001)
    text = config.read_text()
    assert "# pedestrians" in text and (tmp_path / "c.yaml.bak").exists(), "one line changed"
    assert load_config(config).cameras[0].threshold == pytest.approx(result.threshold, abs=2e-3)
    assert load_config(config).cameras[1].threshold is None
    assert _events(config, VTEST) == 0, "normal activity raises nothing at the new threshold"
    # Tight: just under it, the same recording raises an event again.
    write_threshold(config, "street", result.trigger - 0.002)
    assert _events(config, VTEST) >= 1
    # A fall still raises an event exactly when it scores above the calibrated threshold.
    write_threshold(config, "street", result.threshold + 0.001)
    (fall,) = [p for p in write_demo_clips(tmp_path / "demo") if "fall" in p.name]
    cfg = load_config(config)
    cam = cfg.cameras[0].model_copy(update={"source": str(fall), "threshold": None})
    p = build_pipeline(
        cfg.model_copy(update={"cameras": [cam]}), RecordingSink(), score_history=None
    )
    p.replay()
    fall_peak = smoothed_peak(list(p.cameras[0].scores), cfg.detection)
    assert (_events(config, fall) >= 1) == (fall_peak >= cfg.cameras[0].threshold)


def test_calibrate_cli_prints_the_distribution_and_refuses_mistakes(tmp_path: Path) -> None:
    config = _config(tmp_path)
    cli = [sys.executable, "-m", "edge_hf.cli", "--log-level", "WARNING", "calibrate", "--config", str(config)]  # fmt: skip
    ok = subprocess.run([*cli, "--camera", "street", "--video", str(VTEST)], capture_output=True, text=True, check=False)  # fmt: skip
    assert ok.returncode == 0 and "p99" in ok.stdout and "suggested threshold" in ok.stdout, (
        ok.stderr
    )
    assert "threshold:" not in config.read_text(), "nothing written without --write"
    for args, needle in [
        (["--camera", "nope", "--video", str(VTEST)], "no such camera"),
        (["--camera", "street"], "--video FILE"),
        (["--camera", "street", "--video", str(tmp_path / "none.mp4")], "no such file"),
        (["--camera", "street", "--video", str(VTEST), "--margin", "0.7"], "--margin"),
    ]:
        bad = subprocess.run([*cli, *args], capture_output=True, text=True, check=False)
        lines = bad.stderr.strip().splitlines()
        assert bad.returncode == 2 and len(lines) == 1 and needle in lines[0], bad.stderr
