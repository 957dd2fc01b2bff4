"""`edge-hf calibrate` on real footage (vtest.avi, 79 s of pedestrians) and a synthetic fall."""

from __future__ import annotations

import math
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edge_hf.daemon.app import build_pipeline
from edge_hf.daemon.calibrate import (
    calibrate,
    quiet_point,
    smoothed_levels,
    smoothed_peak,
    write_threshold,
)
from edge_hf.daemon.config import DetectionConfig, load_config
from edge_hf.daemon.events import FallDetector
from edge_hf.daemon.payload import ModelInfo
from edge_hf.daemon.replay import replay_files
from edge_hf.daemon.sinks import RecordingSink
from edge_hf.training.synth import write_demo_clips
from tests.conftest import SHARED_DATA, SHIPPED_MODEL

VTEST = SHARED_DATA / "capture" / "vtest.avi"
REAL_MODEL = SHIPPED_MODEL.parent / "fall-real-efficientnet_lite0-t3.onnx"
# Only the tests that replay vtest.avi need it (the search and quiet-point tests are pure).
needs_vtest = pytest.mark.skipif(
    not (VTEST.exists() and SHIPPED_MODEL.exists()), reason="needs ../shared/data and the model"
)


def test_smoothed_peak_is_the_boundary_of_k_of_n() -> None:
    cfg = DetectionConfig(k=2, n=3)
    assert smoothed_peak([0.1, 0.9, 0.2, 0.8, 0.3], cfg) == 0.8  # 0.9 and 0.8 within 3 windows
    assert smoothed_peak([0.9, 0.1, 0.1, 0.8], cfg) == 0.1  # never two high ones within 3
    assert smoothed_peak([0.2, 0.6, 0.4], DetectionConfig(smoothing="median", n=3)) == 0.4


def _trace(down: bool) -> list[tuple[float, float, float | None]]:
    """10 Hz: a jump (P(falling) 0.9 for 3 windows, then up again), then someone lying down on a
    bed (0.7 for 3 windows, then P(down) 0.9 for 3 s)."""
    fall = [0.1] * 20 + [0.9] * 3 + [0.1] * 77 + [0.7] * 3 + [0.05] * 30 + [0.1] * 10
    lying = [0.05] * 103 + [0.9] * 30 + [0.05] * 10
    return [
        (i / 10, f, d if down else None) for i, (f, d) in enumerate(zip(fall, lying, strict=True))
    ]


@pytest.mark.parametrize("three_state", [True, False])
def test_the_quiet_point_is_where_the_detector_itself_goes_silent(three_state: bool) -> None:
    cfg = DetectionConfig(confirm_s=1.0, latch=False)
    detector = FallDetector("hall", "box", cfg, 0.5, ModelInfo("m", 3, 100.0))
    trace = _trace(three_state)

    def starts(threshold: float) -> int:
        d = FallDetector("hall", "box", cfg, threshold, ModelInfo("m", 3, 100.0))
        return sum(e.type == "start" for t, s, dn in trace for e in d.update(s, t, None, dn))

    quiet = quiet_point(trace, detector)
    assert quiet is not None
    # The jump is never confirmed by a three-state model (the person got up), so only the lying
    # down counts; a two-class model alarms on the jump itself: the smoothed peak.
    assert quiet == pytest.approx(0.7 if three_state else 0.9)
    assert smoothed_peak([s for _, s, _ in trace], cfg) == pytest.approx(0.9)
    assert starts(quiet) >= 1 and starts(quiet + 1e-3) == 0
    assert quiet_point(trace, detector, lowest=0.95) is None, "nothing raised at or above lowest"


def _raises(
    trace: list[tuple[float, float, float | None]], cfg: DetectionConfig, th: float
) -> bool:
    d = FallDetector("hall", "box", cfg, th, ModelInfo("m", 3, 100.0))
    return any(d.update(s, t, None, dn) for t, s, dn in trace)


def test_the_coarse_to_fine_search_finds_what_trying_every_level_finds() -> None:
    rng = random.Random(7)
    model = ModelInfo("m", 3, 100.0)
    for i in range(40):
        cfg = DetectionConfig(confirm_s=rng.choice([0.0, 1.0, 2.0]), latch=rng.random() < 0.5)
        # Stretches where the person stays down and stretches where they do not.
        trace = [
            (j / 10, rng.random() ** 3, rng.random() * (0.9 if j // 30 % 3 == 0 else 0.3))
            for j in range(rng.randint(50, 400))
        ]
        if i % 2:
            trace = [(t, s, None) for t, s, _ in trace]  # a two-class model
        levels = {math.floor(v * 1e4) / 1e4 for v in smoothed_levels([s for _, s, _ in trace], cfg)}
        plain = next(
            (v for v in sorted(levels, reverse=True) if v > 0 and _raises(trace, cfg, v)), None
        )
        assert quiet_point(trace, FallDetector("hall", "box", cfg, 0.5, model)) == plain


def _config(
    tmp_path: Path,
    threshold: float | None = None,
    model: Path = SHIPPED_MODEL,
    extra_model: str = "",
) -> Path:
    path = tmp_path / "c.yaml"
    extra = f"\n    threshold: {threshold}" if threshold is not None else ""
    path.write_text(
        f"device_id: box\nmodel:\n  path: {model}\n  providers: [cpu]{extra_model}\ncameras:\n"
        f"  - name: street  # pedestrians\n    source: /dev/video9{extra}\n"
        f"  - name: hall\n    source: /dev/video8\nstate_dir: {tmp_path / 'state'}\n"
    )
    return path


def _events(config: Path, video: Path, camera: str = "street") -> int:
    cfg = load_config(config)
    cam = next(c for c in cfg.cameras if c.name == camera).model_copy(update={"source": str(video)})
    sink = RecordingSink()
    replay_files(
        build_pipeline(cfg.model_copy(update={"cameras": [cam]}), sink, score_history=None)
    )
    return sum(e.type == "start" for e in sink.events)


@needs_vtest
def test_the_calibrated_threshold_keeps_the_site_quiet_and_is_tight(tmp_path: Path) -> None:
    config = _config(tmp_path)
    result = calibrate(load_config(config), "street", [VTEST], 0.0, margin=0.0)
    assert result.windows > 700 and result.p50 <= result.p90 <= result.p99 <= result.max
    assert result.events_at_current >= 1, "the default threshold alarms on these pedestrians"
    write_threshold(config, "street", result.threshold + 0.001)
    text = config.read_text()
    assert "# pedestrians" in text and (tmp_path / "c.yaml.bak").exists(), "one line changed"
    assert load_config(config).cameras[0].threshold == pytest.approx(result.threshold, abs=2e-3)
    assert load_config(config).cameras[1].threshold is None
    assert _events(config, VTEST) == 0, "normal activity raises nothing at the new threshold"
    # Tight: just under it, the same recording raises an event again.
    assert result.quiet is not None
    write_threshold(config, "street", result.quiet - 0.002)
    assert _events(config, VTEST) >= 1
    # A fall still raises an event exactly when it scores above the calibrated threshold.
    write_threshold(config, "street", result.threshold + 0.001)
    (fall,) = [p for p in write_demo_clips(tmp_path / "demo") if "fall" in p.name]
    cfg = load_config(config)
    cam = cfg.cameras[0].model_copy(update={"source": str(fall), "threshold": None})
    p = build_pipeline(
        cfg.model_copy(update={"cameras": [cam]}), RecordingSink(), score_history=None
    )
    replay_files(p)
    fall_peak = smoothed_peak(list(p.cameras[0].scores), cfg.detection)
    assert (_events(config, fall) >= 1) == (fall_peak >= cfg.cameras[0].threshold)


@needs_vtest
def test_calibration_does_not_go_below_the_models_operating_point_unless_asked(
    tmp_path: Path,
) -> None:
    config = load_config(_config(tmp_path, model=REAL_MODEL, extra_model="\n  threshold: 0.95"))
    lower = calibrate(config, "street", [VTEST], 0.0, margin=0.02, allow_lower=True)
    assert lower.floor == 0.0 and lower.threshold == pytest.approx(lower.quiet + 0.02)
    assert lower.quiet is not None and lower.p50 < lower.quiet < 0.9, "quiet well below 0.95"
    kept = calibrate(config, "street", [VTEST], 0.0, margin=0.02)
    assert kept.floor == 0.95 and kept.threshold == 0.95 and kept.quiet is None
    assert "the model's operating point" in kept.report()


@needs_vtest
def test_several_recordings_each_stay_silent(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path))
    (lie_down,) = [p for p in write_demo_clips(tmp_path / "demo") if "lie_down" in p.name]
    each = [
        calibrate(config, "street", [v], 0.0, 0.05, allow_lower=True) for v in (VTEST, lie_down)
    ]
    both = calibrate(config, "street", [VTEST, lie_down], 0.0, 0.05, allow_lower=True)
    quiet = [c.quiet for c in each]
    assert None not in quiet and quiet[0] != quiet[1], "two recordings that differ"
    assert both.quiet == max(q for q in quiet if q is not None)
    assert both.threshold == pytest.approx(max(c.threshold for c in each))
    assert both.windows == sum(c.windows for c in each)
    assert both.events_at_current == sum(c.events_at_current for c in each)


@needs_vtest
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
        (["--camera", "street", "--video", str(VTEST), str(tmp_path / "no.mp4")], "no such file"),
        (["--camera", "street", "--video", str(VTEST), "--margin", "0.7"], "--margin"),
    ]:
        bad = subprocess.run([*cli, *args], capture_output=True, text=True, check=False)
        lines = bad.stderr.strip().splitlines()
        assert bad.returncode == 2 and len(lines) == 1 and needle in lines[0], bad.stderr


# ------------------------------------------------------------------ calibrate --write, full disk


CAMERAS = "device_id: box\nmodel: {path: m.onnx}\nstate_dir: /var/lib/edge-hf\ncameras:\n"


def _write_in_child(config: Path, limit: int | None) -> subprocess.CompletedProcess[str]:
    """write_threshold in a child whose files may not grow past `limit` bytes (a full disk)."""
    code = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from edge_hf.core.errors import UserError\n"
        "from edge_hf.daemon.calibrate import write_threshold\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"limit = {limit}\n"
        "if limit: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))\n"
        "try: write_threshold(Path(sys.argv[1]), 'hall', 0.42)\n"
        "except UserError as e: print(e); sys.exit(2)\n"
    )
    return subprocess.run([sys.executable, "-c", code, str(config)], capture_output=True,
                          text=True, timeout=60)  # fmt: skip


def test_calibrate_write_on_a_full_disk_leaves_config_and_backup_whole(tmp_path: Path) -> None:
    config = tmp_path / "edge-hf.yaml"
    good = CAMERAS + "  - name: hall\n    source: rtsp://cam/1\n" + "# padding\n" * 40
    config.write_text(good)
    backup = config.with_suffix(".yaml.bak")
    backup.write_text(good)
    proc = _write_in_child(config, limit=len(good) // 2)
    assert proc.returncode == 2 and "cannot write" in proc.stdout and "unchanged" in proc.stdout
    assert config.read_text() == good, "the config is whole"
    assert backup.read_text() == good, "a good .bak is never replaced by a cut one"
    assert not list(tmp_path.glob(".*.tmp")), "no temporary file left behind"
    assert _write_in_child(config, None).returncode == 0
    assert "    threshold: 0.420\n" in config.read_text() and backup.read_text() == good


def test_calibrate_write_replaces_a_threshold_written_before_the_name(tmp_path: Path) -> None:
    config = tmp_path / "edge-hf.yaml"
    config.write_text(CAMERAS + "  - threshold: 0.6\n    name: hall\n    source: x\n"
                      "  - name: porch\n    threshold: 0.7\n    source: y\n")  # fmt: skip
    assert _write_in_child(config, None).returncode == 0
    text = config.read_text()
    assert text.count("threshold:") == 2, text
    assert "  - threshold: 0.420\n    name: hall\n" in text and "threshold: 0.7\n" in text


ASSIST = SHARED_DATA / "assist_iot" / "videos" / "adl"
LIE_DOWN = ASSIST / "11_sitting_laying_down_slowly.mp4"  # sits on a raised bed, lies down on it
WALK = ASSIST / "01_walking_slowly.mp4"
POSE = SHIPPED_MODEL.parent / "person-movenet-multipose-lightning.onnx"
needs_assist = pytest.mark.skipif(not ASSIST.is_dir(), reason="../shared/data/assist_iot absent")


# The camera's `main` view: left in most ASSIST-IoT clips, right in 06, 11, 12 and 19 (their two
# cameras are the other way round; experiments/realbench/items.py::assist_crop).
MAIN_LEFT, MAIN_RIGHT = "[0, 0, 853, 640]", "[427, 0, 853, 640]"


def _room(tmp_path: Path, zones: str = "", crop: str = MAIN_RIGHT) -> Path:
    """A camera of the ASSIST-IoT room (its `main` view) with the real model and the person stage."""
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "room.yaml"
    path.write_text(
        f"device_id: box\nmodel:\n  path: {REAL_MODEL}\n  providers: [cpu]\nperson:\n  model: "
        f"{POSE}\ncameras:\n  - name: room\n    source: /dev/video9\n    crop: {crop}\n"
        f"{zones}state_dir: {tmp_path / 'state'}\n"
    )
    return path


def _lying_points(config: Path, video: Path) -> list[tuple[float, float]]:
    """Where the pose rules saw someone down in a replay of `video` (0-1 of the view), and the
    number of fall events it raised."""
    cfg = load_config(config)
    cam = cfg.cameras[0].model_copy(update={"source": str(video), "loop": False})
    p = build_pipeline(cfg.model_copy(update={"cameras": [cam]}), RecordingSink(), score_history=None, live=False)  # fmt: skip
    p.cameras[0].detector.lying_at = []
    replay_files(p)
    return [at for _, at, why in p.cameras[0].detector.lying_at if why == "pose"]


@needs_assist
def test_calibrate_suggests_an_ignore_zone_where_people_lay_and_it_silences_them(
    tmp_path: Path,
) -> None:
    config = _room(tmp_path)
    cli = [sys.executable, "-m", "edge_hf.cli", "--log-level", "WARNING", "calibrate", "--config", str(config), "--camera", "room"]  # fmt: skip
    out = subprocess.run([*cli, "--video", str(LIE_DOWN)], capture_output=True, text=True, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "suggested ignore zone(s) for camera room" in out.stdout, out.stdout
    assert re.search(r"people lay here during normal activity: \d+ pose ticks between", out.stdout)
    assert "threshold:" not in config.read_text(), "zones are printed, never written"
    # The printed YAML, pasted under the camera, is a valid config whose zones hold every place
    # the pose rules saw the person lying.
    block = out.stdout[out.stdout.index("zones:\n") :]
    with_zones = _room(tmp_path / "z", "    " + block.replace("\n", "\n    ").rstrip() + "\n")
    zones = load_config(with_zones).cameras[0].zone_rules()
    assert zones and all(z.kind == "ignore" for z in zones.zones)
    lying = _lying_points(config, LIE_DOWN)
    assert len(lying) >= 10 and all(zones.refusal(p) for p in lying)
    # Replayed with those zones, the lying down raises no fall; without, it did.
    before = calibrate(load_config(config), "room", [LIE_DOWN], 0.0, 0.05)
    after = calibrate(load_config(with_zones), "room", [LIE_DOWN], 0.0, 0.05)
    assert before.events_at_current >= 1 and after.events_at_current == 0
    assert after.zones == (), "nothing left to suggest once the zones are in"


@needs_assist
def test_walking_about_suggests_no_zone(tmp_path: Path) -> None:
    result = calibrate(load_config(_room(tmp_path, crop=MAIN_LEFT)), "room", [WALK], 0.0, 0.05)
    assert result.zones == ()
