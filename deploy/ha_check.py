"""Opt-in end-to-end check with a real Home Assistant core (`make ha-check`, not in `make test`).

    python deploy/ha_check.py --hass .ha-venv/bin/hass [--keep DIR]

Starts a Mosquitto on a free 127.0.0.1 port and a Home Assistant core (its own venv:
homeassistant==2024.3.3, paho-mqtt==1.6.1, josepy<2) whose MQTT config entry is written into
`.storage/` before the first start, plus two automations: one mirrors every change of
`binary_sensor.box1_hall_fall` to the topic `ha_check/fall` (so this script sees what Home
Assistant sees), one presses `button.box1_hall_acknowledge` 2 s after the fall turns on. Then it
plays the scenarios of issue #14 with `edge-hf run` on the synthetic demo clips:

1. a fall (latched): Home Assistant sees off -> on, its automation presses the acknowledge button,
   the daemon ends the event with `end_reason: acknowledged`, Home Assistant sees on -> off;
2. kill -9 during a (latched) fall, restart on a clip without a fall: the restart holds the fall
   open (#42 item 8), Home Assistant shows it `unavailable -> on`, never `off -> on` (the
   example's notify-on-fall does not fire again), no `start` is sent again, and the button ends
   it (`acknowledged`); the next fall is again an off -> on change;
3. every discovered entity exists in Home Assistant's entity registry, and its log has no MQTT
   warning or error.

and, with the real GMDCSA24 clips (`--gmdcsa`, default ../shared/data/gmdcsa24; skipped without
them), the entities of issue #43 item 6 and the example automations of
`deploy/home-assistant/automation.yaml` (loaded as a package, its notify services stood in for by
file notifiers): a person walking about beside a real fall, the fall's last frame held so the
person stays on the floor, through `edge-hf run` with the shipped pose model and
`escalate_after_s: 4`:

4. `sensor.box1_hall_others_present` shows the start's `others_present` (also an attribute of the
   fall) and keeps it through the escalation; `event.box1_hall_fall_event` receives
   `escalation`; `sensor.box1_hall_down_since` holds the fall's start as a timestamp;
   `image.box1_hall_snapshot` is served by Home Assistant's HTTP server as `image/png`, the
   skeleton PNG the daemon published; the example automations notify on the fall, call on the
   escalation, acknowledge from the phone's notification action (a `mobile_app_notification_action`
   event) and clear the notification once the fall is acknowledged.

Prints one line per check and exits 1 if any fails.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from edge_hf.bench.broker import Broker, free_port
from edge_hf.training.synth import write_demo_clips, write_video

ROOT = Path(__file__).resolve().parents[1]

MODEL = ROOT / "models" / "fall-synth-mobilenet_v3_small-t3.onnx"
THRESHOLD = 0.75  # deploy/demo.yaml's
POSE = ROOT / "models" / "person-movenet-multipose-lightning.onnx"
EXAMPLE = ROOT / "deploy" / "home-assistant" / "automation.yaml"
GMDCSA = ROOT.parent / "shared" / "data" / "gmdcsa24"
ESCALATE_S = 4.0  # detection.escalate_after_s of scenario 4 (default 60)

HA_CONFIG = """\
homeassistant:
  name: edge_hf check
  latitude: 52.0
  longitude: 4.0
  elevation: 0
  unit_system: metric
  time_zone: UTC
  packages:
    edge_hf_example: !include edge_hf-automation.yaml
logger:
  default: warning
http:
  server_host: 127.0.0.1
  server_port: @HTTP_PORT@
input_boolean:
  ha_check_auto_ack:
    initial: true
notify:
  # Stand-ins for the example's services: the companion app's and a phone call's.
  - platform: file
    name: mobile_app_carer_phone
    filename: notify-phone.txt
  - platform: file
    name: call_carer
    filename: notify-call.txt
automation:
  - alias: mirror fall
    mode: queued
    max: 100
    trigger:
      - platform: state
        entity_id: binary_sensor.box1_hall_fall
    condition:
      - "{{ trigger.from_state is none or trigger.from_state.state != trigger.to_state.state }}"
    action:
      - service: mqtt.publish
        data:
          topic: ha_check/fall
          payload: >-
            {{ trigger.from_state.state if trigger.from_state else 'none' }}->{{
            trigger.to_state.state }}
  - alias: acknowledge after 2 s
    trigger:
      - platform: state
        entity_id: binary_sensor.box1_hall_fall
        to: "on"
    condition:
      - condition: state
        entity_id: input_boolean.ha_check_auto_ack
        state: "on"
    action:
      - delay: 2
      - service: button.press
        target:
          entity_id: button.box1_hall_acknowledge
  - alias: mirror entities
    mode: queued
    max: 200
    trigger:
      - platform: state
        entity_id:
          - binary_sensor.box1_hall_fall
          - event.box1_hall_fall_event
          - sensor.box1_hall_down_since
          - sensor.box1_hall_others_present
          - image.box1_hall_snapshot
          - input_boolean.ha_check_auto_ack
    condition:
      - "{{ trigger.to_state is not none }}"
    action:
      - service: mqtt.publish
        data:
          topic: "ha_check/state/{{ trigger.entity_id }}"
          payload: >-
            {{ {'state': trigger.to_state.state, 'attributes': trigger.to_state.attributes,
            'others_present': states('sensor.box1_hall_others_present')} | to_json }}
  - alias: auto acknowledge on or off
    trigger:
      - platform: mqtt
        topic: ha_check/auto_ack
    action:
      - service: "input_boolean.turn_{{ 'on' if trigger.payload == 'on' else 'off' }}"
        target:
          entity_id: input_boolean.ha_check_auto_ack
  - alias: the phone's notification action
    trigger:
      - platform: mqtt
        topic: ha_check/notification_action
    action:
      - event: mobile_app_notification_action
        event_data:
          action: EDGE_HF_ACK_HALL
"""


def _config_entries(port: int) -> dict[str, object]:
    entry = {
        "entry_id": "edgehfcheckmqtt", "version": 1, "minor_version": 1, "domain": "mqtt",
        "title": f"127.0.0.1:{port}", "source": "user", "unique_id": None,
        "data": {"broker": "127.0.0.1", "port": port, "discovery": True,
                 "discovery_prefix": "homeassistant"},
        "options": {}, "pref_disable_new_entities": False, "pref_disable_polling": False,
        "disabled_by": None,
    }  # fmt: skip
    return {"version": 1, "minor_version": 1, "key": "core.config_entries",
            "data": {"entries": [entry]}}  # fmt: skip


class Watcher:
    """Everything on the broker, in order (topic, payload, retained)."""

    def __init__(self, port: int) -> None:
        self.messages: list[tuple[str, bytes, bool]] = []
        self.lock = threading.Lock()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="ha-check-watcher")
        self.client.on_connect = lambda c, *_: c.subscribe([("edge_hf/#", 1), ("ha_check/#", 1)])
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def _on_message(self, _c: object, _u: object, m: mqtt.MQTTMessage) -> None:
        with self.lock:
            self.messages.append((m.topic, m.payload, bool(m.retain)))

    def mark(self) -> int:
        with self.lock:
            return len(self.messages)

    def since(self, mark: int, topic: str) -> list[str]:
        with self.lock:
            return [p.decode(errors="replace") for t, p, _ in self.messages[mark:] if t == topic]

    def events(self, mark: int) -> list[dict[str, object]]:
        with self.lock:
            return [json.loads(p) for t, p, _ in self.messages[mark:] if t.endswith("/event")]

    def states(self, mark: int, entity_id: str) -> list[dict[str, Any]]:
        """What Home Assistant showed of an entity, in order (its `mirror entities` automation:
        {"state": ..., "attributes": {...}, "others_present": that sensor's state then})."""
        return [json.loads(p) for p in self.since(mark, f"ha_check/state/{entity_id}")]

    def wait(self, what, timeout: float = 90.0) -> bool:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if what():
                return True
            time.sleep(0.2)
        return False


def _daemon_config(work: Path, video: Path, port: int, loop: bool) -> Path:
    path = work / f"edge-hf-{video.stem}-{loop}.yaml"
    path.write_text(json.dumps({
        "device_id": "box1",
        "model": {"path": str(MODEL), "providers": ["cpu"], "threshold": THRESHOLD},
        "cameras": [{"name": "hall", "source": str(video), "loop": loop}],
        "detection": {"snapshot": True},
        "snapshots": {"mode": "image"},  # (the demo runs without the person stage to draw)
        "mqtt": {"enabled": True, "host": "127.0.0.1", "port": port},
        "state_dir": str(work / "state"),
    }))  # fmt: skip
    return path


def _two_people(work: Path, data: Path, hold_s: float) -> Path:
    """A person walking about (S1_ADL_10, left) beside a real fall (S3_Fall_20, right), as in
    tests/test_zones.py, the fall's last frame held `hold_s` (the person stays on the floor)
    while the other walks on."""

    def frames(name: str) -> tuple[list[np.ndarray], float]:
        cap = cv2.VideoCapture(str(data / f"{name}.mp4"))
        fps, out = cap.get(cv2.CAP_PROP_FPS), []
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            out.append(cv2.resize(frame, (640, 480), interpolation=cv2.INTER_AREA))
        cap.release()
        return out, fps

    walk, fps = frames("S1_ADL_10")
    fall, _ = frames("S3_Fall_20")
    fall += [fall[-1]] * round(hold_s * fps)
    both = (np.hstack([walk[i % len(walk)], fall[i]]) for i in range(len(fall)))
    video = work / "clips" / "walk_fall_held.mp4"
    write_video(video, both, fps, (1280, 480))
    return video


def _real_config(work: Path, video: Path, port: int) -> Path:
    """The shipped pose model decides (decision `pose`; the demo classifier at 0.99 never fires
    on real footage), skeleton snapshots (the default), escalation after ESCALATE_S."""
    path = work / "edge-hf-real.yaml"
    path.write_text(json.dumps({
        "device_id": "box1",
        "model": {"path": str(MODEL), "providers": ["cpu"], "threshold": 0.99},
        "cameras": [{"name": "hall", "source": str(video), "loop": False}],
        "person": {"model": str(POSE), "decision": "pose"},
        "detection": {"snapshot": True, "escalate_after_s": ESCALATE_S},
        "mqtt": {"enabled": True, "host": "127.0.0.1", "port": port},
        "state_dir": str(work / "state-real"),
    }))  # fmt: skip
    return path


def _lines(path: Path, skip: int) -> list[str]:
    """A file notifier's messages after its first `skip` bytes (its header line aside)."""
    if not path.exists():
        return []
    text = path.read_bytes()[skip:].decode(errors="replace")
    return [x for x in text.splitlines() if x and "notifications (Log started" not in x
            and not x.startswith("-----")]  # fmt: skip


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _run(config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "edge_hf.cli", "--log-level", "warning", "run", "--config",
         str(config)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _real_fall(  # type: ignore[no-untyped-def]
    watcher: Watcher, check, work: Path, ha_dir: Path, data: Path, port: int, http_port: int
) -> None:
    """Scenario 4 (#43 item 6): what Home Assistant shows of a real fall with someone else in
    view and the person left on the floor, and what the example automations do with it."""
    fall, events_of = "binary_sensor.box1_hall_fall", "event.box1_hall_fall_event"
    down, others, image = ("sensor.box1_hall_down_since", "sensor.box1_hall_others_present",
                           "image.box1_hall_snapshot")  # fmt: skip
    phone, call = ha_dir / "notify-phone.txt", ha_dir / "notify-call.txt"
    video = _two_people(work, data, hold_s=40.0)
    mark = watcher.mark()
    watcher.client.publish("ha_check/auto_ack", "off", qos=1)  # this fall waits to escalate
    switch = "input_boolean.ha_check_auto_ack"
    watcher.wait(lambda: [s["state"] for s in watcher.states(mark, switch)][-1:] == ["off"], 20)
    phone_at, call_at = _size(phone), _size(call)
    daemon = _run(_real_config(work, video, port))

    def escalated() -> list[dict[str, Any]]:
        return [s for s in watcher.states(mark, events_of)
                if s["attributes"].get("event_type") == "escalation"]  # fmt: skip

    watcher.wait(lambda: bool(escalated()), 150)
    time.sleep(3.0)  # the retained attributes, the mirror, the call
    starts = [e for e in watcher.events(mark) if e["type"] == "start"]
    start = starts[0] if starts else {}
    # Home Assistant's image entity, fetched from its own HTTP server with the entity's token.
    shown = [s for s in watcher.states(mark, image) if s["attributes"].get("entity_picture")]
    picture = shown[-1]["attributes"]["entity_picture"] if shown else ""
    content_type, body = "", b""
    if picture:
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}{picture}", timeout=30) as r:
            content_type, body = r.headers.get("Content-Type", ""), r.read()
    # Then the carer answers on the phone: the example acknowledges, the daemon ends the fall.
    watcher.client.publish("ha_check/notification_action", "EDGE_HF_ACK_HALL", qos=1)
    watcher.wait(lambda: any(e["type"] == "end" for e in watcher.events(mark)), 60)
    watcher.wait(lambda: "clear_notification" in _lines(phone, phone_at), 20)
    time.sleep(2.0)
    daemon.send_signal(signal.SIGTERM)
    daemon.communicate(timeout=60)
    watcher.client.publish("ha_check/auto_ack", "on", qos=1)

    events = watcher.events(mark)
    said = [(e["type"], e.get("others_present"), e.get("down_s"), e.get("end_reason"))
            for e in events]  # fmt: skip
    print(f"      the daemon's events (type, others_present, down_s, end_reason): {said}")
    n = start.get("others_present")
    seen_others = [s["state"] for s in watcher.states(mark, others)]
    attr = [s["attributes"].get("others_present") for s in watcher.states(mark, fall)
            if s["state"] == "on"]  # fmt: skip
    check(
        n == 1 and str(n) in seen_others and attr[:1] == [n],
        f"others present: the start says others_present {n}; HA {others} went "
        f"{' -> '.join(seen_others)}; {fall} attribute others_present {attr[:1]}",
    )
    esc = escalated()
    ev = esc[0]["attributes"] if esc else {}
    same = ev.get("event_id") == start.get("event_id")
    check(
        bool(esc) and same and ESCALATE_S <= ev.get("down_s", 0) < ESCALATE_S + 1.5,
        f"escalation: HA {events_of} received event_type {ev.get('event_type')!r} "
        f"(down_s {ev.get('down_s')}, the start's event_id: {same}, "
        f"state {esc[0]['state'] if esc else None})",
    )
    since = [s for s in watcher.states(mark, down) if s["state"] not in ("unknown", "unavailable")]
    dc = since[0]["attributes"].get("device_class") if since else None
    shown_down = [s["state"] for s in watcher.states(mark, down)]
    kept = since[0]["others_present"] if since else None
    check(
        kept == str(n) and seen_others[-2:] == ["unknown", "unavailable"],
        f"{others} kept {kept} through the escalation (its state when {down} took the "
        f"escalation), unknown once the fall ended ({' -> '.join(seen_others)})",
    )

    def when(iso: str) -> datetime | None:
        try:
            return datetime.fromisoformat(iso.replace("Z", "+00:00")).replace(microsecond=0)
        except (TypeError, ValueError):
            return None

    at = since[0]["state"] if since else None
    check(
        dc == "timestamp" and at is not None and when(at) == when(str(start.get("started_at")))
        and shown_down[-2:] == ["unknown", "unavailable"],
        f"time on the floor: HA {down} = {at} (device_class {dc}; the fall's started_at "
        f"{start.get('started_at')}, to the second), went {' -> '.join(shown_down)}",
    )  # fmt: skip
    png = [p for t, p, _ in watcher.messages[mark:] if t == "edge_hf/box1/hall/snapshot"]
    shape = cv2.imdecode(np.frombuffer(body, np.uint8), cv2.IMREAD_COLOR).shape if body else (0, 0)
    same = bool(png) and body == png[-1]
    check(
        content_type == "image/png" and same and body.startswith(b"\x89PNG\r\n\x1a\n"),
        f"skeleton snapshot: HA {image} served GET {picture.split('?')[0]} -> {content_type}, "
        f"{len(body)} bytes, {shape[1]}x{shape[0]}, the PNG the daemon published: {same}",
    )
    said = _lines(phone, phone_at)
    notified = [x for x in said if x.startswith("Score ")]
    check(
        len(notified) == 1 and "someone else is in the room" in notified[0],
        f"example automation, notify on fall: notify.mobile_app_carer_phone got {notified}",
    )
    rang = _lines(call, call_at)
    check(
        bool(rang) and rang[0].startswith("Still on the floor in the hall after 4 seconds"),
        f"example automation, call on escalation: notify.call_carer got {rang[:1]}",
    )
    ends = [e.get("end_reason") for e in events if e["type"] == "end"]
    after = said[said.index(notified[0]) + 1 :] if notified else said
    check(
        ends[:1] == ["acknowledged"] and after == ["clear_notification"],
        f"example automation, acknowledged from the phone's action ({ends}) and the notification "
        f"cleared (the phone's messages after the fall's: {after})",
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--hass", default=str(ROOT / ".ha-venv" / "bin" / "hass"))
    p.add_argument("--keep", help="keep the work folder here (default: a temporary one)")
    p.add_argument("--gmdcsa", default=str(GMDCSA), help="GMDCSA24's clips (scenario 4)")
    a = p.parse_args()
    if not Path(a.hass).is_file():
        sys.exit(f"ha_check: no Home Assistant at {a.hass}; `make ha-check` builds .ha-venv")
    work = Path(a.keep or tempfile.mkdtemp(prefix="edge-hf-ha-check-"))
    work.mkdir(parents=True, exist_ok=True)
    results: list[tuple[bool, str]] = []

    def check(ok: bool, what: str) -> None:
        results.append((ok, what))
        print(f"{'PASS' if ok else 'FAIL'}  {what}", flush=True)

    broker = Broker(work / "broker").start()
    ha_dir = work / "ha"
    (ha_dir / ".storage").mkdir(parents=True, exist_ok=True)
    http_port = free_port()
    (ha_dir / "configuration.yaml").write_text(HA_CONFIG.replace("@HTTP_PORT@", str(http_port)))
    (ha_dir / "edge_hf-automation.yaml").write_text(EXAMPLE.read_text())
    (ha_dir / ".storage" / "core.config_entries").write_text(
        json.dumps(_config_entries(broker.port))
    )
    clips = {c.stem: c for c in write_demo_clips(work / "clips")}
    version = subprocess.run([a.hass, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"Home Assistant {version}, Mosquitto on 127.0.0.1:{broker.port}, work in {work}")
    hass = subprocess.Popen(
        [a.hass, "-c", str(ha_dir), "--skip-pip"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    watcher = Watcher(broker.port)
    try:
        # Home Assistant subscribes to discovery once its MQTT entry is loaded.
        up = watcher.wait(lambda: (ha_dir / "home-assistant.log").exists(), 120)
        time.sleep(20)  # start-up: integrations, the MQTT entry, automations
        check(up and hass.poll() is None, "Home Assistant started")

        # 1. A latched fall, acknowledged by Home Assistant's button.
        mark = watcher.mark()
        daemon = _run(_daemon_config(work, clips["fall_demo"], broker.port, loop=True))
        seen = watcher.wait(lambda: "on->off" in watcher.since(mark, "ha_check/fall"))
        daemon.send_signal(signal.SIGTERM)
        daemon.communicate(timeout=60)
        changes = watcher.since(mark, "ha_check/fall")
        check(
            seen and "off->on" in changes, f"fall seen by Home Assistant as off -> on ({changes})"
        )
        reasons = [e.get("end_reason") for e in watcher.events(mark) if e["type"] == "end"]
        check(reasons[:1] == ["acknowledged"], f"its button acknowledged the fall ({reasons})")
        snaps = [t for t, _, _ in watcher.messages[mark:] if t.endswith("/snapshot")]
        check(bool(snaps), "the snapshot JPEG was published")

        # 2. kill -9 during a latched fall, restart without one: the fall is held open.
        time.sleep(12)  # past the cooldown
        mark = watcher.mark()
        phone = ha_dir / "notify-phone.txt"
        daemon = _run(_daemon_config(work, clips["fall_demo"], broker.port, loop=True))
        watcher.wait(lambda: "ON" in watcher.since(mark, "edge_hf/box1/hall/fall"))
        daemon.send_signal(signal.SIGKILL)
        daemon.communicate(timeout=60)
        time.sleep(1.0)
        after_kill, phone_at = watcher.mark(), _size(phone)
        daemon = _run(_daemon_config(work, clips["lie_down_demo"], broker.port, loop=False))
        daemon.communicate(timeout=180)
        time.sleep(3.0)
        after = watcher.events(after_kill)
        ends = [e.get("end_reason") for e in after if e["type"] == "end"]
        again = [e for e in after if e["type"] == "start"]
        check(
            ends[:1] == ["acknowledged"] and not again,
            f"the killed run's latched fall was held open by the restart, not sent again "
            f"({len(again)} starts), and ended by the button ({ends})",
        )
        seen_after = watcher.since(after_kill, "ha_check/fall")
        renotified = [x for x in _lines(phone, phone_at) if x.startswith("Score ")]
        check(
            seen_after[:1] == ["unavailable->on"] and "off->on" not in seen_after
            and not renotified,
            f"after the restart Home Assistant shows it on again, never off -> on ({seen_after}); "
            f"the example's notify-on-fall did not fire again ({renotified})",
        )  # fmt: skip

        # The next real fall is again an off -> on change.
        mark = watcher.mark()
        daemon = _run(_daemon_config(work, clips["fall_demo"], broker.port, loop=False))
        daemon.communicate(timeout=180)
        nxt = watcher.since(mark, "ha_check/fall")
        check("off->on" in nxt, f"the next fall is an off -> on change ({nxt})")

        # 4. #43 item 6: a real fall with someone else in view, the person left on the floor.
        data = Path(a.gmdcsa)
        if not (data / "S3_Fall_20.mp4").is_file() or not (data / "S1_ADL_10.mp4").is_file():
            print(f"SKIP  scenario 4 (#43 item 6): no GMDCSA24 clips in {data} (--gmdcsa)")
        else:
            _real_fall(watcher, check, work, ha_dir, data, broker.port, http_port)
    finally:
        hass.send_signal(signal.SIGTERM)
        try:
            hass.wait(60)
        except subprocess.TimeoutExpired:
            hass.kill()
        watcher.client.loop_stop()
        broker.stop()

    # 3. The registry and the log.
    def storage(name: str) -> dict:  # type: ignore[type-arg]
        path = ha_dir / ".storage" / name
        return json.loads(path.read_text())["data"] if path.exists() else {}

    registry = storage("core.entity_registry")
    ids = {e["entity_id"] for e in registry.get("entities", []) if e["platform"] == "mqtt"}
    wanted = {
        "binary_sensor.box1_hall_fall", "sensor.box1_hall_status", "event.box1_hall_fall_event",
        "button.box1_hall_acknowledge", "image.box1_hall_snapshot",
        "binary_sensor.edge_hf_box1_running", "sensor.box1_hall_down_since",
        "sensor.box1_hall_others_present",
    }  # fmt: skip
    check(wanted <= ids, f"entities in the registry (missing: {sorted(wanted - ids)})")
    by_id = {d["id"]: d for d in storage("core.device_registry").get("devices", [])}
    hall = [d for d in by_id.values() if d.get("name") == "box1 hall"]
    via = by_id.get(hall[0].get("via_device_id") or "", {}) if hall else {}
    check(via.get("name") == "edge_hf box1", f"the camera hangs under the box ({via.get('name')})")
    log = (ha_dir / "home-assistant.log").read_text(errors="replace").splitlines()
    bad = [x for x in log if ("WARNING" in x or "ERROR" in x) and "mqtt" in x.lower()]
    # Home Assistant before 2024.10 (home-assistant/core#126694) warns when a timestamp sensor is
    # set to unknown ("None"), as sensor.box1_hall_down_since is by every event but an escalation
    # (the only timestamp sensor on the attributes topic); the state is unknown all the same
    # (checked above). Said here, not counted.
    known = [x for x in bad if "Invalid state message" in x and "edge_hf/box1/hall/attributes" in x
             and '"type": "escalation"' not in x]  # fmt: skip
    if known:
        print(f"NOTE  {len(known)} x 'Invalid state message' from edge_hf/box1/hall/attributes: "
              f"Home Assistant {version} warns when sensor.box1_hall_down_since goes unknown "
              f"(fixed in 2024.10, home-assistant/core#126694)")  # fmt: skip
    bad = [x for x in bad if x not in known]
    check(not bad, f"no other MQTT warning or error in Home Assistant's log ({bad[:3]})")
    invalid = [x for x in log if "Invalid config" in x or ("ERROR" in x and "automation" in x)]
    check(not invalid, f"no invalid config, no automation error in the log ({invalid[:3]})")
    failed = [w for ok, w in results if not ok]
    print(
        f"{len(results) - len(failed)}/{len(results)} checks passed with Home Assistant {version}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
