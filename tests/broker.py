"""The tests' broker helpers: `edge_hf.bench.broker` plus a throw-away TLS CA."""

from __future__ import annotations

import subprocess
from pathlib import Path

from edge_hf.bench.broker import Broker, free_port

__all__ = ["Broker", "free_port", "make_tls"]


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
