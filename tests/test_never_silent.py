"""Never silent (#42): each way an alert was held up or garbled without a word, reproduced with real
files, a real Mosquitto, a socket that never answers and a real full disk (a small tmpfs)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from edge_hf.core.errors import UserError
from edge_hf.daemon.config import MAX_MQTT_STRING, TOPIC_ROOM, MqttConfig, parse_config
from edge_hf.daemon.lograte import LogRate
from edge_hf.daemon.mqtt import MqttSink
from edge_hf.daemon.outbox import Outbox
from edge_hf.daemon.sinks import QuietSink
from edge_hf.daemon.status import SinkHealth
from tests.broker import Broker
from tests.conftest import SHIPPED_MODEL, moving_clip
from tests.test_mqtt import Subscriber, _event

EVENT_TOPIC = "edge_hf/box/hall/event"


def _online(msgs: list[tuple[str, bytes, bool]]) -> bool:
    return any(t == "edge_hf/box/availability" and p == b"online" for t, p, _ in msgs)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "broker").start()
    yield b
    b.stop()


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
        time.sleep(0.5)  # subscribed (in on_connect)
        pub.connect("127.0.0.1", broker.port)
        pub.loop_start()
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
            time.sleep(10)  # reconnects after 1, 2, 4, 4 s: refused each time
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
