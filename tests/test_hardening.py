"""Faults a 24/7 daemon meets: a full disk, a corrupt outbox, a capture thread that raises, paho's
network thread dying, and configs or models that must be refused in one line at `check`."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import SHARED_DATA, moving_clip, wait_or_fail

# ------------------------------------------------------------------ outbox


# ------------------------------------------------------------------ capture


# ------------------------------------------------------------------ refused at check


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


def _vtest_config(tmp_path: Path, model: Path, camera: str, state: str) -> Path:
    """A one-camera config on a generated 768x576 clip with `camera`'s extra keys."""
    video = moving_clip()
    config = tmp_path / "c.yaml"
    config.write_text(
        f"device_id: t\nmodel: {{path: {model}, providers: [cpu]}}\n"
        f"cameras: [{{name: a, source: {video}, {camera}}}]\nstate_dir: {tmp_path / state}\n"
    )
    return config


def test_a_second_daemon_on_the_same_state_dir_is_refused(tiny_onnx: Path, tmp_path: Path) -> None:
    config = _vtest_config(tmp_path, tiny_onnx, "loop: true", "state")
    cmd = [sys.executable, "-m", "edge_hf.cli", "run", "--config", str(config)]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        lock = tmp_path / "state" / "edge-hf.lock"
        while time.monotonic() < deadline and not (lock.exists() and lock.read_text().strip()):
            time.sleep(0.2)
        second = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=60)
        lines = second.stderr.strip().splitlines()
        assert second.returncode == 2 and len(lines) == 1, second.stderr
        assert f"in use by another edge-hf (pid {first.pid})" in lines[0]
    finally:
        first.terminate()
        first.communicate(timeout=30)
    assert first.returncode == 0
    again = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Not a fixed sleep: wait until it holds the lock (its pid written there) or has exited. A
    # start refused as "in use" exits before writing its pid, so this ends either way.
    wait_or_fail(
        lambda: (
            again.poll() is not None
            or (lock.exists() and lock.read_text().strip() == str(again.pid))
        ),
        60,
        "the restarted daemon to take the lock or exit",
    )
    again.terminate()
    _, err = again.communicate(timeout=30)
    assert "in use" not in err, "the lock goes with the process"


def test_replay_warns_when_a_file_stops_decoding_early(tiny_onnx: Path, tmp_path: Path) -> None:
    tree = SHARED_DATA / "capture" / "tree.avi"
    if not tree.exists():
        pytest.skip("../shared/data not present")
    odd = tmp_path / "my fall#1.avi"  # spaces and '#' in the name become the camera's name
    odd.write_bytes(tree.read_bytes())
    proc = subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "replay", "--model", str(tiny_onnx), "--video",
         str(odd), "--state-dir", str(tmp_path / "s")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "decoding stopped at frame 68 of the 444" in proc.stderr
    assert "Traceback" not in proc.stderr


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


def test_a_crop_past_the_frame_is_one_line_at_replay(tiny_onnx: Path, tmp_path: Path) -> None:
    config = _vtest_config(tmp_path, tiny_onnx, "crop: [700, 0, 200, 100]", "s")
    proc = subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "--log-level", "WARNING", "replay", "--config", str(config)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1 and "reaches past the 768x576 frame" in lines[-1], proc.stderr


# ------------------------------------------------------------------ long outages, state_dir


def test_links_and_shared_folders_in_state_dir_are_refused(tmp_path: Path) -> None:
    from edge_hf.core.errors import UserError
    from edge_hf.daemon.config import Config, ensure_state_dir

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp: anyone can plant files there
    with pytest.raises(UserError, match="writable by other users"):
        ensure_state_dir(Config.model_construct(state_dir=shared))
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "outbox.sqlite3").symlink_to(victim)
    config = tmp_path / "c.yaml"
    config.write_text(
        f"device_id: t\nmodel: {{path: {tmp_path / 'm.onnx'}}}\n"
        f"cameras: [{{name: a, source: /dev/null}}]\nstate_dir: {state}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "run", "--config", str(config)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "outbox.sqlite3 is a symbolic link" in lines[0]
    assert victim.read_text() == "precious\n", "the link's target is untouched"
    fresh = tmp_path / "fresh" / "state"
    ensure_state_dir(Config.model_construct(state_dir=fresh))
    assert fresh.stat().st_mode & 0o777 == 0o700, "a state_dir we create is ours alone"


def test_a_camera_slow_to_open_does_not_hold_up_the_others(tiny_onnx: Path, tmp_path: Path) -> None:
    import socket

    from edge_hf.daemon.app import build_pipeline
    from edge_hf.daemon.config import Config
    from edge_hf.daemon.sinks import RecordingSink

    video = moving_clip()
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers: RTSP open hangs
    port = silent.getsockname()[1]
    cfg = Config.model_validate({
        "device_id": "t",
        "model": {"path": str(tiny_onnx), "providers": ["cpu"]},
        "cameras": [  # the slow one starts first, so it would be the first to open
            {"name": "slow", "source": f"rtsp://127.0.0.1:{port}/cam", "open_timeout_s": 12},
            {"name": "good", "source": str(video), "loop": True},
        ],
        "state_dir": str(tmp_path / "state"),
    })  # fmt: skip
    pipeline = build_pipeline(cfg, RecordingSink(), score_history=None)
    pipeline.start()
    runner = threading.Thread(target=pipeline.run, kwargs={"drain_s": 1.0})
    runner.start()
    try:
        time.sleep(6)
        slow, good = pipeline.snapshot().cameras
        assert slow.state == "starting", "still trying its first open"
        assert good.windows > 0, "the healthy camera is classified meanwhile"
        assert good.dropped == 0, "and loses no frames waiting for the slow one"
    finally:
        pipeline.stop.set()
        runner.join(30)
        silent.close()


def test_a_silent_network_camera_does_not_hold_opencvs_open_lock() -> None:
    """OpenCV opens every FFmpeg source under one process-wide lock: a camera that accepts and
    never answers must be waited on outside it, or no other camera can open meanwhile."""
    import socket

    from edge_hf.daemon.sources import SourceError, make_source

    video = moving_clip()
    silent = socket.create_server(("127.0.0.1", 0))
    port = silent.getsockname()[1]
    errors: list[str] = []

    def open_slow() -> None:
        try:
            make_source(f"rtsp://u:secret@127.0.0.1:{port}/cam", open_timeout_s=4).open()
        except SourceError as exc:
            errors.append(str(exc))

    slow = threading.Thread(target=open_slow)
    slow.start()
    try:
        time.sleep(0.5)
        t0 = time.monotonic()
        good = make_source(str(video), realtime=False)
        good.open()
        opened_in = time.monotonic() - t0
        assert good.read() is not None
        good.release()
        slow.join(10)
        assert opened_in < 2.0, f"the file waited {opened_in:.1f} s for the silent camera"
        assert errors == [
            f"cannot open rtsp://u:***@127.0.0.1:{port}/cam: 127.0.0.1:{port} did not answer within 4 s"
        ]
    finally:
        silent.close()


def test_the_network_check_tells_refused_silent_and_answering_cameras_apart() -> None:
    import socket

    from edge_hf.daemon.sources import Unreachable, answers

    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with pytest.raises(Unreachable, match="port in the URL is not a number"):
        answers("rtsp://127.0.0.1:55a/x", 2, "cam")
    with pytest.raises(Unreachable, match=f"127.0.0.1:{port}: Connection refused"):
        answers(f"rtsp://127.0.0.1:{port}/x", 2, "cam")
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    seen: list[bytes] = []

    def answer(reply: bytes) -> None:
        conn, _ = server.accept()
        with conn:
            seen.append(conn.recv(256))
            conn.sendall(reply)

    try:
        for reply, ok in (
            (b"RTSP/1.0 401 Unauthorized\r\nCSeq: 1\r\n\r\n", True),
            (b"HTTP/1.1 400\r\n", False),
        ):
            t = threading.Thread(target=answer, args=(reply,))
            t.start()
            if ok:
                answers(f"rtsp://u:pw@127.0.0.1:{port}/stream", 2, "cam")  # any RTSP reply will do
            else:
                with pytest.raises(Unreachable, match="is not an RTSP server"):
                    answers(f"rtsp://127.0.0.1:{port}/stream", 2, "cam")
            t.join(5)
        assert seen[0].startswith(f"OPTIONS rtsp://127.0.0.1:{port}/stream RTSP/1.0".encode())
        assert b"pw" not in seen[0], "no credentials in the probe"
    finally:
        server.close()
