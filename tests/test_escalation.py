"""#43 item 2, "still on the floor": a fall whose person is still down `escalate_after_s` after
its start sends one `escalation` (same event_id, `down_s`); none once the person got up. Real
clips (GMDCSA24) through the shipped person stage, held with `--hold-end-s`; the journal, outbox
and a real Mosquitto carry it like a start, across a broker outage and a daemon killed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

import edge_hf
from edge_hf.core.posefall import PoseVerdict
from edge_hf.daemon.config import DetectionConfig, MqttConfig
from edge_hf.daemon.events import FallDetector
from edge_hf.daemon.homeassistant import Discovery, discovery
from edge_hf.daemon.journal import JournalSink, OpenEvents
from edge_hf.daemon.mqtt import MqttSink
from edge_hf.daemon.payload import FallEvent, ModelInfo
from edge_hf.daemon.sinks import RecordingSink
from edge_hf.training.synth import write_video
from tests.broker import Broker, alerts_printed, publish_sentinel
from tests.conftest import SHARED_DATA, clip_frames
from tests.test_mqtt import Subscriber

ROOT = Path(__file__).resolve().parents[1]
DEMO_MODEL = ROOT / "models" / "fall-synth-mobilenet_v3_small-t3.onnx"
POSE = ROOT / "models" / "person-movenet-multipose-lightning.onnx"
FALL = SHARED_DATA / "gmdcsa24" / "S3_Fall_01.mp4"  # side view: stands, lies from ~1.5 s
needs_gmdcsa = pytest.mark.skipif(not FALL.is_file(), reason="../shared/data/gmdcsa24 absent")
SCHEMA = json.loads((Path(edge_hf.__file__).parent / "event.schema.json").read_text())
SIZE = (640, 360)


def _frames(clip: Path) -> tuple[list[np.ndarray], float]:
    return clip_frames(clip, SIZE)


def _config(tmp_path: Path, video: Path, detection: str = "", mqtt: str = "") -> Path:
    """The demo classifier at 0.99 (it never fires on real footage: the events are the person
    stage's), the shipped pose model, decision `pose`."""
    path = tmp_path / "edge-hf.yaml"
    path.write_text(
        f"device_id: box\n"
        f"model: {{path: {DEMO_MODEL}, providers: [cpu], threshold: 0.99}}\n"
        f"cameras: [{{name: hall, source: {video}}}]\n"
        f"person: {{model: {POSE}, decision: pose}}\n"
        f"detection: {{{detection}}}\n"
        f"{mqtt}"
        f"state_dir: {tmp_path / 'state'}\n"
    )
    return path


def _replay(tmp_path: Path, video: Path, hold_end_s: float, detection: str) -> list[dict[str, Any]]:
    """`edge-hf replay --config C --hold-end-s N`: the events it printed."""
    cfg = _config(tmp_path, video, detection)
    out = subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "replay", "--config", str(cfg),
         "--hold-end-s", str(hold_end_s), "--state-dir", str(tmp_path / "replay")],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


@needs_gmdcsa
def test_a_person_still_on_the_floor_gets_one_escalation_with_the_fall_s_id(
    tmp_path: Path,
) -> None:
    """S3_Fall_01 with the person left lying 8 s (`--hold-end-s 8`), `escalate_after_s: 3`: the
    start, then 3 s later an escalation with the same event_id and `down_s`, then (replay's end)
    the end. Off (0, null): no escalation."""
    events = _replay(tmp_path, FALL, 8.0, "escalate_after_s: 3")
    assert [e["type"] for e in events] == ["start", "escalation", "end"], events
    start, escalation, _ = events
    assert escalation["event_id"] == start["event_id"]
    assert escalation["started_at"] == start["started_at"]
    assert 3.0 <= escalation["down_s"] <= 3.5
    assert "end_reason" not in escalation and "ended_at" not in escalation
    for e in events:
        jsonschema.validate(e, SCHEMA, format_checker=jsonschema.FormatChecker())
    for off in ("escalate_after_s: 0", "escalate_after_s: null"):
        assert [e["type"] for e in _replay(tmp_path, FALL, 8.0, off)] == ["start", "end"]


def _getting_up(tmp_path: Path) -> tuple[Path, Path]:
    """The real fall, the person lying 2 s, then the same frames backwards (getting up) and
    standing 2 s; and the same fall with the person lying on instead of getting up."""
    frames, fps = _frames(FALL)
    lying, standing = frames[-1], frames[0]
    down = frames + [lying] * round(2 * fps)
    up, still = tmp_path / "up.mp4", tmp_path / "still.mp4"
    write_video(up, iter(down + frames[::-1] + [standing] * round(2 * fps)), fps, SIZE)
    write_video(still, iter(down + [lying] * round(6 * fps)), fps, SIZE)
    return up, still


@needs_gmdcsa
def test_no_escalation_once_the_person_got_up(tmp_path: Path) -> None:
    """The same fall, escalate_after_s 10: the person who lies on is escalated; the person who got
    up before (standing, held 10 s more) is not: latched (the default) the fall stays on until
    someone clears it, but nobody is on the floor; with end_when_up it ends `got_up` first."""
    up, still = _getting_up(tmp_path)
    lies_on = _replay(tmp_path, still, 4.0, "escalate_after_s: 10")
    assert [e["type"] for e in lies_on] == ["start", "escalation", "end"], lies_on
    got_up = _replay(tmp_path, up, 10.0, "escalate_after_s: 10")
    assert [e["type"] for e in got_up] == ["start", "end"], got_up
    assert got_up[1]["end_reason"] == "shutdown"
    ended = _replay(tmp_path, up, 10.0, "escalate_after_s: 10, end_when_up: true")
    assert [(e["type"], e.get("end_reason")) for e in ended] == [("start", None), ("end", "got_up")]


# ------------------------------------------------------------------ the detector, restored


def _verdict(t: float, down: bool) -> PoseVerdict:
    return PoseVerdict(down=down, fall=down, t=t, person=(1, (0.2, 0.6, 0.6, 0.9)))


def _start(i: int = 1) -> FallEvent:
    t0 = 1767225600.0  # 2026-01-01T00:00:00Z
    return FallEvent(
        f"00000000-0000-4000-8000-{i:012d}", "start", "hall", "box", t0, t0, 0.9, 0.9,
        ModelInfo("m.onnx", 3, 100.0), person=(1, (0.2, 0.6, 0.6, 0.9)),
    )  # fmt: skip


def _escalation(i: int = 1, down_s: float = 60.0) -> FallEvent:
    start = _start(i)
    return replace(start, type="escalation", time=start.started_at + down_s, down_s=down_s)


def _held(escalated: bool, after_s: float = 60.0) -> list[FallEvent]:
    """A detector that holds an earlier run's fall (started 100 s ago) open again, fed a person
    lying there for 5 s: what it sends."""
    det = FallDetector("hall", "box", DetectionConfig(escalate_after_s=after_s), 0.5,
                       ModelInfo("m.onnx", 3, 100.0), decision="pose")  # fmt: skip
    start = _start()
    assert det.restore(start, 1000.0, start.started_at + 100.0, escalated=escalated)
    out = []
    for k in range(50):
        t = 1000.0 + k * 0.1
        if k % 2 == 0:
            out += det.on_pose(t, _verdict(t, down=True))
        out += det.update(0.1, t)
    return out


def test_a_fall_held_open_across_a_restart_escalates_once_not_again() -> None:
    """A fall kept across a restart whose escalation went out before it is not escalated a
    second time; one that had not escalated yet is, the timer counting from its start."""
    assert _held(escalated=True) == []
    (again,) = _held(escalated=False)
    assert again.type == "escalation" and again.event_id == _start().event_id
    assert again.down_s is not None and 99.9 <= again.down_s <= 100.1


def test_a_person_who_got_up_and_fell_again_while_the_alarm_is_on_is_escalated() -> None:
    """Latched (the default), a fall whose person got up stays on without escalating; if they
    fall again before anyone cleared it, the escalation is due again."""
    det = FallDetector("hall", "box", DetectionConfig(escalate_after_s=60.0), 0.5,
                       ModelInfo("m.onnx", 3, 100.0), decision="pose")  # fmt: skip
    start = _start()
    assert det.restore(start, 1000.0, start.started_at + 100.0)
    up = PoseVerdict(down=False, fall=False, t=1000.0, got_up=[(1, 30.0)])
    assert det.on_pose(1000.0, up) == []
    quiet = [e for k in range(20) for e in det.on_pose(1000.1 + k / 10, _verdict(1000.1, True))]
    assert quiet + det.update(0.1, 1002.5) == [], "got up: nobody to escalate"
    again = replace(_verdict(1003.0, True), new_fall=True)
    assert det.on_pose(1003.0, again) == []
    (escalation,) = det.update(0.1, 1003.1)
    assert escalation.type == "escalation"


# ------------------------------------------------------------------ the journal


def test_an_escalation_is_journaled_and_resent_only_if_the_sinks_never_took_it(
    tmp_path: Path,
) -> None:
    """Like a start: an escalation journaled (AlertThread does it before queueing) but killed
    before the sinks took it is sent again at the next start, once; one the sinks took is not,
    and a kept fall's sinks are told it as the camera's state (Home Assistant: still on the
    floor). Its end forgets it."""
    path = tmp_path / "open-events.json"
    first = JournalSink(RecordingSink(), OpenEvents(path))
    first.send(_start())  # the sinks took the start
    first.journal.record(_escalation())  # journaled; the process dies before the sinks take it
    restored: list[FallEvent] = []

    class Restoring(RecordingSink):
        def restore(self, event: FallEvent) -> None:
            restored.append(event)

    after = Restoring()
    JournalSink(after, OpenEvents(path), keep=lambda e: True).start()
    assert [(e.type, e.down_s) for e in after.events] == [("escalation", 60.0)]
    assert [e.type for e in restored] == ["start"]
    assert after.events[0].as_dict() == _escalation().as_dict(), "as it was journaled"
    again, restored[:] = Restoring(), []
    sink = JournalSink(again, OpenEvents(path), keep=lambda e: True)
    sink.start()
    assert list(again.events) == [], "sent once: the sinks took it"
    assert [e.type for e in restored] == ["start", "escalation"]
    sink.send(replace(_start(), type="end", end_reason="acknowledged"))
    assert json.loads(path.read_text()) == {}, "its end forgets the fall and its escalation"
    ended = RecordingSink()
    OpenEvents(path).record(_start(2))
    JournalSink(ended, OpenEvents(path)).start()
    assert [e.type for e in ended.events] == ["start", "end"], "no escalation to send"


def test_a_damaged_escalation_in_the_journal_still_ends_its_fall(tmp_path: Path) -> None:
    """One fall's journaled escalation is damaged: skipped with a line, its fall still ends;
    another fall's good one (never taken by the sinks) is sent, then that fall ends."""
    path = tmp_path / "open-events.json"
    journal = OpenEvents(path)
    for i in (1, 2):
        journal.record(_start(i))
        journal.mark_handed(_start(i).event_id)
    journal.record(_escalation(2))
    entry = json.loads(path.read_text())
    entry[_start(1).event_id]["escalation"] = {"type": "escalation", "down_s": "soon"}
    path.write_text(json.dumps(entry))
    after = RecordingSink()
    JournalSink(after, OpenEvents(path)).start()
    assert [(e.type, e.event_id[-1], e.end_reason) for e in after.events] == [
        ("end", "1", "restart"), ("escalation", "2", None), ("end", "2", "restart")
    ]  # fmt: skip


# ------------------------------------------------------------------ MQTT, Home Assistant


def test_an_escalation_waits_out_a_broker_outage_and_the_fall_stays_on(
    broker: Broker, tmp_path: Path
) -> None:
    """Sent while the broker is down, the start and its escalation wait in the outbox and arrive
    in order once it is back, on the event topic; the camera's fall state stays ON (an
    escalation is no end) and its attributes say the escalation."""
    sub = Subscriber(broker.port, "edge_hf/box/hall/#")
    assert sub.subscribed.wait(20)
    mqtt_sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], tmp_path)
    sink = JournalSink(mqtt_sink, OpenEvents(tmp_path / "open-events.json"))
    sink.start()
    assert mqtt_sink.connected.wait(10)
    broker.stop()
    sink.send(_start())
    sink.send(_escalation())
    broker.start()
    msgs = sub.wait_for(lambda m: len([t for t, _, _ in m if t.endswith("/event")]) >= 2)
    assert [(e["type"], e["event_id"]) for e in sub.events()] == [
        ("start", _start().event_id), ("escalation", _start().event_id)
    ]  # fmt: skip
    assert sub.events()[1]["down_s"] == 60.0
    msgs = sub.wait_for(lambda m: any(t.endswith("/attributes") for t, _, _ in m))
    falls = [p for t, p, _ in msgs if t.endswith("/fall")]  # (OFF before the fall)
    assert b"ON" in falls and b"OFF" not in falls[falls.index(b"ON") :], falls
    attributes = [json.loads(p) for t, p, _ in msgs if t.endswith("/attributes")]
    assert attributes[-1]["type"] == "escalation"
    sink.close()
    sub.close()


def _render(template: str, payload: dict[str, Any]) -> str:
    """A Home Assistant MQTT value_template rendered as Home Assistant does (`value_json`)."""
    import jinja2

    env = jinja2.Environment()
    env.filters["to_json"] = json.dumps
    return env.from_string(template).render(value_json=payload, value=json.dumps(payload))


def test_home_assistant_shows_since_when_the_person_is_on_the_floor() -> None:
    """A timestamp sensor per camera (`sensor.<device>_<camera>_down_since`, shown by Home
    Assistant as "2 minutes ago", counting) from the camera's last event: the fall's start once
    it escalated, unknown otherwise; the event entity takes `escalation` with its down_s."""
    payloads = discovery(Discovery("box", cameras=("hall",)))
    sensor = payloads["homeassistant/sensor/box/hall_down_since/config"]
    assert sensor["device_class"] == "timestamp"
    assert sensor["default_entity_id"] == "sensor.box_hall_down_since"
    assert sensor["state_topic"] == "edge_hf/box/hall/attributes"
    escalation = _escalation().as_dict()
    assert _render(sensor["value_template"], escalation) == escalation["started_at"]
    assert _render(sensor["value_template"], _start().as_dict()) == "None"  # unknown
    event = payloads["homeassistant/event/box/hall_fall_event/config"]
    assert "escalation" in event["event_types"]
    said = json.loads(_render(event["value_template"], escalation))
    assert said["event_type"] == "escalation" and said["down_s"] == 60.0


def test_edge_hf_alerts_prints_the_escalation(broker: Broker) -> None:
    printed = alerts_printed(broker.port, [("edge_hf/box/hall/event", _escalation().to_json())])
    assert "ON FLOOR" in printed and "down 60.0 s" in printed, printed


# ------------------------------------------------------------------ the daemon, killed


def _journal(state: Path) -> dict[str, Any]:
    try:
        loaded = json.loads((state / "open-events.json").read_text())
        return loaded if isinstance(loaded, dict) else {}
    except (OSError, ValueError):
        return {}


@needs_gmdcsa
def test_a_daemon_killed_after_an_escalation_sends_it_once_and_never_again(
    tmp_path: Path,
) -> None:
    """`edge-hf run` on a camera showing the real fall and the person lying on, broker down,
    `escalate_after_s: 3`: once the escalation is in the outbox the daemon is SIGKILLed. The
    next start (the person still lying there, broker up) sends the start and the escalation
    from the outbox, holds the latched fall open and escalates it no second time."""
    frames, fps = _frames(FALL)
    video, lying = tmp_path / "fall.mp4", tmp_path / "lying.mp4"
    write_video(video, iter(frames + [frames[-1]] * round(30 * fps)), fps, SIZE)
    write_video(lying, iter([frames[-1]] * round(8 * fps)), fps, SIZE)
    broker = Broker(tmp_path / "broker")  # configured, not running
    mqtt = f"mqtt: {{enabled: true, port: {broker.port}}}\n"
    cfg = _config(tmp_path, video, "escalate_after_s: 3", mqtt)
    cli = [sys.executable, "-m", "edge_hf.cli", "run", "--config"]
    daemon = subprocess.Popen([*cli, str(cfg)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    state = tmp_path / "state"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and daemon.poll() is None:
        entries = list(_journal(state).values())
        if entries and entries[0].get("escalation", {}).get("handed"):
            break
        time.sleep(0.2)
    daemon.send_signal(signal.SIGKILL)
    out, err = daemon.communicate(timeout=10)
    printed = [json.loads(x) for x in out.decode().splitlines()]
    assert [e["type"] for e in printed] == ["start", "escalation"], err.decode()[-2000:]
    broker.start()
    try:
        sub = Subscriber(broker.port, "edge_hf/box/hall/#")
        assert sub.subscribed.wait(20)
        cfg.write_text(cfg.read_text().replace(str(video), str(lying)))
        again = subprocess.run([*cli, str(cfg)], capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr[-2000:]
        assert "still latched, kept open" in again.stderr
        sub.wait_for(lambda m: len([t for t, _, _ in m if t.endswith("/event")]) >= 2)
        # "Nothing more" is an absence: the daemon has exited, so anything more it sent reached
        # the broker before this sentinel; once the sentinel has arrived, so would have that.
        publish_sentinel(broker.port, "edge_hf/box/hall/test-sentinel")
        sub.wait_for(lambda m: any(t.endswith("/test-sentinel") for t, _, _ in m))
        got = [(e["type"], e["event_id"]) for e in sub.events()]
        assert got == [(e["type"], e["event_id"]) for e in printed], "once each, nothing more"
        assert again.stdout.strip() == "", "the restarted daemon sent nothing new"
        sub.close()
    finally:
        broker.stop()
