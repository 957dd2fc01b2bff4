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


def alerts_printed(port: int, messages: list[tuple[str, str]], device: str = "box") -> str:
    """What `edge-hf alerts` (`watch_alerts`) printed for `messages` (topic, payload) published
    QoS 1 to the broker on `port` while it watched `device`."""
    import io
    import threading
    import time

    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    from edge_hf.daemon.alerts import watch_alerts
    from edge_hf.daemon.config import MqttConfig

    out, stop = io.StringIO(), threading.Event()
    th = threading.Thread(target=watch_alerts, args=(MqttConfig(port=port), device, out, stop))
    th.start()
    time.sleep(1.0)  # (the watcher subscribes; it keeps no session, so earlier messages are lost)
    pub = mqtt.Client(CallbackAPIVersion.VERSION2)
    pub.connect("127.0.0.1", port)
    pub.loop_start()
    for topic, payload in messages:
        pub.publish(topic, payload, qos=1).wait_for_publish(5)
    time.sleep(1.0)
    pub.loop_stop()
    stop.set()
    th.join(5)
    return out.getvalue()
