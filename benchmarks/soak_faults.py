"""`make soak-faults` (#42): the daemon with the shipped pipeline (the real model, MoveNet, the pose
head, `combined`) on two looping real clips for at least 10 minutes while faults are injected,
and every alert counted from the daemon to an MQTT subscriber.

Cameras: `fall` loops GMDCSA24 S3_Fall_01 (a real fall, latched; an acker acknowledges each
start after ACK_AFTER_S, so a fall is raised again every loop or two), `walk` loops S1_ADL_10 (a
person walking: it must raise nothing). Phases, in order (each PHASE_S unless said):

1. steady;
2. broker down: Mosquitto stopped for BROKER_DOWN_S, then started again;
3. disk full: the state_dir (a 64 MB tmpfs, root only) filled to the last byte for
   DISK_FULL_S, then freed;
4. failing pose model: a restart with a MoveNet whose graph fails on every frame of these
   cameras (it loads, and passes `check`), then a restart with the real one;
5. clock steps: the wall clock stepped +1 h, then back 10 min (`benchmarks/clockshift.py`:
   the daemon's `time.time`; the monotonic clock its timers use is left alone, as NTP leaves it);
6. SIGKILL during the run, and a restart;
7. the latch at the end: acknowledging stops, a fall is raised, the daemon is stopped (SIGTERM),
   restarted and stopped again: the alarm must still be ON, its start sent once.

Every event each run prints (its JSON lines on stdout) is matched with what the subscriber got:
**lost** (printed, never received), **faked** (received, never printed), events on the walk
camera, and the latched alarm at the end. Writes benchmarks/results/soak_faults.{json,md}; exits 1
when anything was lost or faked or the latch did not hold.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import onnx
import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from edge_hf.bench.broker import Broker

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "gmdcsa24"
PHASE_S = 100.0
BROKER_DOWN_S = 30.0
DISK_FULL_S = 30.0
ACK_AFTER_S = 4.0


def failing_pose_model(src: Path, dst: Path) -> Path:
    """MoveNet with a Reshape to 256x256 in front: it loads with a free input size (so `check`
    and the stage's load accept it) and fails on every frame that is not 256x256."""
    model = onnx.load(str(src))
    graph = model.graph
    inp = graph.input[0]
    inner = inp.name + "_fixed"
    for node in graph.node:
        node.input[:] = [inner if name == inp.name else name for name in node.input]
    shape = onnx.helper.make_tensor("fixed_shape", onnx.TensorProto.INT64, [4], [1, 256, 256, 3])
    graph.initializer.append(shape)
    graph.node.insert(0, onnx.helper.make_node("Reshape", [inp.name, "fixed_shape"], [inner]))
    onnx.save(model, str(dst))
    return dst


class Subscriber:
    """Every event and fall state of the device (persistent session, QoS 1), and the acker."""

    def __init__(self, port: int) -> None:
        self.events: list[dict[str, Any]] = []
        self.falls: list[tuple[str, str]] = []
        self.statuses: list[tuple[str, str]] = []
        self.acking = True
        self.lock = threading.Lock()
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id="soak-sub", clean_session=False
        )
        self.client.on_connect = lambda c, *_: c.subscribe("edge_hf/soak/#", qos=1)
        self.client.on_message = self._on_message
        self.client.reconnect_delay_set(1, 2)
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def _on_message(self, _c: object, _u: object, msg: mqtt.MQTTMessage) -> None:
        parts = msg.topic.split("/")
        if len(parts) != 4:
            return
        camera, leaf = parts[2], parts[3]
        with self.lock:
            if leaf == "event":
                event = json.loads(msg.payload)
                self.events.append(event)
                if event["type"] == "start" and self.acking:
                    threading.Timer(ACK_AFTER_S, self._ack, (camera,)).start()
            elif leaf == "fall" and not msg.retain:
                self.falls.append((camera, msg.payload.decode()))
            elif leaf == "status":
                self.statuses.append((camera, msg.payload.decode()))

    def _ack(self, camera: str) -> None:
        if self.acking:
            self.client.publish(f"edge_hf/soak/{camera}/ack", b"ack", qos=1)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


class Daemon:
    """One `edge-hf run` of the config; its printed events collected."""

    runs: ClassVar[int] = 0
    died: ClassVar[list[str]] = []

    def __init__(
        self, config: Path, env: dict[str, str], printed: list[dict[str, Any]], logs: Path,
        clock: Path | None = None,
    ) -> None:  # fmt: skip
        Daemon.runs += 1
        self.run = Daemon.runs
        logs.mkdir(parents=True, exist_ok=True)
        self.log = (logs / f"run-{Daemon.runs}.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, *(["-m", "edge_hf.cli"] if clock is None else
                               [str(ROOT / "benchmarks/clockshift.py"), str(clock)]),
             "run", "--config", str(config)],
            stdout=subprocess.PIPE, stderr=self.log, text=True, env=env,
        )  # fmt: skip
        self.printed = printed
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.printed.append(json.loads(line))

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal the run and wait for it; a run that had already exited is a failure."""
        if self.proc.poll() is not None:
            Daemon.died.append(f"run {self.run} exited by itself (rc {self.proc.returncode})")
            return self.proc.returncode
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=60)


def _config(work: Path, state: Path, port: int, pose: Path, head: bool = True) -> Path:
    doc = {
        "device_id": "soak",
        "model": {
            "path": str(ROOT / "models/fall-real-efficientnet_lite0-t3.onnx"),
            "providers": ["cpu"],
        },
        "cameras": [
            {"name": "fall", "source": str(SHARED / "S3_Fall_01.mp4"), "loop": True},
            {"name": "walk", "source": str(SHARED / "S1_ADL_10.mp4"), "loop": True},
        ],
        "state_dir": str(state),
        "detection": {"end_when_up": False},
        "person": {
            "model": str(pose),
            **({"head": str(ROOT / "models/pose-head.json")} if head else {}),
        },
        "mqtt": {"enabled": True, "port": port, "topic_prefix": "edge_hf"},
    }
    path = work / f"soak-{pose.stem}.yaml"
    path.write_text(json.dumps(doc))
    return path


def _wait(seconds: float, say: Callable[[str], None], what: str) -> None:
    seconds = max(0.0, seconds)
    say(f"{what}: {seconds:.0f} s")
    time.sleep(seconds)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--phase-s", type=float, default=PHASE_S)
    p.add_argument("--out", default=str(ROOT / "benchmarks/results"))
    a = p.parse_args()
    if not SHARED.is_dir():
        print(f"soak-faults: {SHARED} is missing (../shared/data/gmdcsa24)", file=sys.stderr)
        return 2
    t_start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="edge-hf-soak-"))
    state = work / "state"
    state.mkdir()
    tmpfs = (
        os.geteuid() == 0
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", str(state)], check=False
        ).returncode
        == 0
    )
    broker = Broker(work / "broker").start()
    sub = Subscriber(broker.port)
    printed: list[dict[str, Any]] = []
    notes: list[str] = []
    logs = Path(a.out) / "soak_faults_logs"  # each run's log (stderr), kept for a look
    shutil.rmtree(logs, ignore_errors=True)

    def say(text: str) -> None:
        line = f"[{time.monotonic() - t_start:6.0f} s] {text}"
        notes.append(line)
        print(line, flush=True)

    real_pose = ROOT / "models/person-movenet-multipose-lightning.onnx"
    bad_pose = failing_pose_model(real_pose, work / "failing-pose.onnx")
    good = _config(work, state, broker.port, real_pose)
    # (no head: its contract names the real model, and `check` would rightly refuse the pair)
    bad = _config(work, state, broker.port, bad_pose, head=False)
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))
    clock = work / "clock-offset"
    clock.write_text("0\n")
    ph = a.phase_s
    d = Daemon(good, env, printed, logs)
    try:
        _wait(ph, say, "1 steady")
        say("2 broker down")
        broker.stop()
        time.sleep(BROKER_DOWN_S)
        broker.start()
        _wait(ph - BROKER_DOWN_S, say, "2 broker back")
        if tmpfs:
            say("3 disk full")
            filler = state / "filler"
            subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M"],
                           capture_output=True, check=False)  # fmt: skip
            time.sleep(DISK_FULL_S)
            filler.unlink()
            _wait(ph - DISK_FULL_S, say, "3 disk free again")
        else:
            say("3 disk full: skipped (needs root to mount a tmpfs state_dir)")
        say("4 failing pose model (restart)")
        d.stop()
        d = Daemon(bad, env, printed, logs)
        _wait(ph, say, "4 pose model failing on every frame")
        d.stop()
        d = Daemon(good, env, printed, logs, clock)
        _wait(ph / 2, say, "4 real pose model again")
        clock.write_text("3600\n")
        _wait(ph / 2, say, "5 wall clock stepped +1 h")
        clock.write_text("3000\n")
        _wait(ph / 2, say, "5 wall clock stepped back 10 min")
        say("6 SIGKILL")
        d.stop(signal.SIGKILL)
        d = Daemon(good, env, printed, logs)
        _wait(ph, say, "6 restarted after SIGKILL")
        say("7 the latch at the end: acknowledging stops")
        sub.acking = False
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with sub.lock:
                starts = [e for e in sub.events if e["type"] == "start"]
                ends = {e["event_id"] for e in sub.events if e["type"] == "end"}
                open_ids = [e["event_id"] for e in starts if e["event_id"] not in ends]
            if open_ids:
                break
            time.sleep(1.0)
        time.sleep(10.0)  # (acks already on their way land; the fall stays latched)
        d.stop()
        d = Daemon(good, env, printed, logs)
        _wait(30.0, say, "7 restarted with the fall latched")
        d.stop()
        journal_file = state / "open-events.json"
        journal = json.loads(journal_file.read_text() or "{}") if journal_file.exists() else {}
    finally:
        if d.proc.poll() is None:
            d.stop(signal.SIGKILL)
        time.sleep(3.0)
        sub.close()
        broker.stop()
        if tmpfs:
            subprocess.run(["umount", str(state)], check=False)
    retained = _retained_fall(broker)
    shutil.rmtree(work, ignore_errors=True)
    return _report(printed, sub, notes, journal, retained, time.monotonic() - t_start, Path(a.out))


def _retained_fall(broker: Broker) -> str | None:
    broker.start()
    got: list[str] = []
    c = mqtt.Client(CallbackAPIVersion.VERSION2)
    c.on_connect = lambda cl, *_: cl.subscribe("edge_hf/soak/fall/fall", qos=1)
    c.on_message = lambda _c, _u, m: got.append(m.payload.decode()) if m.retain else None
    c.connect("127.0.0.1", broker.port)
    c.loop_start()
    time.sleep(1.5)
    c.loop_stop()
    c.disconnect()
    broker.stop()
    return got[-1] if got else None


def _report(
    printed: list[dict[str, Any]], sub: Subscriber, notes: list[str], journal: dict[str, Any],
    retained: str | None, seconds: float, out: Path,
) -> int:  # fmt: skip
    sent = {(e["event_id"], e["type"]) for e in printed}
    got = {(e["event_id"], e["type"]) for e in sub.events}
    lost, faked = sorted(sent - got), sorted(got - sent)
    walk = [e for e in sub.events if e["camera"] == "walk"]
    starts = [e for e in sub.events if e["type"] == "start" and e["camera"] == "fall"]
    dup_starts = len(starts) - len({e["event_id"] for e in starts})
    ended = {e["event_id"] for e in sub.events if e["type"] == "end"}
    latched = [e["event_id"] for e in starts if e["event_id"] not in ended]
    still = bool(latched) and retained == "ON" and latched[-1] in journal
    result = {
        "seconds": round(seconds),
        "events_printed": len(printed),
        "events_received": len(sub.events),
        "falls_raised": len({e["event_id"] for e in starts}),
        "lost": lost,
        "faked": faked,
        "walk_events": len(walk),
        "starts_received_twice": dup_starts,
        "latched_at_end": latched[-1:] if latched else [],
        "retained_fall_at_end": retained,
        "latch_held": still,
        "statuses_seen": sorted({s for _, s in sub.statuses}),
        "phases": notes,
    }
    result["runs_died"] = Daemon.died
    ok = not lost and not faked and not walk and still and not Daemon.died and seconds >= 600
    result["passed"] = ok
    out.mkdir(parents=True, exist_ok=True)
    (out / "soak_faults.json").write_text(json.dumps(result, indent=1))
    md = [
        f"# make soak-faults ({time.strftime('%Y-%m-%d %H:%M')}, {seconds / 60:.1f} min)", "",
        "| what | value |", "| --- | --- |",
        *(f"| {k} | {v if not isinstance(v, list) else len(v)} |"
          for k, v in result.items() if k not in ("phases", "statuses_seen")),
        f"| camera statuses seen | {', '.join(result['statuses_seen'])} |",
        "", "Phases:", "", *(f"- `{n}`" for n in notes), "",
    ]  # fmt: skip
    (out / "soak_faults.md").write_text("\n".join(md))
    print("\n".join(md))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
