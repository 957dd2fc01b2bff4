"""Hardening, round 2 (#31): each way a real deployment lost, faked or hid a fall, reproduced with
real files, a real Mosquitto and clock steps through the detector's injectable wall clock."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from edge_hf.daemon.config import DetectionConfig
from edge_hf.daemon.events import FallDetector, ModelInfo
from edge_hf.daemon.journal import JournalSink, OpenEvents
from edge_hf.daemon.sinks import RecordingSink
from edge_hf.daemon.snapshots import Retention, SnapshotSink

INFO = ModelInfo("m.onnx", 3, 100.0)


def _detector(tmp_path: Path, wall: object = None, **kw: object) -> FallDetector:
    cfg = DetectionConfig(**{"k": 2, "n": 3, "cooldown_s": 10.0, **kw})  # type: ignore[arg-type]
    return FallDetector("hall", "box", cfg, 0.5, INFO, wall=wall)  # type: ignore[arg-type]


def _fall(d: FallDetector, t0: float, frame: np.ndarray | None = None) -> list[str]:
    """Three high windows from `t0` (0.1 s apart): the event types they cause."""
    return [e.type for i in range(3) for e in d.update(0.9, t0 + 0.1 * i, frame)]


# ------------------------------------------------------------------ 1: snapshot cannot be written


def _snapshot_sink(tmp_path: Path) -> tuple[SnapshotSink, RecordingSink]:
    inner = RecordingSink()
    return SnapshotSink(inner, tmp_path / "snapshots", {"hall": Retention(10, 10**9)}), inner


def test_an_alert_goes_out_without_its_snapshot_when_the_folder_cannot_be_made(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "snapshots").write_text("a file where the snapshot folder should be")
    d = _detector(tmp_path, snapshot=True)
    sink, inner = _snapshot_sink(tmp_path)
    frame = np.full((64, 64, 3), 128, np.uint8)
    with caplog.at_level(logging.ERROR):
        for i in range(3):
            for e in d.update(0.9, 100 + 0.1 * i, frame):
                sink.send(e)
    assert [e.type for e in inner.events] == ["start"]
    assert inner.events[0].snapshot is None and inner.events[0].evidence is None
    assert any("no snapshot for this fall" in r.message for r in caplog.records)


def test_a_snapshot_is_written_from_the_picture_the_event_carries(tmp_path: Path) -> None:
    d = _detector(tmp_path, snapshot=True)
    sink, inner = _snapshot_sink(tmp_path)
    frame = np.full((64, 64, 3), 128, np.uint8)
    for i in range(3):
        for e in d.update(0.9, 100 + 0.1 * i, frame):
            assert e.evidence is not None and e.evidence.model_rgb is not None
            sink.send(e)
    for e in d.acknowledge(105.0):
        sink.send(e)
    start, end = inner.events
    assert start.snapshot is not None and Path(start.snapshot).stat().st_size > 0
    assert end.snapshot == start.snapshot and "evidence" not in start.as_dict()
    plain = _detector(tmp_path)  # snapshots off: no picture travels
    assert all(e.evidence is None for i in range(3) for e in plain.update(0.9, 1 + 0.1 * i, frame))


# ------------------------------------------------------------------ 2: wall-clock steps


@pytest.mark.parametrize("step_s", [3600.0, -3600.0])
def test_a_wall_clock_step_neither_deafens_a_camera_nor_reverses_an_event(
    tmp_path: Path, step_s: float
) -> None:
    offset = [1_767_225_600.0]  # wall = monotonic + offset; NTP moves the offset
    d = _detector(tmp_path, wall=lambda t: t + offset[0])
    events = [e for i in range(3) for e in d.update(0.9, 100 + 0.1 * i)]
    assert [e.type for e in events] == ["start"]
    offset[0] += step_s  # the clock steps while the fall is latched
    end = d.acknowledge(110.0)  # an ack, on the monotonic clock like every timer
    assert [e.type for e in end] == ["end"]
    start, stop = events[0].as_dict(), end[0].as_dict()
    assert stop["ended_at"] >= start["started_at"], "an end is never before its start"
    assert end[0].time - events[0].started_at == pytest.approx(110.0 - 100.1)  # started at k=2
    # The next fall, after the 10 s cooldown by the monotonic clock, raises its event.
    for i in range(20):
        d.update(0.1, 111 + 0.1 * i)
    assert _fall(d, 121.0) == ["start"]


# ------------------------------------------------------------------ 4, 5: damaged state files


def _write_journal(state: Path, content: object) -> OpenEvents:
    state.mkdir(parents=True, exist_ok=True)
    (state / "open-events.json").write_text(json.dumps(content))
    return OpenEvents(state / "open-events.json")


GOOD = {"event_id": "e1", "camera": "hall", "device_id": "box", "started_at": 1767225600.0,
        "peak_score": 0.9, "model": {"name": "m.onnx", "window": 3, "interval_ms": 100.0}}  # fmt: skip


@pytest.mark.parametrize(
    "bad",
    [1, {**GOOD, "started_at": "abc"}, {**GOOD, "started_at": 1e300}, {**GOOD, "camera": "a/#"},
     {**GOOD, "peak_score": float("nan")}, {**GOOD, "model": "x"}, {**GOOD, "device_id": None}],
    ids=["not-an-object", "time-text", "time-1e300", "camera-wildcard", "score-nan", "model",
         "device"],
)  # fmt: skip
def test_a_damaged_journal_entry_is_skipped_and_the_good_ones_still_end(
    tmp_path: Path, bad: object, caplog: pytest.LogCaptureFixture
) -> None:
    journal = _write_journal(tmp_path, {"x": bad, "e1": GOOD})
    inner = RecordingSink()
    with caplog.at_level(logging.WARNING):
        JournalSink(inner, journal).start()
    assert [(e.event_id, e.type, e.end_reason) for e in inner.events] == [
        ("e1", "start", None), ("e1", "end", "restart")
    ]  # fmt: skip
    assert any("skipping an unreadable open event" in r.message for r in caplog.records)


@pytest.mark.parametrize("text", ["[1, 2]", "{", '"x"', "[" * 100_000])
def test_a_journal_that_is_not_an_object_starts_empty(tmp_path: Path, text: str) -> None:
    (tmp_path / "open-events.json").write_text(text)
    journal = OpenEvents(tmp_path / "open-events.json")
    assert len(journal) == 0 and journal.leftovers() == []


# ------------------------------------------------------------------ 3, 8: replay stays off live state

import subprocess  # noqa: E402
import sys  # noqa: E402

from edge_hf.training.synth import write_demo_clips  # noqa: E402


@pytest.fixture(scope="module")
def demo_fall(tmp_path_factory: pytest.TempPathFactory) -> Path:
    clips = {p.stem: p for p in write_demo_clips(tmp_path_factory.mktemp("demo"))}
    return clips["fall_demo"]


# ------------------------------------------------------------------ 7: calibrate --write, full disk


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


# ------------------------------------------------------------------ 9, 10: check refuses what run would


# ------------------------------------------------------------------ 11, 12: slow and blind cameras


# ------------------------------------------------------------------ 13 and smaller ones
