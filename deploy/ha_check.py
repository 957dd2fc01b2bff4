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
2. kill -9 during a fall, restart on a clip without a fall: Home Assistant ends at off, the old
   event gets `end_reason: restart`; the next fall is again an off -> on change;
3. every discovered entity exists in Home Assistant's entity registry, and its log has no MQTT
   warning or error.

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
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from edge_hf.bench.broker import Broker  # noqa: E402
from edge_hf.training.synth import write_demo_clips  # noqa: E402

MODEL = ROOT / "models" / "fall-synth-mobilenet_v3_small-t3.onnx"
THRESHOLD = 0.75  # deploy/demo.yaml's

HA_CONFIG = """\
homeassistant:
  name: edge_hf check
  latitude: 52.0
  longitude: 4.0
  elevation: 0
  unit_system: metric
  time_zone: UTC
logger:
  default: warning
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
    action:
      - delay: 2
      - service: button.press
        target:
          entity_id: button.box1_hall_acknowledge
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


def _run(config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "edge_hf.cli", "--log-level", "warning", "run", "--config",
         str(config)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--hass", default=str(ROOT / ".ha-venv" / "bin" / "hass"))
    p.add_argument("--keep", help="keep the work folder here (default: a temporary one)")
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
    (ha_dir / "configuration.yaml").write_text(HA_CONFIG)
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

        # 2. kill -9 during a fall, restart without one.
        time.sleep(12)  # past the cooldown
        mark = watcher.mark()
        daemon = _run(_daemon_config(work, clips["fall_demo"], broker.port, loop=True))
        watcher.wait(lambda: "ON" in watcher.since(mark, "edge_hf/box1/hall/fall"))
        daemon.send_signal(signal.SIGKILL)
        daemon.communicate(timeout=60)
        time.sleep(1.0)
        after_kill = watcher.mark()
        daemon = _run(_daemon_config(work, clips["lie_down_demo"], broker.port, loop=False))
        daemon.communicate(timeout=180)
        time.sleep(3.0)
        ends = [e.get("end_reason") for e in watcher.events(after_kill) if e["type"] == "end"]
        check(ends[:1] == ["restart"], f"the killed run's fall was ended ({ends})")
        seen_after = watcher.since(after_kill, "ha_check/fall")
        shown = [c for c in seen_after if not c.endswith("->unavailable")]
        check(
            bool(shown)
            and shown[-1].endswith("->off")
            and not any(c.endswith("->on") for c in shown),
            f"after the restart Home Assistant shows off, with no false on ({seen_after})",
        )

        # The next real fall is again an off -> on change.
        mark = watcher.mark()
        daemon = _run(_daemon_config(work, clips["fall_demo"], broker.port, loop=False))
        daemon.communicate(timeout=180)
        nxt = watcher.since(mark, "ha_check/fall")
        check("off->on" in nxt, f"the next fall is an off -> on change ({nxt})")
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
        "binary_sensor.edge_hf_box1_running",
    }  # fmt: skip
    check(wanted <= ids, f"entities in the registry (missing: {sorted(wanted - ids)})")
    by_id = {d["id"]: d for d in storage("core.device_registry").get("devices", [])}
    hall = [d for d in by_id.values() if d.get("name") == "box1 hall"]
    via = by_id.get(hall[0].get("via_device_id") or "", {}) if hall else {}
    check(via.get("name") == "edge_hf box1", f"the camera hangs under the box ({via.get('name')})")
    log = (ha_dir / "home-assistant.log").read_text(errors="replace").splitlines()
    bad = [x for x in log if ("WARNING" in x or "ERROR" in x) and "mqtt" in x.lower()]
    check(not bad, f"no MQTT warning or error in Home Assistant's log ({bad[:3]})")
    failed = [w for ok, w in results if not ok]
    print(
        f"{len(results) - len(failed)}/{len(results)} checks passed with Home Assistant {version}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
