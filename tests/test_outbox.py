"""The MQTT outbox (edge_hf/daemon/outbox.py) and the queue behind the sink: a full disk, a
corrupt or damaged file, a long outage; every alert arrives once, in order."""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

import pytest

from edge_hf.daemon.config import MqttConfig
from edge_hf.daemon.mqtt import HAND_OVER, MqttSink
from edge_hf.daemon.outbox import Outbox
from tests.broker import Broker
from tests.test_mqtt import Subscriber, _event


def test_a_full_outbox_keeps_alerts_in_memory_then_writes_them_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    box = Outbox(tmp_path / "o.sqlite3", max_bytes=40_000)
    payload = b"x" * 2000
    ids = []
    with caplog.at_level(logging.ERROR, logger="edge_hf.daemon.outbox"):
        for i in range(60):  # ~120 kB into a 40 kB file: the disk "fills"
            ids.append(box.add(f"t/{i}", payload, 1))
    held = [i for i in ids if i < 0]
    assert held and box.degraded, "the disk refused some: they are held, not lost"
    assert len(box) == 60 and [r[1] for r in box.pending()] == [f"t/{i}" for i in range(60)]
    assert sum("cannot write" in r.message for r in caplog.records) == 1, "logged once"
    box.remove(held[0])  # an ack for a held message
    assert len(box) == 59
    box.set_max_bytes(10_000_000)  # space returns
    box.add("t/60", payload, 1)
    assert not box.degraded and all(r[0] > 0 for r in box.pending()), "all on disk again"
    assert [r[1] for r in box.pending()][-2:] == ["t/59", "t/60"], "order kept"
    box.remove(held[1])  # an ack naming the memory id of a message now on disk
    assert len(box) == 59
    box.close()
    assert len(Outbox(tmp_path / "o.sqlite3")) == 59, "on disk: survives a restart"


def test_a_corrupt_outbox_is_moved_aside_and_a_new_one_started(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "outbox.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with caplog.at_level(logging.WARNING):
        box = Outbox(path)
    assert box.add("t", b"p", 1) > 0 and len(box) == 1
    aside = list(tmp_path.glob("outbox.sqlite3.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"this is not")
    assert any("moved aside" in r.message for r in caplog.records)
    with pytest.raises(sqlite3.DatabaseError):
        sqlite3.connect(str(aside[0])).execute("SELECT * FROM outbox")


def test_dropped_alerts_are_reported_once_a_minute_not_once_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    box = Outbox(tmp_path / "o.sqlite3", max_rows=10)
    with caplog.at_level(logging.ERROR, logger="edge_hf.daemon.outbox"):
        for i in range(100):
            box.add("t", f"{i}".encode(), 1)
    assert box.dropped == 90 and len(box) == 10
    lines = [r.message for r in caplog.records if "dropped" in r.message]
    assert len(lines) == 1, lines
    assert [p for _, _, p, _, _ in box.pending()] == [f"{i}".encode() for i in range(90, 100)]
    box.close()


def test_damaged_outbox_rows_are_dropped_not_sent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "outbox.sqlite3"
    box = Outbox(path)
    box.add("edge_hf/box/hall/event", b"first", 1)
    db = sqlite3.connect(str(path))
    rows = [("edge_hf/box/hall/event", b"qos7", 7, 0), ("a/#", b"wild", 1, 0),
            ("", b"empty", 1, 0), ("edge_hf/box/hall/event", b"retain5", 1, 5)]  # fmt: skip
    db.executemany(
        "INSERT INTO outbox (topic, payload, qos, retain, created) VALUES (?, ?, ?, ?, 0)", rows
    )
    db.commit()
    db.close()
    box.add("edge_hf/box/hall/event", b"last", 1)
    with caplog.at_level(logging.ERROR):
        pending = box.pending()
    assert [p[2] for p in pending] == [b"first", b"last"]
    assert len(box) == 2, "the damaged rows are deleted"
    assert sum("dropping damaged row" in r.message for r in caplog.records) == 4


# ------------------------------------------------------------------ behind the MQTT sink, a real broker


def test_broker_down_and_disk_full_every_alert_still_arrives_once(
    broker: Broker, tmp_path: Path
) -> None:
    sub = Subscriber(broker.port, "edge_hf/+/+/event")
    assert sub.subscribed.wait(20), "the subscription acknowledged"
    cfg = MqttConfig(enabled=True, port=broker.port, outbox_max_mb=0.04)
    sink = MqttSink(cfg, "box", ["hall"], tmp_path / "state")
    sink.start()
    assert sink.connected.wait(10)
    broker.stop()
    n = 150  # far more than 40 kB of outbox holds
    for i in range(n):
        sink.send(_event(i))
    assert sink.outbox.degraded and len(sink.outbox) == n + 1, "150 events + the fall state ON"
    assert sink.health()[0].degraded
    broker.start()
    sub.wait_for(lambda m: len({e for t, e, _ in m}) >= n, timeout=40)
    ids = [e["event_id"] for e in sub.events()]
    assert list(dict.fromkeys(ids)) == [_event(i).event_id for i in range(n)], "all, in order"
    sink.close()
    sub.close()


def test_a_corrupt_outbox_does_not_stop_the_sink(broker: Broker, tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "outbox.sqlite3").write_bytes(b"\x00garbage" * 500)
    sub = Subscriber(broker.port, "edge_hf/+/+/event")
    assert sub.subscribed.wait(20), "the subscription acknowledged"
    sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], tmp_path / "state")
    sink.start()
    sink.send(_event(3))
    sub.wait_for(lambda m: len(m) >= 1)
    assert sub.events()[0]["event_id"] == _event(3).event_id
    sink.close()
    sub.close()


def test_a_long_outage_costs_disk_not_memory_and_keeps_order(
    broker: Broker, tmp_path: Path
) -> None:
    sub = Subscriber(broker.port, "edge_hf/+/+/event")
    assert sub.subscribed.wait(20), "the subscription acknowledged"
    sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], tmp_path / "s")
    sink.start()
    assert sink.connected.wait(10)
    broker.stop()
    n = 1000  # start, end, start, end...: the fall state flips 1000 times while offline
    events = [_event(i, "start" if i % 2 == 0 else "end") for i in range(n - 1)]
    for i, e in enumerate(events):
        sink.send(e)
        sink.camera_status("hall", "stalled" if i % 2 else "online")
    queued = [m.topic for m in sink.client._out_messages.values()]  # paho's in-memory queue
    held = [t for t in queued if t.endswith("/event")]
    assert len(held) <= HAND_OVER, f"paho holds {len(held)} events; the rest wait on disk"
    assert len(queued) <= HAND_OVER + 10, "camera states are not queued while offline"
    assert len(sink.outbox) == 2 * len(events), "every event and every ON/OFF waits on disk"
    broker.start()
    sub.wait_for(lambda m: len({e for _, e, _ in m}) >= len(events), timeout=60)
    ids = [e["event_id"] for e in sub.events()]
    assert list(dict.fromkeys(ids)) == [e.event_id for e in events], "all, in order"
    deadline = time.monotonic() + 20
    while len(sink.outbox) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(sink.outbox) == 0
    late = Subscriber(broker.port, "edge_hf/box/hall/fall", name="late")  # reads the retained one
    got = late.wait_for(lambda m: len(m) >= 1)
    assert got[-1][1] == b"ON", "the last change (a start) wins: no older OFF overtook it"
    late.close()
    sink.close()
    sub.close()
