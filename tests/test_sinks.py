"""The alert path behind the inference loop: one alert thread, in order, nothing dropped; the
snapshot encoded once and carried on the event (#42 item 7), and the alert sent without it when
it cannot be written; the open-events journal read back whole or skipped where damaged."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest

from edge_hf.daemon.journal import JournalSink, OpenEvents
from edge_hf.daemon.payload import Evidence, FallEvent, ModelInfo
from edge_hf.daemon.sinks import AlertThread, ClipNotice, QuietSink, RecordingSink, TeeSink
from edge_hf.daemon.snapshots import Retention, SnapshotSink
from edge_hf.daemon.status import SinkHealth, Snapshot
from tests.conftest import fall_detector


class SlowDisk(RecordingSink):
    """Stands for sinks on an SD card that takes `delay_s` to persist each event."""

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s

    def send(self, event: FallEvent) -> None:
        time.sleep(self.delay_s)  # the slow disk itself; decides nothing
        super().send(event)


def _event(i: int, kind: str = "start", picture: np.ndarray | None = None) -> FallEvent:
    return FallEvent(
        f"00000000-0000-4000-8000-{i:012d}", kind, "hall", "box", 100.0 + i, 100.0 + i, 0.9,
        0.9, ModelInfo("m.onnx", 3, 100.0),
        evidence=Evidence(picture, None) if picture is not None else None,
    )  # fmt: skip


class CallLog(QuietSink):
    """Writes every call it gets, with its arguments, to a log shared with the other sinks."""

    def __init__(self, name: str, log: list[tuple[str, str, tuple[object, ...]]]) -> None:
        self.name, self.log = name, log

    def start(self) -> None:
        self.log.append((self.name, "start", ()))

    def send(self, event: FallEvent) -> None:
        self.log.append((self.name, "send", (event,)))

    def camera_status(self, camera: str, status: str) -> None:
        self.log.append((self.name, "camera_status", (camera, status)))

    def stats(self, snapshot: Snapshot) -> None:
        self.log.append((self.name, "stats", (snapshot,)))

    def health(self) -> list[SinkHealth]:
        return [SinkHealth(self.name, True, 0, 0)]

    def listen(self, handler: Callable[[str, str], None]) -> None:
        self.log.append((self.name, "listen", (handler,)))

    def close(self) -> None:
        self.log.append((self.name, "close", ()))

    def restore(self, event: FallEvent) -> None:
        self.log.append((self.name, "restore", (event,)))

    def clip(self, notice: ClipNotice) -> None:
        self.log.append((self.name, "clip", (notice,)))


def test_a_tee_passes_every_call_to_each_sink_in_order_and_joins_their_health() -> None:
    log: list[tuple[str, str, tuple[object, ...]]] = []
    tee = TeeSink(CallLog("a", log), CallLog("b", log))
    event, snapshot = _event(1), object()
    notice = ClipNotice(event.event_id, "hall", "box", "c.mp4", "skeleton", 100.0, -2.0, 3.0, 50,
                        10.0, 1000)  # fmt: skip

    def handler(camera: str, command: str) -> None:
        return None

    calls: list[tuple[str, tuple[object, ...]]] = [
        ("start", ()), ("send", (event,)), ("camera_status", ("hall", "online")),
        ("stats", (snapshot,)), ("listen", (handler,)), ("restore", (event,)),
        ("clip", (notice,)), ("close", ()),
    ]  # fmt: skip
    for name, args in calls:
        getattr(tee, name)(*args)
    assert log == [(sink, name, args) for name, args in calls for sink in ("a", "b")]
    assert [h.name for h in tee.health()] == ["a", "b"]


def test_the_inference_loop_never_waits_for_the_sinks_and_nothing_is_dropped() -> None:
    """Before, every alert was written (JPEG, fsync, SQLite commit) on the inference loop's own
    thread: 20 events on a disk that takes 0.2 s each held every camera for 4 s."""
    disk = SlowDisk(0.2)
    sink = AlertThread(disk, drain_s=10.0)
    sink.start()
    t0 = time.monotonic()
    for i in range(20):
        sink.send(_event(i))
    handed_over = time.monotonic() - t0
    sink.close()
    assert handed_over < 0.5, f"the loop waited {handed_over:.2f} s"
    assert [e.event_id for e in disk.events] == [_event(i).event_id for i in range(20)]


def test_the_picture_is_copied_when_queued_the_ring_may_reuse_its_slot(tmp_path: Path) -> None:
    picture = np.full((48, 64, 3), 200, np.uint8)
    disk = SlowDisk(0.3)
    snaps = SnapshotSink(disk, tmp_path, {"hall": Retention(10, 10_000_000)})
    sink = AlertThread(snaps)
    sink.start()
    sink.send(_event(1, picture=picture))
    picture[:] = 0  # the ring writes the next frame into the same slot
    sink.close()
    saved = cv2.imread(str(tmp_path / f"{_event(1).event_id}.jpg"))
    assert saved is not None and saved.mean() > 150


def test_the_snapshot_is_encoded_once_and_travels_on_the_event(tmp_path: Path) -> None:
    """The MQTT sink publishes the event's own JPEG bytes (before, it read the file back)."""
    rng = np.random.default_rng(0)
    picture = rng.integers(0, 255, (120, 160, 3), np.uint8)
    out = RecordingSink()
    SnapshotSink(out, tmp_path, {"hall": Retention(10, 10_000_000)}).send(
        _event(2, picture=picture)
    )
    (start,) = out.events
    assert start.snapshot is not None and start.jpeg is not None
    assert Path(start.snapshot).read_bytes() == start.jpeg
    assert "jpeg" not in start.as_dict() and start.evidence is None


def test_the_journal_is_written_first_on_the_alert_thread(tmp_path: Path) -> None:
    """A start is in the journal before the (slow) sinks after it have it."""
    journal = OpenEvents(tmp_path / "open-events.json")
    disk = SlowDisk(0.5)
    sink = AlertThread(JournalSink(disk, journal))
    sink.start()
    sink.send(_event(3))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not (tmp_path / "open-events.json").exists():
        time.sleep(0.01)
    assert (tmp_path / "open-events.json").exists() and not disk.events
    sink.close()
    assert [e.event_id for e in disk.events] == [_event(3).event_id]


def test_a_start_is_journaled_before_it_is_queued(tmp_path: Path) -> None:
    """A start waiting behind slow sinks when the process dies is in the journal (the next start
    sends it): AlertThread journals it on the caller's thread before queueing."""
    journal = OpenEvents(tmp_path / "open-events.json")
    disk = SlowDisk(1.0)
    sink = AlertThread(JournalSink(disk, journal), journal=journal)
    sink.start()
    sink.send(_event(4))
    sink.send(_event(5))
    assert _event(5).event_id in (tmp_path / "open-events.json").read_text()  # at once
    assert not disk.events
    sink.close()
    assert [e.event_id for e in disk.events] == [_event(4).event_id, _event(5).event_id]


# ------------------------------------------------------------------ a snapshot that cannot be written


def _snapshot_sink(tmp_path: Path) -> tuple[SnapshotSink, RecordingSink]:
    inner = RecordingSink()
    return SnapshotSink(inner, tmp_path / "snapshots", {"hall": Retention(10, 10**9)}), inner


def test_an_alert_goes_out_without_its_snapshot_when_the_folder_cannot_be_made(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "snapshots").write_text("a file where the snapshot folder should be")
    d = fall_detector(snapshot=True)
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
    d = fall_detector(snapshot=True)
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
    plain = fall_detector()  # snapshots off: no picture travels
    assert all(e.evidence is None for i in range(3) for e in plain.update(0.9, 1 + 0.1 * i, frame))


# ------------------------------------------------------------------ a damaged journal


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
