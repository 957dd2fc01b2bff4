"""Alerts a carer can trust (#14), against a real Mosquitto: the broker's fall state is true after
a kill -9, a latched fall stays on until acknowledged, discovery matches Home Assistant's documented
keys, and cameras that left the config disappear."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import cv2
import jsonschema
import numpy as np
import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from edge_hf.daemon.app import build_pipeline, with_snapshots
from edge_hf.daemon.config import Config, MqttConfig
from edge_hf.daemon.journal import JournalSink, OpenEvents
from edge_hf.daemon.mqtt import MqttSink
from edge_hf.daemon.payload import FallEvent
from edge_hf.daemon.replay import replay_files
from edge_hf.daemon.sinks import RecordingSink
from edge_hf.training.synth import write_demo_clips
from tests.broker import Broker
from tests.conftest import SHIPPED_MODEL, wait_or_fail
from tests.test_daemon import DEMO_THRESHOLD
from tests.test_mqtt import SCHEMA, Subscriber

needs_shipped = pytest.mark.skipif(not SHIPPED_MODEL.exists(), reason="shipped model not built")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {p.stem: p for p in write_demo_clips(tmp_path_factory.mktemp("demo"))}


def _config(tmp_path: Path, video: Path, port: int | None, loop: bool, **detection: Any) -> Path:
    path = tmp_path / f"c-{video.stem}-{loop}.yaml"
    doc = {
        "device_id": "box",
        "model": {"path": str(SHIPPED_MODEL), "providers": ["cpu"], "threshold": DEMO_THRESHOLD},
        "cameras": [{"name": "hall", "source": str(video), "loop": loop}],
        "state_dir": str(tmp_path / "state"),
        "detection": detection,
    }
    if port is not None:
        doc["mqtt"] = {"enabled": True, "port": port}
    if detection.get("snapshot"):
        doc["snapshots"] = {"mode": "image"}  # the camera's picture (the default: skeletons, #43)
    path.write_text(json.dumps(doc))  # JSON is YAML
    return path


def _run(config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "edge_hf.cli", "run", "--config", str(config)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _retained(port: int, topic: str) -> bytes | None:
    """The broker's retained message on `topic` (None: nothing retained)."""
    # Not a fixed sleep: after subscribing, the client publishes a sentinel to itself on the same
    # connection. The broker sends a retained message when it handles the subscription, before it
    # handles that later publish: once the sentinel is back, a retained message would be too.
    sentinel = f"edge_hf-test/sentinel/{port}"
    got: list[bytes] = []
    back = threading.Event()

    def on_message(_c: Any, _u: Any, m: mqtt.MQTTMessage) -> None:
        if m.topic == sentinel:
            back.set()
        elif m.retain:
            got.append(m.payload)

    c = mqtt.Client(CallbackAPIVersion.VERSION2)
    c.on_connect = lambda cl, *_: cl.subscribe([(topic, 1), (sentinel, 1)])
    c.on_subscribe = lambda cl, *_: cl.publish(sentinel, b"sentinel", qos=1)
    c.on_message = on_message
    c.connect("127.0.0.1", port)
    c.loop_start()
    assert back.wait(20), f"waited 20 s for the sentinel after subscribing to {topic}"
    c.loop_stop()
    c.disconnect()
    return got[-1] if got else None


@needs_shipped
def test_a_latched_fall_survives_sigterm_and_kill_9_until_acknowledged(
    broker: Broker, demo: dict[str, Path], tmp_path: Path
) -> None:
    """#42 item 8. Before: SIGTERM ended a latched fall (`shutdown`, HA OFF, journal emptied),
    and after a kill -9 the restart sent the old `start` again, then its end: the fall sensor
    went off -> on -> off and every automation fired again for an old fall. Now the latch holds
    across both until acknowledged: the fall topic says ON once, never OFF in between, and the
    event is sent once; the acknowledgement ends it, and the next fall is an off -> on change."""
    sub = Subscriber(broker.port, "edge_hf/box/hall/#")
    assert sub.subscribed.wait(20), "the subscription acknowledged"
    first = _run(_config(tmp_path, demo["fall_demo"], broker.port, loop=True))
    try:
        sub.wait_for(lambda m: ("edge_hf/box/hall/fall", b"ON", False) in m, timeout=60)
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    assert _retained(broker.port, "edge_hf/box/hall/fall") == b"ON", "SIGTERM keeps the latch"
    (started,) = [e for e in sub.events() if e["type"] == "start"]
    assert [e for e in sub.events() if e["type"] == "end"] == []

    # Restart (looping the quiet lie-down clip: no new fall), then kill -9 it: still latched.
    # Not a fixed sleep before the kill: the sink sends the fall states only once nothing older
    # waits or is in flight, so the restart's ON comes after any start it sent again.
    on = ("edge_hf/box/hall/fall", b"ON", False)
    ons = sub.wait_for(lambda m: True).count(on)
    second = _run(_config(tmp_path, demo["lie_down_demo"], broker.port, loop=True))
    try:
        sub.wait_for(lambda m: sum(t.endswith("/status") and p == b"online"
                                   for t, p, _ in m) >= 2, timeout=60)  # fmt: skip
        sub.wait_for(lambda m: m.count(on) > ons, timeout=60)
    finally:
        second.send_signal(signal.SIGKILL)
        second.communicate(timeout=30)
    assert _retained(broker.port, "edge_hf/box/hall/fall") == b"ON"
    assert [e["type"] for e in sub.events()] == ["start"], "the old start was not sent again"

    # A third run holds it still; an acknowledgement ends it.
    third = _run(_config(tmp_path, demo["lie_down_demo"], broker.port, loop=True))
    try:
        sub.wait_for(lambda m: sum(t.endswith("/status") and p == b"online"
                                   for t, p, _ in m) >= 3, timeout=60)  # fmt: skip
        ack = mqtt.Client(CallbackAPIVersion.VERSION2)
        ack.connect("127.0.0.1", broker.port)
        ack.loop_start()
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and not [e for e in sub.events() if e["type"] == "end"]:
            # (until the daemon has subscribed: an ack before that is not heard)
            ack.publish("edge_hf/box/hall/ack", b"", qos=1).wait_for_publish(5)
            time.sleep(1.0)  # paces the acks; decides nothing
        ack.loop_stop()
        ack.disconnect()
    finally:
        third.send_signal(signal.SIGTERM)
        third.communicate(timeout=60)
    ends = [e for e in sub.events() if e["type"] == "end"]
    assert [(e["event_id"], e["end_reason"]) for e in ends] == [
        (started["event_id"], "acknowledged")
    ]
    for e in (started, *ends):
        jsonschema.validate(e, SCHEMA, format_checker=jsonschema.FormatChecker())
    falls = [p for t, p, _ in sub.messages if t.endswith("/fall")]
    assert [k for k, _ in itertools.groupby(falls)] == [b"OFF", b"ON", b"OFF"], falls  # one ON
    assert _retained(broker.port, "edge_hf/box/hall/fall") == b"OFF"
    assert not (tmp_path / "state" / "open-events.json").read_text().strip("{} \n")

    # The next real fall is an off -> on change (an automation on `to: "on"` fires).
    watch = Subscriber(broker.port, "edge_hf/box/hall/fall", name="watch")
    watch.wait_for(lambda m: len(m) >= 1)
    fourth = _run(_config(tmp_path, demo["fall_demo"], broker.port, loop=False))
    fourth.communicate(timeout=120)
    states = [
        k for k, _ in itertools.groupby(p for _, p, _ in watch.wait_for(lambda m: len(m) >= 2))
    ]
    assert states[:2] == [b"OFF", b"ON"], states
    watch.close()
    sub.close()


@needs_shipped
@pytest.mark.parametrize("latch", [True, False])
def test_a_latched_fall_stays_on_while_the_person_is_down(
    demo: dict[str, Path], tmp_path: Path, latch: bool
) -> None:
    cfg = Config.model_validate_json(
        _config(tmp_path, demo["fall_demo"], None, loop=False, latch=latch).read_text()
    )
    sink = RecordingSink()
    replay_files(build_pipeline(cfg, sink, score_history=None, live=False))
    kinds = [(e.type, e.end_reason) for e in sink.events]
    if latch:  # the person lies still to the clip's end: still on when the replay stops
        assert kinds == [("start", None), ("end", "shutdown")]
    else:
        assert kinds == [("start", None), ("end", "recovered")]
        assert sink.events[1].time - sink.events[0].time < 3.0, "cleared while still down"


@needs_shipped
def test_clear_after_s_ends_a_latched_fall(demo: dict[str, Path], tmp_path: Path) -> None:
    cfg = Config.model_validate_json(
        _config(tmp_path, demo["fall_demo"], None, loop=False, clear_after_s=1.0).read_text()
    )
    sink = RecordingSink()
    replay_files(build_pipeline(cfg, sink, score_history=None, live=False))
    start, end = sink.events
    assert end.end_reason == "timeout" and 1.0 <= end.time - start.time < 1.5


@needs_shipped
def test_an_ack_over_mqtt_clears_a_latched_fall(
    broker: Broker, demo: dict[str, Path], tmp_path: Path
) -> None:
    cfg = Config.model_validate_json(
        _config(tmp_path, demo["fall_demo"], broker.port, loop=True, snapshot=True).read_text()
    )
    sub = Subscriber(broker.port, "edge_hf/box/hall/#")
    assert sub.subscribed.wait(20), "the subscription acknowledged"
    mqtt_sink = MqttSink(cfg.mqtt, "box", ["hall"], cfg.state_dir, snapshot_cameras=["hall"],
                         snapshot_type="image/jpeg")  # fmt: skip
    pipeline = build_pipeline(cfg, with_snapshots(cfg, mqtt_sink), score_history=None)
    pipeline.start()
    runner = threading.Thread(target=pipeline.run, kwargs={"drain_s": 1.0})
    runner.start()
    try:
        msgs = sub.wait_for(lambda m: ("edge_hf/box/hall/fall", b"ON", False) in m, timeout=60)
        # The evidence came first, as a JPEG at the camera's resolution (the model sees 96x96).
        topics = [t for t, _, _ in msgs]
        assert topics.index("edge_hf/box/hall/snapshot") < topics.index("edge_hf/box/hall/event")
        (jpeg,) = [p for t, p, _ in msgs if t == "edge_hf/box/hall/snapshot"]
        image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
        assert image.shape == (240, 320, 3), image.shape
        # Not a fixed sleep: until the detector has decided 3 s more of windows (unlatched, it
        # would have ended the fall, "recovered", within them).
        cam = pipeline.cameras[0]
        seen = cam.windows
        more = round(3.0 / cam.interval_s)
        wait_or_fail(lambda: cam.windows >= seen + more, 60, f"{more} more windows")
        assert pipeline.snapshot().cameras[0].events_ended == 0, "still on while the person is down"
        assert [e["type"] for e in sub.events()] == ["start"], "still on while the person is down"
        ack = mqtt.Client(CallbackAPIVersion.VERSION2)
        ack.connect("127.0.0.1", broker.port)
        ack.publish("edge_hf/box/hall/ack", "ACK", qos=1).wait_for_publish(5)
        ack.disconnect()
        msgs = sub.wait_for(lambda m: len([1 for t, _, _ in m if t.endswith("/event")]) >= 2)
        assert sub.events()[1]["end_reason"] == "acknowledged"
        jsonschema.validate(sub.events()[1], SCHEMA, format_checker=jsonschema.FormatChecker())
        assert [p for t, p, _ in msgs if t.endswith("/fall")][-1] == b"OFF"
    finally:
        pipeline.stop.set()
        runner.join(30)
        sub.close()


def test_open_events_survive_a_crash_and_end_once(tmp_path: Path) -> None:
    from tests.test_mqtt import _event

    journal = OpenEvents(tmp_path / "open-events.json")
    first = JournalSink(RecordingSink(), journal)
    first.send(_event(1))
    first.send(_event(2))
    first.send(_event(2, "end"))  # event 2 ended; event 1 is open when we "crash"
    after = RecordingSink()
    JournalSink(after, OpenEvents(tmp_path / "open-events.json")).start()
    # Its start reached the sinks before the crash: not sent again (#42 item 8: an old fall
    # fires no automation twice), only ended.
    assert [(e.event_id, e.type, e.end_reason) for e in after.events] == [
        (_event(1).event_id, "end", "restart")
    ]  # fmt: skip
    again = RecordingSink()
    JournalSink(again, OpenEvents(tmp_path / "open-events.json")).start()
    assert list(again.events) == [], "ended once, not at every start"


# ------------------------------------------------------------------ discovery

# Keys Home Assistant documents for each MQTT platform used here (home-assistant.io/integrations/
# <platform>.mqtt, checked against 2024.3 and current): required ones, then the optional ones.
COMMON = {
    "name", "unique_id", "default_entity_id", "object_id", "qos", "device", "origin",
    "availability", "availability_mode", "availability_topic", "json_attributes_topic",
    "json_attributes_template", "icon", "entity_category", "enabled_by_default", "encoding",
}  # fmt: skip
DOCUMENTED: dict[str, tuple[set[str], set[str]]] = {
    "binary_sensor": (
        {"state_topic"},
        {"device_class", "payload_on", "payload_off", "value_template", "off_delay",
         "expire_after", "force_update"},
    ),
    "sensor": ({"state_topic"}, {"device_class", "options", "value_template", "state_class",
                                 "suggested_display_precision"}),
    "event": ({"state_topic", "event_types"}, {"device_class", "value_template"}),
    "button": ({"command_topic"}, {"payload_press", "device_class", "retain", "command_template"}),
    "image": ({"image_topic"}, {"content_type", "image_encoding"}),
}  # fmt: skip
DEVICE_KEYS = {
    "identifiers", "name", "manufacturer", "model", "sw_version", "hw_version", "via_device",
    "suggested_area", "configuration_url", "connections",
}  # fmt: skip


def test_discovery_payloads_use_only_documented_keys() -> None:
    # Pure functions of the settings: no sink, no outbox, no broker.
    from edge_hf.daemon.homeassistant import Discovery, discovery

    payloads = discovery(
        Discovery("box", cameras=("hall", "door"), snapshot_cameras=frozenset({"hall"}))
    )
    components = {t.split("/")[1] for t in payloads}
    assert components == set(DOCUMENTED), "fall, status, event, acknowledge button, snapshot"
    assert not any("door_snapshot" in t for t in payloads), "an image only with snapshots on"
    devices = {}
    for topic, p in payloads.items():
        component = topic.split("/")[1]
        required, optional = DOCUMENTED[component]
        assert required <= p.keys(), (topic, required - p.keys())
        assert p.keys() <= required | optional | COMMON, (topic, p.keys() - required - optional)
        assert p["qos"] == 1 and p["origin"]["name"] == "edge_hf"
        assert p["device"].keys() <= DEVICE_KEYS
        devices[p["device"]["identifiers"][0]] = p["device"]
        assert json.loads(json.dumps(p)) == p
    # via_device resolves: the box is announced as a device of its own.
    box = "edge_hf_box"
    assert box in devices and "via_device" not in devices[box]
    assert {d.get("via_device") for i, d in devices.items() if i != box} == {box}


def _render_ha(template: str, payload: dict[str, Any], this_state: str = "unknown") -> str:
    """An MQTT value_template rendered as Home Assistant 2024.3 does: `value_json`, `this` (the
    entity's own state object), and its `is_number` and `to_json` filters."""
    import jinja2

    def is_number(v: object) -> bool:
        try:
            float(v)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        return True

    env = jinja2.Environment()
    env.filters.update(is_number=is_number, to_json=json.dumps)
    this = type("State", (), {"state": this_state})()
    return env.from_string(template).render(value_json=payload, this=this)


def test_home_assistant_shows_how_many_others_were_present() -> None:
    """#43 item 6: `sensor.<device>_<camera>_others_present`, from the retained attributes topic:
    the start's `others_present`, kept through the escalation (which does not repeat it), unknown
    ("None") once the fall ended or without the person stage. Added after the other entities;
    their ids and topics are unchanged (`make ha-check` runs it in a real Home Assistant)."""
    from edge_hf.daemon.homeassistant import Discovery, discovery, discovery_topics
    from tests.test_mqtt import _event

    d = Discovery("box", cameras=("hall",), snapshot_cameras=frozenset({"hall"}))
    payloads = discovery(d)
    sensor = payloads["homeassistant/sensor/box/hall_others_present/config"]
    assert sensor["default_entity_id"] == "sensor.box_hall_others_present"
    assert (
        sensor["name"] == "Others present"
        and sensor["unique_id"] == "edge_hf_box_hall_others_present"
    )
    assert sensor["state_topic"] == "edge_hf/box/hall/attributes"
    assert list(payloads)[1:7] == [
        f"homeassistant/{c}/box/hall_{o}/config" for c, o in (
            ("binary_sensor", "fall"), ("sensor", "status"), ("event", "fall_event"),
            ("button", "acknowledge"), ("image", "snapshot"), ("sensor", "down_since"))
    ], "the entities before #43 item 6, as they were"  # fmt: skip
    assert "homeassistant/sensor/box/hall_others_present/config" in discovery_topics(d, "hall")
    start = replace(_event(1), others_present=1)
    template = sensor["value_template"]
    assert _render_ha(template, start.as_dict()) == "1"
    assert _render_ha(template, replace(start, others_present=0).as_dict()) == "0"
    assert _render_ha(template, _event(1).as_dict()) == "None", "no person stage: unknown"
    escalation = replace(_event(1), type="escalation", down_s=60.0).as_dict()  # as the daemon's
    assert _render_ha(template, escalation, this_state="1") == "1", "kept through it"
    assert _render_ha(template, escalation, this_state="unknown") == "None"
    assert _render_ha(template, _event(1, "end").as_dict(), this_state="1") == "None"


def test_a_camera_removed_from_the_config_disappears(broker: Broker, tmp_path: Path) -> None:
    cfg = MqttConfig(enabled=True, port=broker.port)
    before = MqttSink(cfg, "box", ["hall", "door"], tmp_path)
    before.start()
    assert before.connected.wait(10)
    door = "homeassistant/binary_sensor/box/door_fall/config"
    wait_or_fail(lambda: _retained(broker.port, door) is not None, 20, "the door's discovery")
    before.close()
    assert _retained(broker.port, door) is not None
    after = MqttSink(cfg, "box", ["hall"], tmp_path)
    after.start()
    assert after.connected.wait(10)
    removed = (door, "homeassistant/button/box/door_acknowledge/config")
    wait_or_fail(
        lambda: all(_retained(broker.port, t) is None for t in removed),
        20,
        "the sink to clear the removed camera's retained discovery",
    )
    after.close()
    for topic in removed:
        assert _retained(broker.port, topic) is None, f"{topic} removed"
    assert _retained(broker.port, "homeassistant/binary_sensor/box/hall_fall/config") is not None


def test_snapshots_are_pruned_by_count_and_bytes(tmp_path: Path) -> None:
    from edge_hf.daemon.snapshots import prune

    frame = np.random.default_rng(0).integers(0, 255, (240, 320, 3), np.uint8)
    for i in range(10):
        path = tmp_path / f"{i}.jpg"
        cv2.imwrite(str(path), frame)
        os.utime(path, (1000 + i, 1000 + i))
    size = (tmp_path / "0.jpg").stat().st_size
    assert prune(tmp_path, keep=6, max_bytes=10**9) == 4
    assert sorted(p.stem for p in tmp_path.glob("*.jpg")) == [str(i) for i in range(4, 10)]
    prune(tmp_path, keep=100, max_bytes=3 * size)
    assert sorted(p.stem for p in tmp_path.glob("*.jpg")) == ["7", "8", "9"], "newest kept"


def test_on_connect_the_fall_state_comes_before_availability(
    broker: Broker, tmp_path: Path
) -> None:
    """Home Assistant shows an entity again with the last state it got: a stale retained ON must
    be overwritten before the box says `online`, or `to: "on"` automations fire."""
    stale = mqtt.Client(CallbackAPIVersion.VERSION2)
    stale.connect("127.0.0.1", broker.port)
    stale.publish("edge_hf/box/hall/fall", "ON", qos=1, retain=True).wait_for_publish(5)
    stale.disconnect()
    sub = Subscriber(broker.port, "edge_hf/box/#")
    sub.wait_for(lambda m: len(m) >= 1)  # the stale retained ON
    sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], tmp_path)
    sink.start()
    msgs = sub.wait_for(lambda m: ("edge_hf/box/availability", b"online", False) in m)
    order = [
        (t, p) for t, p, _ in msgs if t in ("edge_hf/box/hall/fall", "edge_hf/box/availability")
    ]
    assert order == [
        ("edge_hf/box/hall/fall", b"ON"),  # the stale one
        ("edge_hf/box/hall/fall", b"OFF"),
        ("edge_hf/box/availability", b"online"),
    ], order
    sink.close()
    sub.close()


def test_the_sink_announces_exactly_the_discovery_payloads(tmp_path: Path) -> None:
    from edge_hf.daemon.homeassistant import Discovery, discovery

    cfg = MqttConfig(enabled=True, topic_prefix="fd", discovery_prefix="ha")
    sink = MqttSink(cfg, "box", ["hall"], tmp_path, "m.onnx", ["hall"])
    expected = discovery(Discovery("box", "fd", "ha", ("hall",), frozenset({"hall"}), "m.onnx"))
    assert sink.discovery() == expected
    assert all(t.startswith("ha/") for t in expected)
    sink.outbox.close()


def test_a_start_the_sinks_never_took_is_sent_again_after_a_crash(tmp_path: Path) -> None:
    """A kill between the journal and the outbox must not lose the alarm: the recorded start,
    never handed to the sinks, is sent again, then ended (unlatched, or not kept)."""
    from tests.test_mqtt import _event

    journal = OpenEvents(tmp_path / "open-events.json")
    journal.record(_event(1))  # on disk; the process dies before the sinks take it
    after = RecordingSink()
    JournalSink(after, OpenEvents(tmp_path / "open-events.json")).start()
    assert [(e.event_id, e.type, e.end_reason) for e in after.events] == [
        (_event(1).event_id, "start", None), (_event(1).event_id, "end", "restart")
    ]  # fmt: skip
    assert after.events[0].as_dict() == _event(1).as_dict(), "the start as it was recorded"


def test_a_latched_fall_kept_across_a_restart_is_not_sent_again_nor_ended(tmp_path: Path) -> None:
    """#42 item 8: the next run holds a still-latched fall open (its camera's detector has it:
    an acknowledgement ends it); the sinks take it as the camera's state, nothing is sent."""
    from tests.test_mqtt import _event

    first = JournalSink(RecordingSink(), OpenEvents(tmp_path / "open-events.json"))
    first.send(_event(1))
    kept: list[str] = []

    class Restoring(RecordingSink):
        def restore(self, event: FallEvent) -> None:
            kept.append(event.event_id)

    after = Restoring()
    sink = JournalSink(after, OpenEvents(tmp_path / "open-events.json"),
                       keep=lambda e: True)  # fmt: skip
    sink.start()
    assert list(after.events) == [] and kept == [_event(1).event_id]
    sink.send(replace(_event(1), type="end", end_reason="acknowledged"))
    assert [e.end_reason for e in after.events] == ["acknowledged"]
    assert not (tmp_path / "open-events.json").read_text().strip("{} \n"), "journal emptied"
