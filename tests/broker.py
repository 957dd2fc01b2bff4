"""A real Mosquitto broker on 127.0.0.1 for the tests: free port, optional password and TLS."""

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


def make_tls(workdir: Path) -> tuple[Path, Path, Path]:
    """A throw-away CA and a server certificate for 127.0.0.1/localhost, with openssl."""
    workdir.mkdir(parents=True, exist_ok=True)
    ca_key, ca, key, csr, cert = (
        workdir / n for n in ("ca.key", "ca.crt", "server.key", "server.csr", "server.crt")
    )
    ext = workdir / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=edge_hf test CA",
        "-keyout", str(ca_key), "-out", str(ca))  # fmt: skip
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        str(key),
        "-out",
        str(csr),
    )
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
        "-days", "2", "-extfile", str(ext), "-out", str(cert))  # fmt: skip
    return ca, cert, key
