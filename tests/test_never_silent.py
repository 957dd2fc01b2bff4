"""Never silent (#42): each way an alert was held up or garbled without a word, reproduced with real
files, a real Mosquitto, a socket that never answers and a real full disk (a small tmpfs)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from edge_hf.daemon.config import MqttConfig
from edge_hf.daemon.lograte import LogRate
from edge_hf.daemon.mqtt import MqttSink
from tests.broker import Broker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "broker").start()
    yield b
    b.stop()


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
