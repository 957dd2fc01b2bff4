"""MQTT alerts against a real Mosquitto on 127.0.0.1: topics, discovery, outages, SIGKILL, auth, TLS."""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import sqlite3
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import jsonschema
import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

import edge_hf
from edge_hf.daemon.config import MqttConfig
from edge_hf.daemon.mqtt import MqttSink
from edge_hf.daemon.outbox import Outbox
from edge_hf.daemon.payload import FallEvent, ModelInfo
from edge_hf.training.synth import write_demo_clips
from tests.broker import Broker, alerts_printed, free_port, make_tls, refusals
from tests.conftest import SHIPPED_MODEL, wait_or_fail

SCHEMA = json.loads((Path(edge_hf.__file__).parent / "event.schema.json").read_text())


class Subscriber:
    """A paho subscriber with a persistent session: it gets what was published while it was away."""

    def __init__(
        self,
        port: int,
        topic: str = "#",
        tls_ca: Path | None = None,
        auth: tuple[str, str] | None = None,
        name: str = "sub",  # two subscribers at once need two names (client ids)
    ) -> None:
        self.messages: list[tuple[str, bytes, bool]] = []
        self.lock = threading.Lock()
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=f"test-{name}-{port}", clean_session=False
        )
        if auth:
            self.client.username_pw_set(*auth)
        if tls_ca:
            self.client.tls_set(ca_certs=str(tls_ca), cert_reqs=ssl.CERT_REQUIRED)
        self.client.on_connect = lambda c, *_: c.subscribe(topic, qos=1)
        self.subscribed = threading.Event()  # the broker acknowledged the subscription
        self.client.on_subscribe = lambda *_: self.subscribed.set()
        self.client.on_message = self._on_message
        self.client.reconnect_delay_set(0.2, 1)
        self.client.connect_async("127.0.0.1", port)
        self.client.loop_start()

    def _on_message(self, _c: Any, _u: Any, msg: mqtt.MQTTMessage) -> None:
        with self.lock:
            self.messages.append((msg.topic, msg.payload, bool(msg.retain)))

    def wait_for(self, predicate: Any, timeout: float = 20.0) -> list[tuple[str, bytes, bool]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                msgs = list(self.messages)
            if predicate(msgs):
                return msgs
            time.sleep(0.1)
        raise AssertionError(f"timed out; got {[(t, p[:60]) for t, p, _ in msgs]}")

    def events(self) -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(p) for t, p, _ in self.messages if t.endswith("/event")]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def _event(i: int, kind: str = "start") -> FallEvent:
    t0 = 1767225600.0  # 2026-01-01T00:00:00Z
    return FallEvent(
        f"00000000-0000-4000-8000-{i:012d}", kind, "hall", "box", t0 + (kind == "end"), t0, 0.9,
        0.9, ModelInfo("m.onnx", 3, 100.0), end_reason="recovered" if kind == "end" else None,
    )  # fmt: skip


def _config_file(
    tmp_path: Path, model: Path, video: Path, port: int, extra_mqtt: str = "", loop: bool = False
) -> Path:
    path = tmp_path / "edge-hf.yaml"
    path.write_text(
        f"device_id: box\nmodel: {{path: {model}, providers: [cpu], threshold: 0.75}}\n"
        f"cameras:\n  - {{name: hall, source: {video}, loop: {str(loop).lower()}}}\n"
        f"mqtt: {{enabled: true, port: {port}{extra_mqtt}}}\nstate_dir: {tmp_path / 'state'}\n"
    )
    return path


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "edge_hf.cli", *args]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {p.stem: p for p in write_demo_clips(tmp_path_factory.mktemp("demo"))}


@pytest.mark.skipif(not SHIPPED_MODEL.exists(), reason="shipped model not built")
def test_replayed_fall_gives_events_states_availability_and_discovery(
    broker: Broker, demo: dict[str, Path], tmp_path: Path
) -> None:
    sub = Subscriber(broker.port)
    assert sub.subscribed.wait(20), "the subscription acknowledged"
    cfg = _config_file(tmp_path, SHIPPED_MODEL, demo["fall_demo"], broker.port)
    t0 = time.monotonic()
    proc = subprocess.run(
        _cli("replay", "--config", str(cfg), "--publish", "--state-dir", str(tmp_path / "r")),
        capture_output=True,
        text=True,
        check=True,
    )
    msgs = sub.wait_for(
        lambda m: (
            sum(t.endswith("/event") for t, _, _ in m) >= 2
            and any(p == b"offline" for _, p, _ in m)
        )
    )
    print(f"replay + delivery: {time.monotonic() - t0:.2f} s")
    sub.close()
    # (#42 item 11: a replay publishes as its own device, never over the live one's state)
    topics = [(t, p.decode(), r) for t, p, r in msgs]
    assert ("edge_hf/box-replay/availability", "online", False) in topics
    assert ("edge_hf/box-replay/hall/status", "online", False) in topics
    falls = [p for t, p, _ in topics if t == "edge_hf/box-replay/hall/fall"]
    changes = [k for k, _ in itertools.groupby(falls)]  # the state is also re-said on connect
    assert changes in (["ON", "OFF"], ["OFF", "ON", "OFF"]), falls
    assert topics[-1][:2] == ("edge_hf/box-replay/availability", "offline")
    events = sub.events()
    assert [e["type"] for e in events] == ["start", "end"]
    assert [json.loads(x) for x in proc.stdout.splitlines()] == events, "stdout and MQTT agree"
    for e in events:
        jsonschema.validate(e, SCHEMA, format_checker=jsonschema.FormatChecker())
    (disc,) = [
        json.loads(p)
        for t, p, _ in topics
        if t == "homeassistant/binary_sensor/box-replay/hall_fall/config"
    ]
    assert (
        disc["device_class"] == "safety" and disc["state_topic"] == "edge_hf/box-replay/hall/fall"
    )
    assert disc["unique_id"] == "edge_hf_box-replay_hall_fall" and disc["device"]["identifiers"]
    assert [a["topic"] for a in disc["availability"]] == ["edge_hf/box-replay/availability"]
    assert (
        disc["json_attributes_topic"] == "edge_hf/box-replay/hall/attributes" and disc["qos"] == 1
    )


def test_discovery_is_resent_when_home_assistant_comes_online(
    broker: Broker, tmp_path: Path
) -> None:
    sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], tmp_path)
    sink.start()
    assert sink.connected.wait(10)
    sub = Subscriber(broker.port, "homeassistant/binary_sensor/box/hall_fall/config")
    # The config, once: the sink announced it on connect (retained; live if we were early) and
    # sends it again only when Home Assistant says online (or on a reconnect): no other copy comes.
    sub.wait_for(lambda m: len(m) >= 1)
    before = len(sub.wait_for(lambda m: True))
    ha = mqtt.Client(CallbackAPIVersion.VERSION2)
    ha.connect("127.0.0.1", broker.port)
    ha.publish("homeassistant/status", "online", qos=1).wait_for_publish(5)
    ha.disconnect()
    msgs = sub.wait_for(lambda m: len(m) > before)
    assert not msgs[before][2], "a fresh (non-retained) copy"
    sub.close()
    sink.close()


def _connected(broker: Broker, tmp_path: Path, topic: str) -> tuple[Subscriber, MqttSink]:
    """A subscriber on `topic`, then a started MQTT sink that has connected."""
    sub = Subscriber(broker.port, topic)
    assert sub.subscribed.wait(20), "the subscription acknowledged"
    sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], tmp_path)
    sink.start()
    assert sink.connected.wait(10)
    return sub, sink


def test_a_burst_of_home_assistant_online_messages_gives_one_rediscovery(
    broker: Broker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sub, sink = _connected(broker, tmp_path, "homeassistant/binary_sensor/#")
    per = sum("/binary_sensor/" in t for t in sink.discovery())  # messages in one announce
    sub.wait_for(lambda m: len(m) >= per)  # the announce on connect (we subscribed before it)
    before = len(sub.messages)
    ha = mqtt.Client(CallbackAPIVersion.VERSION2)
    ha.connect("127.0.0.1", broker.port)
    ha.loop_start()
    with caplog.at_level(logging.INFO, logger="edge_hf.daemon.mqtt"):
        for _ in range(200):
            ha.publish("homeassistant/status", "online", qos=1)
        # Not a fixed sleep. An ack for a camera the sink does not have, sent after the burst by
        # the same client, reaches the sink after every "online" of it: once the sink has logged
        # it, the burst is handled, and once the re-send that the burst started has run, no
        # other can come. Then every message it re-sent arrives.
        ha.publish("edge_hf/box/burst-end/ack", b"", qos=1).wait_for_publish(10)

        def logged(text: str) -> int:
            return sum(text in r.getMessage() for r in caplog.records)

        wait_or_fail(lambda: logged("burst-end") == 1, 30, "the sink to hear the whole burst")
        timer = sink._announce_timer
        wait_or_fail(lambda: timer is not None and not timer.is_alive(), 30, "the re-send")
        resends = logged("re-sending discovery")
        assert resends >= 1, "the burst was answered"
        sub.wait_for(lambda m: len(m) - before >= per * resends)
    ha.loop_stop()
    resent = len(sub.messages) - before
    assert 1 <= resent <= 3, resent
    sink.close()
    sub.close()


def test_broker_down_30s_every_event_arrives_in_order(broker: Broker, tmp_path: Path) -> None:
    sub = Subscriber(broker.port, "edge_hf/+/+/event")
    assert sub.subscribed.wait(20), "the subscription acknowledged"
    sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], tmp_path)
    sink.start()
    assert sink.connected.wait(10)
    n = 0
    for _ in range(3):
        sink.send(_event(n))
        n += 1
    sub.wait_for(lambda m: len(m) >= 3)
    broker.stop()
    t0 = time.monotonic()
    while time.monotonic() - t0 < 30:  # events keep happening during a 30 s outage
        sink.send(_event(n, "start" if n % 2 == 0 else "end"))
        n += 1
        time.sleep(1.5)  # paces the events (one every 1.5 s); decides nothing
    assert len(sink.outbox) >= 20 - 3, "undelivered events wait in the outbox"
    broker.start()
    sub.wait_for(lambda m: len(m) >= n, timeout=40)
    ids = [e["event_id"] for e in sub.events()]
    assert ids == [_event(i).event_id for i in range(n)], "all of them, in order, once each"
    deadline = time.monotonic() + 10
    while len(sink.outbox) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(sink.outbox) == 0, "acked rows leave the outbox"
    sink.close()
    sub.close()


def test_paho_network_thread_ending_is_noticed_and_the_client_rebuilt(
    broker: Broker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sub, sink = _connected(broker, tmp_path, "edge_hf/+/+/event")
    first = sink.client
    with caplog.at_level(logging.ERROR):
        first._thread_terminate = True  # the network thread ends as if it had crashed
        deadline = time.monotonic() + 15
        while sink.client is first and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sink.client is not first, "a new client replaced the dead one"
        assert sink.connected.wait(10)
    assert any("network thread ended" in r.message for r in caplog.records)
    sink.send(_event(9))
    sub.wait_for(lambda m: len(m) >= 1)
    sink.close()
    sub.close()


def test_damaged_state_files_do_not_keep_the_daemon_offline(broker: Broker, tmp_path: Path) -> None:
    # 4 and 6: an outbox row with qos 7 and an announced.json naming "a/#": availability online,
    # the good alert delivered.
    state = tmp_path / "state"
    state.mkdir()
    (state / "announced.json").write_text(json.dumps(["a/#", "fall", 7]))
    box = Outbox(state / "outbox.sqlite3")
    box.add("edge_hf/box/hall/event", _event(1).to_json().encode(), 1)
    box.close()
    db = sqlite3.connect(str(state / "outbox.sqlite3"))
    db.execute(
        "INSERT INTO outbox (topic, payload, qos, retain, created) VALUES ('x', 'y', 7, 0, 0)"
    )
    db.commit()
    db.close()
    sub = Subscriber(broker.port, "edge_hf/#")
    assert sub.subscribed.wait(20), "the subscription acknowledged"
    sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], state)
    sink.start()
    try:
        sub.wait_for(
            lambda m: any(t == "edge_hf/box/availability" and p == b"online" for t, p, _ in m)
        )
        sub.wait_for(lambda m: any(t.endswith("/event") for t, _, _ in m))
        assert [e["event_id"] for e in sub.events()] == [_event(1).event_id]
        # "fall" was a camera of an earlier run: its entities are removed, "a/#" never touched
        topics = [t for t, _, _ in sub.messages]
        assert not any("#" in t for t in topics)
    finally:
        sink.close()
        sub.close()


def _outbox_rows(state: Path) -> int:
    db = state / "outbox.sqlite3"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            return int(con.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


@pytest.mark.skipif(not SHIPPED_MODEL.exists(), reason="shipped model not built")
def test_sigkill_while_broker_down_then_everything_arrives(
    demo: dict[str, Path], tmp_path: Path
) -> None:
    broker = Broker(tmp_path / "broker")  # configured, not running
    cfg = _config_file(tmp_path, SHIPPED_MODEL, demo["fall_demo"], broker.port, loop=True)
    daemon = subprocess.Popen(
        _cli("run", "--config", str(cfg)), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    while _outbox_rows(tmp_path / "state") < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    rows = _outbox_rows(tmp_path / "state")
    daemon.send_signal(signal.SIGKILL)
    out, _ = daemon.communicate(timeout=10)
    printed = [json.loads(x) for x in out.decode().splitlines()]
    assert rows >= 2 and len(printed) >= 1
    broker.start()
    try:
        sub = Subscriber(broker.port, "edge_hf/+/+/event")
        # (subscribed before the daemon connects: on a busy machine 0.5 s was not always enough)
        assert sub.subscribed.wait(20)
        # The next start (the daemon on a scene without a fall) sends what the killed one left.
        # (A replay would not: it never touches the daemon's state_dir nor, unasked, its broker.)
        again = tmp_path / "again"
        again.mkdir()
        cfg2 = _config_file(again, SHIPPED_MODEL, demo["lie_down_demo"], broker.port)
        cfg2.write_text(cfg2.read_text().replace(str(again / "state"), str(tmp_path / "state")))
        subprocess.run(_cli("run", "--config", str(cfg2)), capture_output=True, text=True,
                       check=True, timeout=120)  # fmt: skip
        sub.wait_for(lambda m: len(m) >= len(printed))
        got = [e["event_id"] + e["type"] for e in sub.events()]
        assert got[: len(printed)] == [e["event_id"] + e["type"] for e in printed]
        assert _outbox_rows(tmp_path / "state") == 0
        sub.close()
    finally:
        broker.stop()


def test_wrong_password_is_one_line_and_the_daemon_keeps_retrying(
    tiny_onnx: Path, demo: dict[str, Path], tmp_path: Path
) -> None:
    broker = Broker(tmp_path / "broker", users={"edge": "right"}).start()
    try:
        cfg = _config_file(tmp_path, tiny_onnx, demo["fall_demo"], broker.port,
                           ", username: edge, password_env: EDGE_PW", loop=True)  # fmt: skip
        env = {**os.environ, "EDGE_PW": "wrong"}
        daemon = subprocess.Popen(_cli("run", "--config", str(cfg)), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
        # Not a fixed sleep: until the broker has refused it four times (tries after 1, 2, 4 s).
        wait_or_fail(lambda: refusals(broker) >= 4, 60, "four refused connections")
        assert daemon.poll() is None, "still running"
        daemon.terminate()
        _, err = daemon.communicate(timeout=20)
        assert daemon.returncode == 0
        refused = [line for line in err.splitlines() if "refused the connection" in line]
        assert len(refused) == 1, err
        assert f"127.0.0.1:{broker.port}" in refused[0] and "wrong" not in err
    finally:
        broker.stop()


def test_the_reconnect_backoff_is_capped_well_under_the_keepalive(
    broker: Broker, tmp_path: Path
) -> None:
    sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], tmp_path)
    sink.start()
    assert sink.connected.wait(10)
    broker.stop()
    # The outage itself, not a wait for anything: long enough that an uncapped backoff (1, 2, 4,
    # 8, 16 s…) would next try ~15 s after the broker is back. The reconnect time decides.
    time.sleep(16)
    broker.start()
    t0 = time.monotonic()
    assert sink.connected.wait(15)
    back = time.monotonic() - t0
    sink.close()
    assert back < 6.0, f"reconnected {back:.1f} s after the broker came back"


def test_a_clean_shutdown_logs_no_paho_error(
    broker: Broker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], tmp_path)
    sink.start()
    assert sink.connected.wait(10)
    with caplog.at_level(logging.DEBUG, logger="edge_hf.daemon.paho"):
        sink._closing = True
        sink.client._easy_log(mqtt.MQTT_LOG_ERR, "Client is not connected. Socket: None)")
        sink.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_tls_and_password_listener(tmp_path: Path) -> None:
    ca, cert, key = make_tls(tmp_path / "tls")
    broker = Broker(
        tmp_path / "broker", users={"edge": "s3cret", "watcher": "w"}, tls=(ca, cert, key)
    ).start()
    try:
        (tmp_path / "pw").write_text("s3cret\n")
        cfg = MqttConfig.model_validate({
            "enabled": True, "port": broker.port, "username": "edge",
            "password_file": str(tmp_path / "pw"), "tls": {"ca": str(ca)},
        })  # fmt: skip
        sub = Subscriber(broker.port, "edge_hf/+/+/event", tls_ca=ca, auth=("watcher", "w"))
        assert sub.subscribed.wait(20), "the subscription acknowledged"
        sink = MqttSink(cfg, "box", ["hall"], tmp_path / "state")
        sink.start()
        assert sink.connected.wait(10), sink.last_error
        sink.send(_event(1))
        sub.wait_for(lambda m: len(m) >= 1)
        assert sub.events()[0]["event_id"] == _event(1).event_id
        sink.close()
        sub.close()
    finally:
        broker.stop()


def test_alerts_cli_prints_each_event_once(broker: Broker, tmp_path: Path) -> None:
    proc = subprocess.Popen(_cli("alerts", "--port", str(broker.port)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    # Publish only once it has subscribed (it says so on stderr): a fixed sleep is a race on a
    # loaded machine, where starting Python and connecting can take seconds.
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while "subscribed to" not in proc.stderr.readline():
        assert time.monotonic() < deadline and proc.poll() is None, "alerts never subscribed"
    stdout = proc.stdout
    assert stdout is not None
    printed: list[str] = []  # stdout as it comes (it flushes each line)
    reader = threading.Thread(target=lambda: printed.extend(iter(stdout.readline, "")))
    reader.start()
    pub = mqtt.Client(CallbackAPIVersion.VERSION2)
    pub.connect("127.0.0.1", broker.port)
    pub.loop_start()
    for event in (_event(7), _event(7), _event(7, "end")):  # a duplicate, as at-least-once allows
        pub.publish("edge_hf/box/hall/event", event.to_json(), qos=1).wait_for_publish(5)
    # Not a fixed sleep: the end was sent after the duplicate by the same client at QoS 1, so it
    # is delivered after it; once the end is printed, a printed duplicate would be there too.
    wait_or_fail(lambda: any("fall over" in x for x in printed), 20, "the end to be printed")
    pub.loop_stop()
    proc.terminate()
    proc.wait(10)
    reader.join(10)
    proc.stderr.close()
    out = "".join(printed)
    lines = [line for line in out.splitlines() if "hall" in line]
    assert len(lines) == 2 and "FALL" in lines[0] and "fall over" in lines[1], out
    assert proc.returncode == 0


def test_a_malformed_event_is_said_so_by_edge_hf_alerts(broker: Broker) -> None:
    text = alerts_printed(broker.port, [("edge_hf/box/hall/event", '{"x": 1}'),
                                        ("edge_hf/box/hall/event", _event(7).to_json())])  # fmt: skip
    assert "not an edge_hf event" in text and "None" not in text
    assert _event(7).event_id in text


def test_doctor_reports_each_check_and_fails_on_what_is_broken(
    broker: Broker, tmp_path: Path
) -> None:
    """`edge-hf doctor` on a real broker and camera file: every line ok; a broker that is down
    and a camera that does not open are FAIL lines naming them, and the exit status is 1."""
    demo = write_demo_clips(tmp_path / "demo")[0]
    cmd = [sys.executable, "-c", "import sys; from edge_hf.cli import main; sys.exit(main())"]

    def doctor(port: int, source: Path) -> subprocess.CompletedProcess[str]:
        cfg = tmp_path / f"c{port}.yaml"
        cfg.write_text(
            json.dumps(
                {"device_id": "box", "model": {"path": str(SHIPPED_MODEL)},
                 "cameras": [{"name": "hall", "source": str(source)}],
                 "mqtt": {"host": "127.0.0.1", "port": port},
                 "state_dir": str(tmp_path / "state")}
            )
        )  # fmt: skip
        return subprocess.run(
            [*cmd, "doctor", "--config", str(cfg)], capture_output=True, text=True, timeout=60
        )

    good = doctor(broker.port, demo)
    assert good.returncode == 0, good.stdout + good.stderr
    assert f"  ok  mqtt: 127.0.0.1:{broker.port} accepts anonymous" in good.stdout
    assert "  ok  camera hall:" in good.stdout and "providers: asked tensorrt" in good.stdout
    closed = free_port()
    bad = doctor(closed, tmp_path / "gone.mp4")
    assert bad.returncode == 1
    assert f"FAIL  mqtt: 127.0.0.1:{closed}" in bad.stdout
    assert "FAIL  camera hall:" in bad.stdout and "no such file" in bad.stdout
    assert "Traceback" not in bad.stderr
