"""A throw-away Mosquitto broker on 127.0.0.1 (free port, optional password and TLS).

The tests and `edge-hf bench` talk to a real broker; this starts and stops one.
"""

from __future__ import annotations

import getpass
import shutil
import socket
import subprocess
import time
from pathlib import Path

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, up: bool, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                if up:
                    return
        except OSError:
            if not up:
                return
        time.sleep(0.05)
    raise TimeoutError(f"mosquitto on port {port} did not come {'up' if up else 'down'}")


class Broker:
    """One mosquitto process; `stop()`/`start()` keep the same port and settings."""

    def __init__(
        self,
        workdir: Path,
        users: dict[str, str] | None = None,
        tls: tuple[Path, Path, Path] | None = None,  # (ca, server cert, server key)
    ) -> None:
        self.workdir = workdir
        self.port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        # Persistence keeps the test subscriber's session (and its queued QoS 1 messages) across
        # a broker restart, as a production broker would.
        lines = [
            # As root mosquitto would switch to its own user, who cannot read pytest's tmp dirs.
            f"user {getpass.getuser()}",
            f"listener {self.port} 127.0.0.1",
            "persistence true",
            f"persistence_location {workdir}/",
        ]
        if users:
            pw = workdir / "passwd"
            pw.touch()
            for user, password in users.items():
                subprocess.run(["mosquitto_passwd", "-b", str(pw), user, password], check=True)
            pw.chmod(0o600)
            lines += ["allow_anonymous false", f"password_file {pw}"]
        else:
            lines.append("allow_anonymous true")
        if tls:
            ca, cert, key = tls
            lines += [f"cafile {ca}", f"certfile {cert}", f"keyfile {key}"]
        self.conf = workdir / "mosquitto.conf"
        self.conf.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Broker:
        log = open(self.workdir / "mosquitto.log", "ab")  # noqa: SIM115 - lives with the process
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdout=log, stderr=log)
        _wait_port(self.port, up=True)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None
            _wait_port(self.port, up=False)
