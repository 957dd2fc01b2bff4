"""The tests' broker helpers: `edge_hf.bench.broker` plus a throw-away TLS CA."""

from __future__ import annotations

import subprocess
from pathlib import Path

from edge_hf.bench.broker import Broker, free_port

__all__ = ["Broker", "free_port", "make_tls", "publish_sentinel", "refusals"]


def publish_sentinel(port: int, topic: str) -> None:
    """Publish one QoS 1 marker on `topic` to the broker on `port`, acknowledged: a test that
    checks that nothing arrives waits for this to arrive instead of sleeping long enough."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    pub = mqtt.Client(CallbackAPIVersion.VERSION2)
    pub.connect("127.0.0.1", port)
    pub.loop_start()
    pub.publish(topic, b"sentinel", qos=1).wait_for_publish(10)
    pub.loop_stop()
    pub.disconnect()


def refusals(broker: Broker) -> int:
    """How many connections `broker` has refused for a wrong user name or password, by its log
    (kept across a stop and start): what a test that waits for a client's retries counts."""
    log = broker.workdir / "mosquitto.log"
    return log.read_text(errors="replace").count("not authorised") if log.exists() else 0


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
    from tests.conftest import wait_or_fail  # (here: conftest imports this module)

    out, stop = io.StringIO(), threading.Event()
    th = threading.Thread(target=watch_alerts, args=(MqttConfig(port=port), device, out, stop))
    th.start()
    pub = mqtt.Client(CallbackAPIVersion.VERSION2)
    pub.connect("127.0.0.1", port)
    pub.loop_start()
    # Markers on the availability topic, which the watcher prints as "<topic> <payload>": it keeps
    # no session, so a message sent before it has subscribed is lost. A probe it has printed says
    # it is subscribed; a sentinel sent after `messages` (same client, QoS 1: in order) says every
    # one of them has been handled once it is printed. Both are cut from what is returned.
    marker = f"edge_hf/{device}/availability"
    probe, sentinel = "edge-hf-test-probe", "edge-hf-test-sentinel"
    deadline = time.monotonic() + 20
    while probe not in out.getvalue():
        assert time.monotonic() < deadline, "waited 20 s for the alerts watcher to subscribe"
        pub.publish(marker, probe, qos=1).wait_for_publish(5)
        time.sleep(0.2)
    for topic, payload in messages:
        pub.publish(topic, payload, qos=1).wait_for_publish(5)
    pub.publish(marker, sentinel, qos=1).wait_for_publish(5)
    wait_or_fail(lambda: sentinel in out.getvalue(), 20, "the alerts watcher to print them")
    pub.loop_stop()
    stop.set()
    th.join(5)
    lines = out.getvalue().splitlines(keepends=True)
    return "".join(x for x in lines if probe not in x and sentinel not in x)
