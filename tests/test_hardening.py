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
