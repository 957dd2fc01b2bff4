"""The alert path under faults (#42, "never silent"): each way an alert was held up or garbled
without a word, reproduced with real files, a real Mosquitto, a socket that never answers and a
real full disk (a small tmpfs)."""

from __future__ import annotations

import json
import logging
import math
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from edge_hf.core.errors import UserError
from edge_hf.daemon.config import MAX_MQTT_STRING, TOPIC_ROOM, MqttConfig, parse_config
from edge_hf.daemon.journal import JournalSink, OpenEvents
from edge_hf.daemon.lograte import LogRate
from edge_hf.daemon.mqtt import MqttSink
from edge_hf.daemon.outbox import Outbox
from edge_hf.daemon.sinks import QuietSink, RecordingSink
from edge_hf.daemon.status import CameraSnapshot, SinkHealth, Snapshot
from edge_hf.training.synth import write_demo_clips
from tests.broker import Broker, alerts_printed, refusals
from tests.conftest import SHIPPED_MODEL, moving_clip, wait_or_fail
from tests.test_mqtt import SCHEMA, Subscriber, _event

EVENT_TOPIC = "edge_hf/box/hall/event"


def _online(msgs: list[tuple[str, bytes, bool]]) -> bool:
    return any(t == "edge_hf/box/availability" and p == b"online" for t, p, _ in msgs)


def _strict(text: str | bytes) -> Any:
    """JSON as the standard has it: NaN and Infinity are not JSON."""

    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


# ------------------------------------------------------------------ 1: one bad row, name or prefix


def test_an_outbox_row_whose_topic_mqtt_cannot_carry_is_dropped_and_later_alerts_go(
    broker: Broker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    box = Outbox(state / "outbox.sqlite3")
    box.add("edge_hf/box/hall/" + "x" * 70_000, b"too long", 1)  # paho: "topic is too long"
    box.add(EVENT_TOPIC, _event(1).to_json().encode(), 1)
    box.close()
    sub = Subscriber(broker.port, "edge_hf/#")
    assert sub.subscribed.wait(20)
    sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], state)
    with caplog.at_level(logging.WARNING):
        sink.start()
        try:
            sub.wait_for(lambda m: any(t.endswith("/event") for t, _, _ in m))
            sink.send(_event(2))
            sub.wait_for(lambda m: sum(t.endswith("/event") for t, _, _ in m) >= 2)
            sub.wait_for(_online)
            assert not sink.health()[0].failed
        finally:
            sink.close()
            sub.close()
    assert [e["event_id"] for e in sub.events()] == [_event(1).event_id, _event(2).event_id]
    dropped = [r.getMessage() for r in caplog.records if "dropping damaged row" in r.getMessage()]
    assert len(dropped) == 1 and len(dropped[0]) < 400, "one short line, not the 70 000 characters"


@pytest.mark.parametrize("key", ["topic_prefix", "discovery_prefix"])
def test_a_topic_prefix_mqtt_cannot_carry_is_one_line_at_check(key: str) -> None:
    text = (
        "device_id: box\nmodel: {path: m.onnx}\ncameras: [{name: hall, source: x.mp4}]\n"
        f"mqtt:\n  {key}: {'p' * 66_000}\n"
    )
    with pytest.raises(UserError) as err:
        parse_config(text, "c.yaml")
    msg = str(err.value)
    assert msg.startswith(f"c.yaml:5: mqtt.{key} = 'ppp") and "66000 characters" in msg, msg
    assert "65535 bytes" in msg and "\n" not in msg and len(msg) < 400


def test_the_longest_topics_the_config_allows_fit_mqtt(tmp_path: Path) -> None:
    name = "n" * 64  # the longest device and camera names
    prefix = "é" * ((MAX_MQTT_STRING - TOPIC_ROOM) // 2)  # two bytes each in UTF-8
    cfg = MqttConfig(enabled=True, topic_prefix=prefix, discovery_prefix=prefix)
    sink = MqttSink(cfg, name, [name], tmp_path, snapshot_cameras=[name])
    leaves = [f"{sink.base}/{name}/{leaf}" for leaf in ("attributes", "snapshot", "status", "ack")]
    topics = [*sink.discovery(), *sink._discovery_topics(name), *leaves]
    assert max(len(t.encode()) for t in topics) <= MAX_MQTT_STRING
    sink.outbox.close()


def test_a_camera_name_mqtt_cannot_carry_in_announced_json_does_not_keep_us_offline(
    broker: Broker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "announced.json").write_text(json.dumps(["x" * 70_000, "porch"]))
    sub = Subscriber(broker.port, "#")
    assert sub.subscribed.wait(20)
    sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], state)
    with caplog.at_level(logging.WARNING):
        sink.start()
        try:
            sub.wait_for(_online)
            # porch was a camera of an earlier run: its entities are removed
            sub.wait_for(lambda m: any("porch_fall/config" in t and p == b"" for t, p, _ in m))
        finally:
            sink.close()
            sub.close()
    assert any("not camera names" in r.getMessage() for r in caplog.records)


def test_the_sender_survives_an_exception_and_says_so(
    broker: Broker,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sub = Subscriber(broker.port, "edge_hf/#")
    assert sub.subscribed.wait(20)
    sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], tmp_path)
    real, calls = sink._publish_states, [0]

    def fails_once() -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("a bug in the sender")
        real()

    monkeypatch.setattr(sink, "_publish_states", fails_once)
    with caplog.at_level(logging.ERROR):
        sink.start()
        try:
            sub.wait_for(_online)  # said by the sender, after the fall states
            sink.send(_event(1))
            sub.wait_for(lambda m: any(t.endswith("/event") for t, _, _ in m))
            assert not sink.health()[0].failed
        finally:
            sink.close()
            sub.close()
    assert sum("a bug in the sender" in r.getMessage() for r in caplog.records) == 1


def test_a_sender_that_keeps_failing_marks_the_sink_failed(
    broker: Broker,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], tmp_path)

    def always() -> None:
        raise RuntimeError("a bug in the sender")

    monkeypatch.setattr(sink, "_publish_states", always)
    with caplog.at_level(logging.ERROR):
        sink.start()
        deadline = time.monotonic() + 30
        while not sink.health()[0].failed and time.monotonic() < deadline:
            time.sleep(0.2)
        failed = sink.health()[0].failed
        sink.close()
    assert "a bug in the sender" in failed
    assert [r for r in caplog.records if r.levelno == logging.CRITICAL]


class _FailedSink(QuietSink):
    """An alert sink whose sender gave up (what `MqttSink.health` then says)."""

    def health(self) -> list[SinkHealth]:
        return [SinkHealth("mqtt", True, 0, 0, failed="the sender failed 5 times in a row")]


def test_a_failed_alert_sink_stops_the_daemon_with_an_error(tmp_path: Path) -> None:
    from edge_hf.daemon.app import build_pipeline
    from edge_hf.daemon.config import Config

    cfg = Config.model_validate({
        "device_id": "box", "model": {"path": str(SHIPPED_MODEL), "providers": ["cpu"]},
        "cameras": [{"name": "hall", "source": str(moving_clip()), "loop": True}],
        "state_dir": str(tmp_path / "state"),
    })  # fmt: skip
    pipeline = build_pipeline(cfg, _FailedSink(), score_history=None)
    pipeline.start()
    raised: list[BaseException] = []

    def run() -> None:
        try:
            pipeline.run(drain_s=1.0)
        except BaseException as exc:
            raised.append(exc)

    th = threading.Thread(target=run)
    th.start()
    th.join(30)
    if th.is_alive():
        pipeline.stop.set()
        th.join(20)
        pytest.fail("the daemon ran on with a dead alert sink")
    assert raised and "the sender failed" in str(raised[0])


# ------------------------------------------------------------------ 2: a full disk at start-up


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs with 64 inodes, mode 0700: a disk that really fills, space or inodes.
    Mounting needs root; elsewhere the tests are skipped (a faked "full" would not fail the way
    SQLite's side files and the state_dir probe fail on a real one)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    opts = "size=1m,nr_inodes=64,mode=0700"
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(disk)],
                          capture_output=True, text=True)  # fmt: skip
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (root only): {proc.stderr.strip()}")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk: Path, what: str) -> None:
    """Use up the disk's space (one growing file) or its inodes (empty files)."""
    filler = disk / "filler"
    filler.mkdir()
    if what == "inodes":
        for i in range(10_000):
            try:
                (filler / f"{i}").touch()
            except OSError:
                return
        raise AssertionError("the inodes never ran out")
    with (filler / "space").open("wb", buffering=0) as fh:
        for chunk in (65536, 4096, 512, 1):
            try:
                while True:
                    fh.write(b"\0" * chunk)
            except OSError:
                pass


def _free(disk: Path) -> None:
    for p in (disk / "filler").iterdir():
        p.unlink()


def _waiting(path: Path, n: int = 4) -> None:
    """An outbox that an earlier run closed with `n` alerts waiting."""
    box = Outbox(path)
    for i in range(n):
        box.add(EVENT_TOPIC, _event(i).to_json().encode(), 1)
    box.close()


@pytest.mark.parametrize("full", ["space", "inodes"])
def test_an_outbox_on_a_full_disk_is_read_not_moved_aside(
    small_disk: Path, full: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = small_disk / "outbox.sqlite3"
    _waiting(path)
    _fill(small_disk, full)
    with caplog.at_level(logging.WARNING):
        box = Outbox(path)
    assert not list(small_disk.glob("*.corrupt-*")), "a full disk is not corruption"
    assert box.degraded and len(box) == 4
    waiting = box.pending()
    assert [p for _, _, p, _, _ in waiting] == [_event(i).to_json().encode() for i in range(4)]
    box.remove(waiting[0][0])  # the broker acked the oldest
    new = box.add(EVENT_TOPIC, b"new", 1)
    assert new < 0 and len(box) == 4 and box.pending()[-1][2] == b"new", "held in memory"
    assert sum("cannot write" in r.getMessage() for r in caplog.records) == 1
    _free(small_disk)
    box.add(EVENT_TOPIC, b"newer", 1)  # the disk takes writes again: everything goes back
    assert not box.degraded and all(r[0] > 0 for r in box.pending())
    box.close()
    again = Outbox(path)
    assert [p for _, _, p, _, _ in again.pending()][-2:] == [b"new", b"newer"]
    assert len(again) == 5, "the acked one left the file, the others are on disk"
    again.close()


@pytest.fixture(scope="module")
def fall_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return next(p for p in write_demo_clips(tmp_path_factory.mktemp("demo"))
                if p.stem == "fall_demo")  # fmt: skip


@pytest.mark.skipif(not SHIPPED_MODEL.exists(), reason="shipped model not built")
@pytest.mark.parametrize("full", ["space", "inodes"])
def test_a_full_disk_at_start_up_sends_what_waits_and_keeps_watching(
    broker: Broker, small_disk: Path, full: str, tmp_path: Path, fall_clip: Path
) -> None:
    _waiting(small_disk / "outbox.sqlite3")
    _fill(small_disk, full)
    cfg = tmp_path / "edge-hf.yaml"
    cfg.write_text(
        f"device_id: box\nmodel: {{path: {SHIPPED_MODEL}, providers: [cpu], threshold: 0.75}}\n"
        f"cameras:\n  - {{name: hall, source: {fall_clip}, loop: true}}\n"
        f"mqtt: {{enabled: true, port: {broker.port}}}\nstate_dir: {small_disk}\n"
        "stats_interval_s: 1\n"
    )
    sub = Subscriber(broker.port, "edge_hf/#")
    assert sub.subscribed.wait(20)
    daemon = subprocess.Popen([sys.executable, "-m", "edge_hf.cli", "run", "--config", str(cfg)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip

    def degraded(msgs: list[tuple[str, bytes, bool]]) -> bool:
        stats = [json.loads(p) for t, p, _ in msgs if t == "edge_hf/box/stats"]
        return any(s.get("outbox_degraded") is True for s in stats)

    def new_fall(msgs: list[tuple[str, bytes, bool]]) -> bool:
        old = {_event(i).event_id for i in range(4)}
        return any(e["event_id"] not in old for e in sub.events())

    try:
        for done in (lambda m: sum(t.endswith("/event") for t, _, _ in m) >= 4, degraded, new_fall):
            deadline = time.monotonic() + 90
            while not done(list(sub.messages)):
                assert daemon.poll() is None, f"the daemon exited: {daemon.communicate()[1]}"
                assert time.monotonic() < deadline, [t for t, _, _ in sub.messages]
                time.sleep(0.2)
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=60)
        sub.close()
    assert daemon.returncode == 0, err
    assert [e["event_id"] for e in sub.events()[:4]] == [_event(i).event_id for i in range(4)]
    assert not list(small_disk.glob("*.corrupt-*")) and "Traceback" not in err


# ------------------------------------------------------------------ 10: CONNECT never answered


def test_a_broker_that_never_answers_connect_is_said_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.2)
    stop, held = threading.Event(), []

    def swallow() -> None:  # accepts TCP, reads CONNECT, never answers
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                held.append(conn)
            except OSError:
                continue

    th = threading.Thread(target=swallow, daemon=True)
    th.start()
    port = server.getsockname()[1]
    sink = MqttSink(MqttConfig(enabled=True, port=port), "box", ["hall"], tmp_path)
    try:
        with caplog.at_level(logging.ERROR):
            sink.start()
            deadline = time.monotonic() + 20
            while not sink.health()[0].connect_timeouts and time.monotonic() < deadline:
                time.sleep(0.2)
            snap = Snapshot((), 0, 0, (), (), (), tuple(sink.health()))
    finally:
        sink.close(timeout_s=0.5)
        stop.set()
        th.join(5)
        for conn in held:
            conn.close()
        server.close()
    assert held, "the client did connect"
    lines = [r.getMessage() for r in caplog.records if "did not answer" in r.getMessage()]
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0], lines
    assert snap.stats_payload()["mqtt_connect_timeouts"] >= 1


# ------------------------------------------------------------------ 12: journal keys, numbers


GOOD = {"event_id": "e1", "camera": "hall", "device_id": "box", "started_at": 1767225600.0,
        "peak_score": 0.9, "score": 0.9,
        "model": {"name": "m.onnx", "window": 3, "interval_ms": 100.0}}  # fmt: skip


def test_a_journal_entry_filed_under_another_key_ends_once_not_at_every_start(
    tmp_path: Path,
) -> None:
    path = tmp_path / "open-events.json"
    path.write_text(json.dumps({"not-its-event-id": GOOD}))
    first = RecordingSink()
    JournalSink(first, OpenEvents(path)).start()
    assert [(e.event_id, e.type) for e in first.events] == [("e1", "start"), ("e1", "end")]
    again = RecordingSink()
    JournalSink(again, OpenEvents(path)).start()
    assert list(again.events) == [], "ended once: not re-sent at the next start"


@pytest.mark.parametrize(
    "bad",
    [{"score": math.nan}, {"score": math.inf}, {"peak_score": -math.inf},
     {"model": {"name": "m.onnx", "window": 3, "interval_ms": math.inf}},
     {"model": {"name": "m.onnx", "window": 0, "interval_ms": 100.0}}],
    ids=["score-nan", "score-inf", "peak-minus-inf", "interval-inf", "window-0"],
)  # fmt: skip
def test_a_journal_entry_with_a_number_no_event_can_have_is_skipped(
    tmp_path: Path, bad: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "open-events.json"
    path.write_text(json.dumps({"x": {**GOOD, "event_id": "x", **bad}, "e1": GOOD}))  # NaN...
    inner = RecordingSink()
    with caplog.at_level(logging.WARNING):
        JournalSink(inner, OpenEvents(path)).start()
    assert [(e.event_id, e.type) for e in inner.events] == [("e1", "start"), ("e1", "end")]
    assert any("skipping an unreadable open event" in r.getMessage() for r in caplog.records)
    for e in inner.events:
        jsonschema.validate(_strict(e.to_json()), SCHEMA)


def test_every_payload_is_strict_json_whatever_the_numbers(broker: Broker, tmp_path: Path) -> None:
    sub = Subscriber(broker.port, "edge_hf/#")
    assert sub.subscribed.wait(20)
    sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], tmp_path)
    sink.start()
    try:
        assert sink.connected.wait(10)
        odd = replace(_event(1), score=math.nan, peak_score=math.inf)  # a model that said NaN
        sink.send(odd)
        cam = CameraSnapshot("hall", "online", 1, 0, 0, 1, 0, 0, math.nan, 1, 0)
        sink.stats(Snapshot((cam,), 1, 1, (math.inf,), (), ("cpu",), tuple(sink.health())))
        sub.wait_for(
            lambda m: {"event", "attributes", "stats"} <= {t.split("/")[-1] for t, _, _ in m}
        )
    finally:
        sink.close()
        sub.close()
    for topic, payload, _ in sub.messages:
        if topic.split("/")[-1] in ("event", "attributes", "stats") or "config" in topic:
            _strict(payload)  # raises on NaN / Infinity
    for event in sub.events():
        jsonschema.validate(event, SCHEMA)


# ------------------------------------------------------------------ 19: repeated log lines


def test_twenty_thousand_acks_for_a_ghost_camera_are_a_few_lines(
    broker: Broker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], tmp_path)
    acked = threading.Event()
    sink.listen(lambda camera, command: acked.set())
    pub = mqtt.Client(CallbackAPIVersion.VERSION2)
    with caplog.at_level(logging.WARNING, logger="edge_hf.daemon.mqtt"):
        sink.start()
        assert sink.connected.wait(10)
        pub.connect("127.0.0.1", broker.port)
        pub.loop_start()
        # Not a fixed sleep: the sink subscribes in on_connect; until it says so, a ghost ack is
        # lost. One it has logged says it is subscribed (it counts with the flood's).
        deadline = time.monotonic() + 20
        while not any("unknown camera" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, "waited 20 s for the sink to subscribe"
            pub.publish("edge_hf/box/ghost/ack", b"ACK", qos=1).wait_for_publish(5)
            time.sleep(0.2)  # paces the probes
        for _ in range(20_000):
            pub.publish("edge_hf/box/ghost/ack", b"ACK", qos=0)
        pub.publish("edge_hf/box/hall/ack", b"ACK", qos=1).wait_for_publish(30)
        assert acked.wait(60), "the real camera's ack came through after the flood"
        pub.loop_stop()
        sink.close()
    lines = [r for r in caplog.records if "unknown camera" in r.getMessage()]
    assert 1 <= len(lines) <= 5, len(lines)


def test_paho_repeating_itself_while_the_broker_refuses_is_rate_limited(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = Broker(tmp_path / "broker", users={"edge": "right"}).start()
    monkeypatch.setenv("EDGE_PW", "wrong")
    cfg = MqttConfig(enabled=True, port=broker.port, username="edge", password_env="EDGE_PW")
    sink = MqttSink(cfg, "box", ["hall"], tmp_path / "state")
    try:
        with caplog.at_level(logging.WARNING):
            sink.start()
            # Not a fixed sleep: until the broker refused it four times (tries after 1, 2, 4 s).
            wait_or_fail(lambda: refusals(broker) >= 4, 60, "four refused connections")
            for _ in range(10):  # and paho's own line, as its loop logs it
                sink.client._easy_log(mqtt.MQTT_LOG_ERR, "Client is not connected. Socket: None")
    finally:
        sink.close(timeout_s=0.5)
        broker.stop()
    paho = [r.getMessage() for r in caplog.records if r.name == "edge_hf.daemon.paho"]
    assert len([m for m in paho if "Client is not connected" in m]) == 1, paho
    assert sum("refused the connection" in r.getMessage() for r in caplog.records) == 1


def test_a_repeated_line_is_held_back_and_counted() -> None:
    now = [0.0]
    rate = LogRate(every_s=60.0, burst=2, clock=lambda: now[0])
    assert [rate.allow("a") for _ in range(5)] == [0, 0, None, None, None]
    assert rate.allow("b") == 0, "another line has its own count"
    now[0] = 61.0
    assert rate.allow("a") == 3, "the next line says how many were held back"


# ------------------------------------------------------------------ 20: terminal escapes


def test_edge_hf_alerts_shows_control_characters_escaped(broker: Broker) -> None:
    evil = replace(_event(7), camera="hall\x1b[2J\x1b]0;owned\x07")
    text = alerts_printed(broker.port, [("edge_hf/box/hall/event", evil.to_json()),
                                        ("edge_hf/box/hall/event", "\x1b[31mnot json"),
                                        ("edge_hf/box/hall/status", "online\x1b[8m\u202e")])  # fmt: skip
    assert not any(ch in text for ch in "\x1b\x07\u202e"), repr(text)
    assert text.count("\\x1b") >= 4 and "\\u202e" in text and evil.event_id in text
