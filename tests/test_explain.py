"""#43 item 5, "why did it (not) alarm?": `edge-hf replay --explain` on real GMDCSA24 clips through
the shipped pipeline (the real classifier, MoveNet, the learned head, decision combined), the
same reasons counted per reason in /metrics and written to the debug log, and the timeline's
signals."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from edge_hf.cli import main
from edge_hf.core.posefall import PoseVerdict, Seen
from edge_hf.daemon.app import build_pipeline
from edge_hf.daemon.config import Config, DetectionConfig
from edge_hf.daemon.events import FallDetector
from edge_hf.daemon.payload import ModelInfo
from edge_hf.daemon.prometheus import SnapshotCollector
from edge_hf.daemon.replay import replay_files
from edge_hf.daemon.sinks import RecordingSink
from tests.conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parents[1]
GMDCSA = SHARED_DATA / "gmdcsa24"
FALL = GMDCSA / "S3_Fall_01.mp4"  # the pose rules confirm it (falling forward, lying low)
CNN_FALL = GMDCSA / "S3_Fall_15.mp4"  # the classifier's descent, then lying, raises it
needs_gmdcsa = pytest.mark.skipif(not GMDCSA.is_dir(), reason="../shared/data/gmdcsa24 absent")
ROW = re.compile(r"^\s*(\d+) ")  # a second's row: the second first


def _config(video: Path, tmp_path: Path, zones: list[dict[str, Any]] | None = None) -> dict:
    """The shipped pipeline as the example configs set it, on one camera `cam`."""
    camera: dict[str, Any] = {"name": "cam", "source": str(video)}
    if zones:
        camera["zones"] = zones
    return {
        "device_id": "t",
        "model": {"path": str(ROOT / "models/fall-real-efficientnet_lite0-t3.onnx"),
                  "providers": ["cpu"]},
        "person": {"model": str(ROOT / "models/person-movenet-multipose-lightning.onnx"),
                   "head": str(ROOT / "models/pose-head.json"), "decision": "combined"},
        "cameras": [camera],
        "state_dir": str(tmp_path / "state"),
    }  # fmt: skip


def _explain(
    video: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    zones: list[dict[str, Any]] | None = None,
    *extra: str,
) -> tuple[list[dict[str, Any]], list[str]]:
    """`edge-hf replay --explain` (the last frame held 3 s, as the benchmark does): the events it
    printed and the explanation's lines."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(_config(video, tmp_path, zones)))
    argv = ["replay", "--config", str(path), "--state-dir", str(tmp_path / "replay"),
            "--hold-end-s", "3", "--explain", *extra]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    events = [json.loads(x) for x in out if x.startswith("{")]
    return events, [x for x in out if not x.startswith("{")]


def _seconds(lines: list[str]) -> list[int]:
    return [int(m.group(1)) for x in lines if (m := ROW.match(x))]


@pytest.fixture(scope="module")
def lying_box(tmp_path_factory: pytest.TempPathFactory) -> tuple[float, float, float, float]:
    """Where the person of FALL lies: the box its event names."""
    if not GMDCSA.is_dir():
        pytest.skip("../shared/data/gmdcsa24 absent")
    tmp = tmp_path_factory.mktemp("lying")
    cfg = Config.model_validate(_config(FALL, tmp))
    sink = RecordingSink()
    replay_files(build_pipeline(cfg, sink, score_history=None, live=False), hold_end_s=3.0)
    (start,) = [e for e in sink.events if e.type == "start"]
    assert start.person is not None
    return start.person[1]


def _bed(box: tuple[float, float, float, float], by: float = 0.05) -> dict[str, Any]:
    x0, y0, x1, y1 = (max(0.0, box[0] - by), max(0.0, box[1] - by),
                      min(1.0, box[2] + by), min(1.0, box[3] + by))  # fmt: skip
    return {"name": "bed", "kind": "ignore", "points": [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]}


# ------------------------------------------------------------------ replay --explain


@needs_gmdcsa
def test_a_daily_activity_clip_that_raised_nothing_says_which_gate_refused_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """S4_ADL_19 (walking, sitting on the bed, eating): the classifier reads a fall as the person
    sits down, and the pose rules saw nobody down then, so decision combined raises nothing. The
    explanation has a row per second of the file (and the 3 s held) with the person's signals,
    the refusal under its second, and ends with the verdict naming that reason."""
    events, lines = _explain(GMDCSA / "S4_ADL_19.mp4", tmp_path, capsys)
    assert events == []
    assert _seconds(lines) == list(range(13)), "9.9 s of file + 3 s held: seconds 0..12"
    refusal = [x for x in lines if x.lstrip().startswith("->")]
    assert any("no alarm: the classifier's fall" in x and "saw nobody down" in x for x in refusal)
    assert any("person stage: decision combined, lost_s 1 s, when_others_present alert" in x
               for x in lines), "the settings line says what decided"  # fmt: skip
    rows = [x for x in lines if ROW.match(x)]
    assert all(re.search(r"\|\s+1\s+\d+°\s+\d\.\d\d", x) for x in rows), "one person, torso, aspect"
    last = lines[-1]
    assert last.startswith("cam: no alarm: the classifier's fall (smoothed P(fall) 0.")
    assert "while the pose rules saw nobody down in the last 3 s (decision combined)" in last


@needs_gmdcsa
def test_a_quiet_clip_says_what_stayed_under_its_threshold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """S2_ADL_23 (eating biscuits on the bed): no decision was ever taken; the verdict says the
    classifier's peak against the threshold and that the pose rules saw nobody down."""
    events, lines = _explain(GMDCSA / "S2_ADL_23.mp4", tmp_path, capsys)
    assert events == []
    assert re.fullmatch(
        r"cam: no alarm: the classifier's smoothed P\(fall\) peaked at 0\.\d\d at \d+\.\d s, "
        r"under the threshold 0\.50; the pose rules saw nobody down",
        lines[-1],
    ), lines[-1]


@needs_gmdcsa
def test_a_fall_inside_an_ignore_zone_says_the_person_lay_in_zone_bed(
    lying_box: tuple[float, float, float, float],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """S3_Fall_01 with a bed zone where the person lies: no event, and the verdict names the zone
    (the pose rules' fall refused there); the classifier's path stayed quiet, and says so."""
    events, lines = _explain(FALL, tmp_path, capsys, [_bed(lying_box)])
    assert events == []
    assert any(re.search(r"-> \d+\.\d s no alarm: the person lay inside zone bed$", x)
               for x in lines)  # fmt: skip
    assert lines[-1].startswith("cam: no alarm: the person lay inside zone bed (at ")
    assert " bed " in " ".join(x for x in lines if ROW.match(x)), "the zone column names it"


@needs_gmdcsa
def test_a_fall_that_alarmed_says_what_raised_it_and_when(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """S3_Fall_01 without zones: the pose rules raised it, at the event's own time; S3_Fall_15:
    the classifier's descent followed by lying raised it, the descent at the event's started_at
    and the alarm at its time. Each explanation ends with that one alarm line."""
    events, lines = _explain(FALL, tmp_path / "a", capsys)
    (start,) = [e for e in events if e["type"] == "start"]
    at = _seconds_of(start["time"])
    assert lines[-1] == (
        f"cam: alarm at {at:.1f} s: the pose rules confirmed a fall at {at:.1f} s "
        "(person 1: aspect, hips, torso)"
    ), lines[-1]
    events, lines = _explain(CNN_FALL, tmp_path / "b", capsys)
    (start,) = [e for e in events if e["type"] == "start"]
    m = re.fullmatch(r"cam: alarm at (\d+\.\d) s: the classifier saw a descent at (\d+\.\d) s "
                     r"and the person stayed down \(mean P\(falling or down\) 0\.\d\d over 2 s\)",
                     lines[-1])  # fmt: skip
    assert m, lines[-1]
    assert float(m.group(1)) == pytest.approx(_seconds_of(start["time"]), abs=0.051)
    assert float(m.group(2)) == pytest.approx(_seconds_of(start["started_at"]), abs=0.051)


def _seconds_of(iso_time: str) -> float:
    """Seconds after the epoch (replay's default --origin) of an event's ISO time."""
    from edge_hf.daemon.payload import unix

    return unix(iso_time)


# ------------------------------------------------------------------ the daemon: log, /metrics


@needs_gmdcsa
def test_the_reason_goes_to_the_debug_log_and_a_counter_per_reason(
    lying_box: tuple[float, float, float, float],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The zone's refusal on the daemon's own parts (no --explain): one debug line, and
    edge_hf_no_alarm_total{reason="in_zone"} 1 beside a 0 for every other reason."""
    cfg = Config.model_validate(_config(FALL, tmp_path, [_bed(lying_box)]))
    pipeline = build_pipeline(cfg, RecordingSink(), score_history=None, live=False)
    with caplog.at_level(logging.DEBUG, logger="edge_hf.daemon.events"):
        replay_files(pipeline, hold_end_s=3.0)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert [x for x in said if "lay inside" in x] == [
        next(x for x in said if x.startswith("cam: ") and x.endswith(
            ": no alarm: the person lay inside zone bed"))
    ]  # fmt: skip
    registry = CollectorRegistry()
    registry.register(SnapshotCollector(pipeline.snapshot))
    text = generate_latest(registry).decode()
    assert 'edge_hf_no_alarm_total{camera="cam",reason="in_zone"} 1.0' in text
    assert 'edge_hf_no_alarm_total{camera="cam",reason="unconfirmed"} 0.0' in text
    assert 'edge_hf_no_alarm_total{camera="cam",reason="not_up_before"} 0.0' in text


def test_a_descent_the_pose_gate_refused_is_not_called_unconfirmed() -> None:
    """Decision combined: the pose rules saw someone down at the descent (3.0 s), then only
    people upright. The classifier's descent is followed by 9 s of "down": the person stayed
    down, and the candidate is dropped because the pose gate shut (nobody down in the last 3 s),
    so the refusal is no_pose_down, not `unconfirmed` ("not followed by lying" would be wrong)."""
    d = FallDetector("cam", "t", DetectionConfig(confirm_s=4.0), 0.5, ModelInfo("m", 3, 100.0),
                     decision="combined", when_others="alert")  # fmt: skip
    box = (0.4, 0.2, 0.5, 0.9)
    trace = [(0.05, 0.05)] * 30 + [(0.9, 0.1)] * 2 + [(0.1, 0.85)] * 90
    for i, (fall, down) in enumerate(trace):
        t = i / 10
        if i % 2 == 0:
            lying = 28 <= i <= 32
            seen = Seen(1, box, (0.45, 0.55), upright=not lying, down=lying)
            verdict = PoseVerdict(
                lying, False, t=t, seen=[seen], person=(1, box) if lying else None
            )
            assert d.on_pose(t, verdict) == []
        assert d.update(fall, t, None, down) == []
    assert d.counts.unconfirmed == 0
    assert d.counts.refused == {"no_pose_down": 1}


# ------------------------------------------------------------------ the timeline


@needs_gmdcsa
def test_the_timeline_draws_every_signal_not_only_p_fall(
    lying_box: tuple[float, float, float, float],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--timeline-png` with a bed zone: a PNG; its panels carry the classifier's, the person's
    (torso, aspect, hips, head, pose score: known while the person is in view) and the gates'
    signals, the zone's refusal 1 while the person lies in the bed."""
    from edge_hf.daemon.explain import attach
    from edge_hf.daemon.timeline import panels

    png = tmp_path / "t.png"
    _explain(FALL, tmp_path, capsys, [_bed(lying_box)], "--timeline-png", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    cfg = Config.model_validate(_config(FALL, tmp_path, [_bed(lying_box)]))
    pipeline = build_pipeline(cfg, RecordingSink(), score_history=None, live=False)
    (rec,) = attach(pipeline, 0.0)
    replay_files(pipeline, hold_end_s=3.0)
    cnn, person, gates = panels(rec)
    assert {s.label for s in cnn.series} == {"P(fall)", "P(down)", "smoothed P(fall)"}
    signals = {s.label: s.values for s in person.series}
    for name in ("torso angle / 90°", "box aspect (w/h)", "hips' drop (upright heights)",
                 "head P(down)", "pose model score"):  # fmt: skip
        assert np.isfinite(signals[name]).mean() > 0.8, name
    assert signals["read down"][-1] == 1.0
    by = {s.label: s.values for s in gates.series}
    assert by["lying where zones refuse"][-1] == 1.0 and by["lying where zones refuse"][0] == 0.0
    assert "classifier may raise (decision combined)" in by and "others upright" in by
