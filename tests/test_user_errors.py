"""Errors a user can cause (#42, "never silent"): what a user can get wrong in a config, a head
file, a camera or a replay is refused in one line naming the file, key or value, never accepted
quietly nor a traceback."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_or_fail

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str, timeout: float = 300, cap_gb: int = 0) -> subprocess.CompletedProcess[str]:
    """`edge-hf ARGS` with this worktree's code; `cap_gb`: its address space capped (a config
    read without bound then fails fast instead of filling the machine's memory; not with CUDA,
    which reserves far more address space)."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap_gb << 30, cap_gb << 30))

    return subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", *args], capture_output=True, text=True,
        timeout=timeout, preexec_fn=cap if cap_gb else None, check=False,
    )  # fmt: skip


def _one_line(proc: subprocess.CompletedProcess[str], needle: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr[-2000:]
    return lines[0]


def _noise_video(path: Path, width: int, height: int, frames: int = 60) -> Path:
    """A clip of random pixels (MJPG AVI: any size, an odd width rounded down to even)."""
    import cv2
    import numpy as np

    rng = np.random.default_rng(0)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 10.0, (width, height))
    for _ in range(frames):
        writer.write(rng.integers(0, 256, (height, width, 3), np.uint8))
    writer.release()
    return path


# ------------------------------------------------------------------ 21: /dev/zero, a FIFO


def test_check_refuses_a_device_and_a_fifo_as_config_without_reading_them(tmp_path: Path) -> None:
    line = _one_line(
        _cli("check", "--config", "/dev/zero", timeout=60, cap_gb=3), "not a regular file"
    )
    assert line.startswith("edge-hf check: error: /dev/zero: a character device")
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)  # nobody writes to it: reading it would block forever
    _one_line(
        _cli("check", "--config", str(fifo), timeout=60, cap_gb=3), f"{fifo}: a FIFO, not a regular"
    )
    big = tmp_path / "big.yaml"
    big.write_text("device_id: x\n" + "#" * 2_000_000 + "\n")
    _one_line(
        _cli("check", "--config", str(big), timeout=60, cap_gb=3), "bytes; a config is at most"
    )


# ------------------------------------------------------------------ hostile values and YAML at check


HOSTILE = [
    ("discovery wildcard", "mqtt: {enabled: true, discovery_prefix: ha/+}", "mqtt.discovery_prefix"),
    ("topic wildcard", "mqtt: {topic_prefix: 'a/#'}", "mqtt.topic_prefix"),
    ("keepalive", "mqtt: {keepalive_s: 100000000}", "mqtt.keepalive_s"),
    ("infinite open timeout", "cameras: [{name: a, source: x.mp4, open_timeout_s: .inf}]", "open_timeout_s"),
    ("huge stall timeout", "cameras: [{name: a, source: x.mp4, stall_timeout_s: 1e12}]", "stall_timeout_s"),
    ("newline in a name", 'cameras: [{name: "a\\n", source: x.mp4}]', "cameras[0].name"),
    ("newline in device_id", 'device_id: "box\\n"', "device_id"),
    ("unreadable password file", "mqtt: {enabled: true, username: u, password_file: /nonexistent/pw}", "mqtt.password_file: cannot read"),
    ("unreadable TLS CA", "mqtt: {enabled: true, tls: {ca: /nonexistent/ca.crt}}", "mqtt.tls.ca: cannot read"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "line", "needle"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_configs_are_one_line_errors_at_check(
    name: str, line: str, needle: str, tiny_onnx: Path, tmp_path: Path
) -> None:
    base = {
        "device_id": "device_id: box",
        "cameras": "cameras: [{name: a, source: x.mp4}]",
        "mqtt": "",
    }
    key = line.split(":")[0]
    base[key] = line
    path = tmp_path / "c.yaml"
    path.write_text(
        "\n".join(v for v in base.values() if v)
        + f"\nmodel: {{path: {tiny_onnx}, providers: [cpu]}}\nstate_dir: {tmp_path / 's'}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "check", "--config", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr


def _bomb(levels: int = 9) -> str:
    text = 'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
    for i in range(levels - 1):
        prev, cur = chr(97 + i), chr(98 + i)
        text += f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 10) + "]\n"
    return text


HOSTILE_YAML = [
    ("alias bomb", _bomb(), "aliases expand to more than"),
    ("5000 deep", "device_id: x\na: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than"),
    ("deep blocks", "device_id: x\n" + "".join(" " * i + f"k{i}:\n" for i in range(40)) + " " * 40 + "v: 1\n", "nested more than"),
    ("huge", "device_id: x\n" + "# padding\n" * 200_000, "a config is at most"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "text", "needle"), HOSTILE_YAML, ids=[h[0] for h in HOSTILE_YAML])
def test_hostile_yaml_is_refused_quickly_in_one_line(
    name: str, text: str, needle: str, tmp_path: Path
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "check", "--config", str(path)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr[-500:]
    assert time.monotonic() - t0 < 60


def test_a_config_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"device_id: caf\xe9\n")
    proc = subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "check", "--config", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (
        proc.returncode == 2 and "not UTF-8 text" in proc.stderr and "Traceback" not in proc.stderr
    )


def test_errors_never_echo_a_password() -> None:
    from edge_hf.core.errors import UserError
    from edge_hf.daemon.config import parse_config
    from edge_hf.daemon.sources import redact

    cams = '[{name: a, source: "rtsp://u:s3cret@h/s"}, {name: a, source: x}]'
    for text in (
        f"device_id: b\nmodel: {{path: m.onnx}}\ncameras: {cams}\n",
        'device_id: b\nmodel: {path: m.onnx}\ncameras: [{name: a, source: "rtsp://u:s3cret@h/s", enabled: false}]\n',
    ):
        with pytest.raises(UserError) as info:
            parse_config(text, "c.yaml")
        assert "s3cret" not in str(info.value) and "c.yaml:1" in str(info.value)
    assert redact("rtsp://user:p@ss@cam.local:554/s") == "rtsp://user:***@cam.local:554/s"


# ------------------------------------------------------------------ 9: hostile pose heads

SHIPPED_HEAD = ROOT / "models" / "pose-head.json"
POSE_MODEL = ROOT / "models" / "person-movenet-multipose-lightning.onnx"
DEMO_MODEL = ROOT / "models" / "fall-synth-mobilenet_v3_small-t3.onnx"


def _head_config(tmp_path: Path, head: Path, person: str = "", model: Path = POSE_MODEL) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(
        f"device_id: t\nmodel:\n  path: {DEMO_MODEL}\ncameras:\n  - name: a\n    source: x.mp4\n"
        f"state_dir: {tmp_path / 's'}\nperson:\n  model: {model}\n  head: {head}\n{person}"
    )
    return path


def _edited_head(tmp_path: Path, **changes: object) -> Path:
    d = json.loads(SHIPPED_HEAD.read_text())
    d.update(changes)
    path = tmp_path / "head.json"
    path.write_text(json.dumps(d))  # allow_nan: NaN is written as the bare word NaN
    return path


NAN_W1 = [[float("nan")] * 10, *json.loads(SHIPPED_HEAD.read_text())["w1"][1:]]
HOSTILE_HEADS = [
    ("NaN weights", {"w1": NAN_W1}, "w1 holds NaN"),
    ("NaN threshold", {"threshold": float("nan")}, "threshold holds NaN"),
    ("threshold 5", {"threshold": 5}, "threshold = 5: a probability in [0, 1]"),
    ("threshold true", {"threshold": True}, "threshold holds true"),
    ("b2 a string", {"b2": "0.1"}, 'b2 holds "0.1"'),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "changes", "needle"), HOSTILE_HEADS, ids=[h[0] for h in HOSTILE_HEADS]
)
def test_a_hostile_head_file_is_one_line_at_check(
    name: str, changes: dict[str, object], needle: str, tmp_path: Path
) -> None:
    head = _edited_head(tmp_path, **changes)
    line = _one_line(_cli("check", "--config", str(_head_config(tmp_path, head))), needle)
    assert f"person.head: {head}" in line


def test_a_head_file_nested_200000_deep_is_one_line_not_a_recursion_error(tmp_path: Path) -> None:
    head = tmp_path / "deep.json"
    head.write_text("[" * 200_000 + "]" * 200_000)
    line = _one_line(_cli("check", "--config", str(_head_config(tmp_path, head))), "person.head")
    assert "not a pose head file (nested too deep)" in line


def test_a_pose_rate_that_never_decides_is_refused() -> None:
    from edge_hf.core.errors import UserError
    from edge_hf.daemon.config import parse_config

    base = "device_id: t\nmodel: {path: m.onnx}\ncameras: [{name: a, source: x}]\n"
    for rate in ("0.0001", "0.4", "31"):
        with pytest.raises(UserError, match=rf"c.yaml:4: person.rate_hz = {rate}"):
            parse_config(base + f"person: {{model: p.onnx, rate_hz: {rate}}}\n", "c.yaml")
    assert parse_config(base + "person: {model: p.onnx, rate_hz: 0.5}\n").person.rate_hz == 0.5


def _other_pose_model(tmp_path: Path) -> Path:
    """MoveNet with another doc string: the same graph, other bytes (another model to the head)."""
    import onnx

    proto = onnx.load(str(POSE_MODEL))
    proto.doc_string = "re-exported"
    out = tmp_path / "other-pose.onnx"
    onnx.save(proto, str(out))
    return out


SHIPPED_LOOK = json.loads(SHIPPED_HEAD.read_text())["contract"].get("look") is not None


def test_check_holds_the_config_to_the_heads_contract(tmp_path: Path) -> None:
    ok = _cli("check", "--config", str(_head_config(tmp_path, SHIPPED_HEAD)))
    assert ok.returncode == 0 and "WARNING" not in ok.stderr, ok.stderr
    for person, needle in (
        ("  rate_hz: 10\n", "was fitted at 5 Hz but person.rate_hz = 10: set person.rate_hz: 5"),
        ("  side: 320\n", "was fitted at side 256 but person.side = 320: set person.side: 256"),
        ("  confirm_s: 2\n", "confirm_s = 1.0 but this config's is 2.0: set person.confirm_s: 1"),
        (
            f"  second_look: {str(not SHIPPED_LOOK).lower()}\n",
            f"but person.second_look = {str(not SHIPPED_LOOK).lower()}: set person.second_look: "
            f"{str(SHIPPED_LOOK).lower()}",
        ),
    ):
        _one_line(
            _cli("check", "--config", str(_head_config(tmp_path, SHIPPED_HEAD, person))), needle
        )
    other = _cli(
        "check",
        "--config",
        str(_head_config(tmp_path, SHIPPED_HEAD, model=_other_pose_model(tmp_path))),
    )
    _one_line(other, "was fitted on the poses of person-movenet-multipose-lightning.onnx")
    # A head saved before heads carried a contract: accepted, with one line of warning.
    d = json.loads(SHIPPED_HEAD.read_text())
    del d["contract"]
    old = tmp_path / "old-head.json"
    old.write_text(json.dumps(d, indent=1))
    proc = _cli("check", "--config", str(_head_config(tmp_path, old, "  rate_hz: 10\n")))
    warned = [x for x in proc.stderr.splitlines() if "WARNING" in x]
    assert proc.returncode == 0 and len(warned) == 1, proc.stderr
    assert f"person.head: {old} does not say which pose model" in warned[0]


# ------------------------------------------------------------------ 13: TLS files that are not


def test_tls_files_that_are_not_certificates_are_named_at_check_and_run(tmp_path: Path) -> None:
    from tests.broker import make_tls

    ca, cert, key = make_tls(tmp_path / "tls")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")

    def config(tls: str) -> Path:
        path = tmp_path / "c.yaml"
        path.write_text(
            f"device_id: t\nmodel: {{path: {DEMO_MODEL}}}\ncameras: [{{name: a, source: x.mp4}}]\n"
            f"state_dir: {tmp_path / 's'}\nmqtt: {{host: 127.0.0.1, tls: {{{tls}}}}}\n"
        )
        return path

    assert (
        _cli("check", "--config", str(config(f"ca: {ca}, cert: {cert}, key: {key}"))).returncode
        == 0
    )
    for tls, needle in (
        (f"ca: {junk}", f"mqtt.tls.ca: {junk} holds no PEM certificate"),
        (f"ca: {ca}, cert: {junk}, key: {key}", f"mqtt.tls.cert: {junk} holds no PEM certificate"),
        (
            f"ca: {ca}, cert: {cert}, key: {junk}",
            f"mqtt.tls.key: {junk} is not an unencrypted PEM key",
        ),
        (f"ca: {ca}, cert: {cert}, key: {ca.with_name('ca.key')}", "(key values mismatch)"),
        (
            f"ca: {ca}, cert: {cert}",
            f"mqtt.tls.cert: {cert} holds no private key: give mqtt.tls.key",
        ),
    ):
        _one_line(_cli("check", "--config", str(config(tls))), needle)
    # run dies on the same file, naming the key, before it starts anything
    _one_line(_cli("run", "--config", str(config(f"ca: {junk}"))), "mqtt.tls.ca: ")


# ------------------------------------------------------------------ 17: every secret masked


def test_fragment_and_unlisted_query_secrets_never_reach_doctor_nor_errors(tmp_path: Path) -> None:
    import socket

    from edge_hf.daemon.sources import redact

    assert (
        redact("https://cam/s#access_token=T0K&type=bearer")
        == "https://cam/s#access_token=***&type=***"
    )
    assert redact("http://cam/s.mjpg?jwt=eyJ.x.y&res=hd") == "http://cam/s.mjpg?jwt=***&res=***"
    assert (
        redact("rtsp://admin:p@ss@cam:554/live;auth=K3Y")
        == "rtsp://admin:***@cam:554/live;auth=***"
    )
    assert (
        redact('rtspsrc location="rtsp://a:pw@cam/s?x=1" ! appsink')
        == 'rtspsrc location="rtsp://a:***@cam/s?x=***" ! appsink'
    )
    assert redact("rtsp://admin:pa/ss@cam/live") == "rtsp://admin:***@cam/live"
    assert redact("clips/my fall#1.avi") == "clips/my fall#1.avi"  # a file name is not a URL
    with socket.socket() as sock:  # a port nothing listens on: the camera is refused at once
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    source = f"http://viewer:hunter2@127.0.0.1:{port}/video.mjpg?jwt=eyJSECRET#access_token=T0KEN"
    config = tmp_path / "c.yaml"
    config.write_text(
        f"device_id: t\nmodel: {{path: {DEMO_MODEL}}}\ncameras: [{{name: a, source: '{source}'}}]\n"
        f"state_dir: {tmp_path / 's'}\n"
    )
    proc = _cli("doctor", "--config", str(config))
    assert proc.returncode == 1 and "FAIL  camera a:" in proc.stdout, proc.stdout + proc.stderr
    for secret in ("hunter2", "eyJSECRET", "T0KEN"):
        assert secret not in proc.stdout + proc.stderr
    proc = _cli("replay", "--config", str(config), "--state-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and "is a live source" in proc.stderr.splitlines()[-1]
    assert "Traceback" not in proc.stderr and all(
        secret not in proc.stderr for secret in ("hunter2", "eyJSECRET", "T0KEN")
    )


# ------------------------------------------------------------------ 18: a file name not in UTF-8


def test_a_video_whose_name_is_not_utf8_is_one_line_at_replay_and_calibrate(tmp_path: Path) -> None:
    name = os.fsdecode(b"chute-caf\xe9.avi")  # Latin-1 bytes, as an old camera's SD card names it
    video = _noise_video(tmp_path / "v.avi", 96, 96, 20).rename(tmp_path / name)
    needle = "chute-caf\\xe9.avi: the file name is not UTF-8; rename the file"
    proc = _cli("replay", "--model", str(DEMO_MODEL), "--video", str(video), "--state-dir",
                str(tmp_path / "r"))  # fmt: skip
    assert proc.stdout == "" and needle in _one_line(proc, needle)
    config = tmp_path / "c.yaml"
    config.write_text(
        f"device_id: t\nmodel: {{path: {DEMO_MODEL}, providers: [cpu]}}\n"
        f"cameras: [{{name: a, source: x.mp4}}]\nstate_dir: {tmp_path / 's'}\n"
    )
    replay = (
        "replay",
        "--config",
        str(config),
        "--video",
        str(video),
        "--state-dir",
        str(tmp_path / "r"),
    )
    _one_line(_cli(*replay), needle)
    _one_line(
        _cli("calibrate", "--config", str(config), "--camera", "a", "--video", str(video)), needle
    )


# ------------------------------------------------------------------ 11: replay stays off live topics


def test_a_replay_never_overwrites_the_live_devices_retained_state_nor_uses_its_state_dir(
    broker: Any, tmp_path: Path
) -> None:
    import fcntl

    import paho.mqtt.publish as publish

    from edge_hf.training.synth import write_demo_clips
    from tests.test_mqtt import Subscriber

    fall = {p.stem: p for p in write_demo_clips(tmp_path / "demo")}["fall_demo"]
    live = tmp_path / "live"
    config = tmp_path / "live.yaml"
    config.write_text(
        f"device_id: box\nmodel: {{path: {DEMO_MODEL}, providers: [cpu], threshold: 0.75}}\n"
        f"cameras: [{{name: hall, source: {fall}}}]\nmqtt: {{host: 127.0.0.1, port: {broker.port}}}\n"
        f"state_dir: {live}\n"
    )
    # The live daemon's state_dir, locked as a running daemon holds it, and another daemon's.
    held = []
    for folder in (live, tmp_path / "other"):
        folder.mkdir(mode=0o700)
        held.append((folder / "edge-hf.lock").open("a+"))
        fcntl.flock(held[-1], fcntl.LOCK_EX | fcntl.LOCK_NB)
    replay = ("replay", "--config", str(config), "--publish", "--state-dir")
    _one_line(_cli(*replay, str(live)), f"--state-dir {live} is the config's state_dir")
    _one_line(_cli(*replay, str(tmp_path / "other")), "is held by a running edge-hf")
    # A fall nobody has acknowledged yet on the live camera: retained ON, the device online.
    publish.multiple(
        [{"topic": "edge_hf/box/hall/fall", "payload": "ON", "retain": True, "qos": 1},
         {"topic": "edge_hf/box/availability", "payload": "online", "retain": True, "qos": 1}],
        hostname="127.0.0.1", port=broker.port,
    )  # fmt: skip
    proc = _cli(*replay, str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "replay --publish: under edge_hf/box-replay/..." in proc.stderr
    sub = Subscriber(broker.port, "edge_hf/#", name="after")
    try:
        got = sub.wait_for(
            lambda m: (
                {"edge_hf/box/hall/fall", "edge_hf/box-replay/hall/fall"} <= {t for t, _, _ in m}
            )
        )
        retained = {t: p for t, p, r in got if r}
        assert retained["edge_hf/box/hall/fall"] == b"ON", "the live alarm is still on"
        assert retained["edge_hf/box/availability"] == b"online"
        assert retained["edge_hf/box-replay/hall/fall"] == b"OFF"  # the replay's own fall ended
    finally:
        sub.close()
    assert sorted(p.name for p in live.iterdir()) == ["edge-hf.lock"], "the live state is untouched"
    for lock in held:
        lock.close()


# ------------------------------------------------------------------ 15: degenerate cameras


@pytest.mark.parametrize(("width", "height"), [(2, 2), (1, 1), (640, 1), (62, 480)])
def test_replay_refuses_frames_too_small_to_show_anyone(
    width: int, height: int, tmp_path: Path
) -> None:
    video = _noise_video(tmp_path / "noise.avi", width, height)
    proc = _cli("--log-level", "WARNING", "replay", "--model", str(DEMO_MODEL), "--video",
                str(video), "--state-dir", str(tmp_path / "r"))  # fmt: skip
    _one_line(proc, f"{video}: {width}x{height} frames: below 64 px on the short side")
    assert proc.stdout == "", "no event on noise"


def test_a_live_camera_of_tiny_frames_is_stalled_with_its_reason_and_doctor_fails_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import threading

    from edge_hf.daemon.app import build_pipeline
    from edge_hf.daemon.config import Config
    from edge_hf.daemon.sinks import RecordingSink

    video = _noise_video(tmp_path / "noise.avi", 2, 2)
    cfg = Config.model_validate({
        "device_id": "box", "model": {"path": str(DEMO_MODEL), "providers": ["cpu"]},
        "cameras": [{"name": "hall", "source": str(video), "loop": True}],
        "state_dir": str(tmp_path / "state"),
    })  # fmt: skip
    sink = RecordingSink()
    pipeline = build_pipeline(cfg, sink, score_history=None)
    with caplog.at_level(logging.WARNING):
        pipeline.start()
        runner = threading.Thread(target=pipeline.run, kwargs={"drain_s": 1.0})
        runner.start()
        # Not a fixed sleep: until it is stalled. Its first sampled frame stalls it before any
        # window (so no event), and it stays stalled, saying nothing more, the 30 s until it
        # reopens.
        wait_or_fail(lambda: ("hall", "stalled") in sink.statuses, 60, "the camera stalled")
        pipeline.stop.set()
        runner.join(20)
    assert "stalled" in [s for _, s in sink.statuses] and not sink.events
    stalled = [r.getMessage() for r in caplog.records if "stalled" in r.getMessage()]
    assert len(stalled) == 1 and "cameras.hall: 2x2 frames: below 64 px" in stalled[0], stalled
    config = tmp_path / "c.yaml"
    config.write_text(
        f"device_id: box\nmodel: {{path: {DEMO_MODEL}, providers: [cpu]}}\n"
        f"cameras: [{{name: hall, source: {video}}}]\nstate_dir: {tmp_path / 'state'}\n"
    )
    proc = _cli("doctor", "--config", str(config))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"FAIL  camera hall: {video}: 2x2 frames: below 64 px on the short side" in proc.stdout


# ------------------------------------------------------------------ 16: calibrate --write


def test_calibrate_write_goes_through_a_link_and_keeps_owner_mode_and_comments(
    tmp_path: Path,
) -> None:
    from edge_hf.daemon.calibrate import write_threshold

    real = tmp_path / "etc-real" / "edge-hf.yaml"
    real.parent.mkdir()
    text = (
        "device_id: box\nmodel: {path: m.onnx}\nstate_dir: /var/lib/edge-hf\ncameras:\n"
        "  - name: hall  # the corridor\n    source: rtsp://u:secret@cam/1\n"
        "    threshold: 0.6  # set by hand after the May false alarm\n"
    )
    real.write_text(text)
    owner = (1234, 1234) if os.geteuid() == 0 else (os.getuid(), os.getgid())
    os.chown(real, *owner)
    real.chmod(0o640)  # camera passwords: not for other users
    link = tmp_path / "config.yaml"
    link.symlink_to(real)
    write_threshold(link, "hall", 0.42)
    assert link.is_symlink() and link.resolve() == real, "the link is still the link"
    assert real.read_text() == text.replace("threshold: 0.6  #", "threshold: 0.420  #")
    backup = real.with_name("edge-hf.yaml.bak")
    assert backup.read_text() == text
    for path in (real, backup):
        st = path.stat()
        assert (st.st_uid, st.st_gid, oct(st.st_mode & 0o7777)) == (*owner, "0o640"), path
    assert not list(real.parent.glob(".*.tmp"))
