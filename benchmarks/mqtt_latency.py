"""Time from `MqttSink.send(event)` (outbox write included) to a subscriber, on loopback.

    python benchmarks/mqtt_latency.py [--events 200]

Starts its own Mosquitto on a free 127.0.0.1 port; prints p50/p90/p99 in milliseconds and JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from edge_hf.bench.broker import Broker
from edge_hf.daemon.config import MqttConfig
from edge_hf.daemon.mqtt import MqttSink


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--events", type=int, default=200)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = Broker(Path(tmp) / "broker").start()
        got: dict[str, float] = {}
        done = threading.Event()

        def on_message(_c: object, _u: object, msg: mqtt.MQTTMessage) -> None:
            got[json.loads(msg.payload)["event_id"]] = time.perf_counter()
            if len(got) >= a.events:
                done.set()

        sub = mqtt.Client(CallbackAPIVersion.VERSION2)
        sub.on_connect = lambda c, *_: c.subscribe("edge_hf/+/+/event", qos=1)
        sub.on_message = on_message
        sub.connect("127.0.0.1", broker.port)
        sub.loop_start()
        sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "bench", ["cam"], Path(tmp))
        sink.start()
        sink.connected.wait(10)
        time.sleep(0.5)
        sent: dict[str, float] = {}
        for i in range(a.events):
            event = {"event_id": f"e{i}", "type": "start", "camera": "cam", "device_id": "bench"}
            sent[event["event_id"]] = time.perf_counter()
            sink.send(event)
            time.sleep(0.02)  # events are rare; measure each on its own, not a burst
        done.wait(30)
        sink.close()
        sub.loop_stop()
        broker.stop()
    ms = sorted((got[k] - sent[k]) * 1000 for k in sent if k in got)
    q = statistics.quantiles(ms, n=100)
    result = {
        "events": a.events,
        "received": len(ms),
        "p50_ms": q[49],
        "p90_ms": q[89],
        "p99_ms": q[98],
    }
    print(
        f"event -> subscriber over loopback: p50 {q[49]:.2f} ms, p90 {q[89]:.2f} ms, "
        f"p99 {q[98]:.2f} ms ({len(ms)}/{a.events} received)"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
