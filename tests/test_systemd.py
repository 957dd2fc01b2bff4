"""systemd integration: the notify protocol over a real datagram socket, and the unit's hardening."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edge_hf.daemon.sdnotify import Notifier
from edge_hf.training.synth import write_demo_clips

ROOT = Path(__file__).resolve().parents[1]


def _listen(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0.2)
    return sock


def _drain(sock: socket.socket, seconds: float) -> list[str]:
    msgs, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(TimeoutError):
            msgs.append(sock.recv(4096).decode())
    return msgs


def test_notifier_reaches_path_and_abstract_sockets(tmp_path: Path) -> None:
    sock = _listen(str(tmp_path / "notify"))
    assert Notifier(str(tmp_path / "notify")).ready("hall: online")
    assert sock.recv(4096).decode() == "READY=1\nSTATUS=hall: online"
    name = f"edge-hf-test-{os.getpid()}"
    abstract = _listen("\0" + name)
    assert Notifier("@" + name).watchdog()
    assert abstract.recv(4096).decode() == "WATCHDOG=1"
    assert not Notifier("").ready(), "outside systemd: a no-op"


def _until_ready(sock: socket.socket, timeout: float = 60.0) -> list[str]:
    """Messages up to and including READY=1 (start-up is slow on a loaded machine)."""
    msgs, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        msgs += _drain(sock, 0.5)
        if any(m.startswith("READY=1") for m in msgs):
            return msgs
    raise AssertionError(f"no READY=1 within {timeout} s: {msgs}")


def _run(config: Path, notify: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "NOTIFY_SOCKET": str(notify), "WATCHDOG_USEC": "2000000"}
    env.pop("WATCHDOG_PID", None)
    return subprocess.Popen(
        [sys.executable, "-m", "edge_hf.cli", "run", "--config", str(config)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def _config(tmp_path: Path, model: Path, source: Path) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(
        f"device_id: t\nmodel: {{path: {model}, providers: [cpu]}}\n"
        f"cameras:\n  - {{name: hall, source: {source}, loop: true}}\nstate_dir: {tmp_path}/state\n"
    )
    return path


def test_ready_watchdog_while_healthy_and_stopping_on_sigterm(
    tiny_onnx: Path, tmp_path: Path
) -> None:
    (clip,) = [p for p in write_demo_clips(tmp_path / "demo") if "fall" in p.name]
    sock = _listen(str(tmp_path / "notify"))
    proc = _run(_config(tmp_path, tiny_onnx, clip), tmp_path / "notify")
    msgs = _until_ready(sock)
    msgs += _drain(sock, 8)
    proc.send_signal(signal.SIGTERM)
    msgs += _drain(sock, 3)
    proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert msgs[0].startswith("READY=1") and "hall: online" in msgs[0]
    beats = [m for m in msgs if m == "WATCHDOG=1"]
    assert len(beats) >= 3, msgs
    assert any(m.startswith("STATUS=hall: online") for m in msgs)
    assert msgs.index("STOPPING=1") > msgs.index("WATCHDOG=1")


def test_no_watchdog_when_the_pipeline_is_stuck(tiny_onnx: Path, tmp_path: Path) -> None:
    sock = _listen(str(tmp_path / "notify"))
    proc = _run(
        _config(tmp_path, tiny_onnx, tmp_path / "camera-that-never-comes.mp4"), tmp_path / "notify"
    )
    msgs = _until_ready(sock)
    msgs += _drain(sock, 8)
    proc.terminate()
    proc.communicate(timeout=20)
    assert msgs and msgs[0].startswith("READY=1") and "hall: stalled" in msgs[0]
    assert "WATCHDOG=1" not in msgs, "no frames advance: systemd's watchdog must be allowed to fire"
    assert any(m.startswith("STATUS=") for m in msgs[1:])


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_unit_exposure_is_at_most_2() -> None:
    unit = ROOT / "systemd" / "edge-hf.service"
    proc = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--no-pager", str(unit)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    match = re.search(r"Overall exposure level for edge-hf.service: (\d+\.\d+)", proc.stdout)
    assert match, proc.stdout[-500:] + proc.stderr[-500:]
    assert float(match.group(1)) <= 2.0
    text = unit.read_text()
    for needle in ("Type=notify", "WatchdogSec=", "LoadCredential=mqtt-password", "DevicePolicy=closed",
                   "ProtectSystem=strict", "NoNewPrivileges=yes", "SystemCallFilter=@system-service",
                   "StateDirectory=edge-hf", "CacheDirectory=edge-hf", "Restart=on-failure"):  # fmt: skip
        assert needle in text, needle
