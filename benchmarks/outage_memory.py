"""Memory of a long broker outage: alerts published while Mosquitto is down, then drained.

    python benchmarks/outage_memory.py [--events 20000]     # or: make bench-outage

Starts its own Mosquitto on a free 127.0.0.1 port, connects an `MqttSink`, stops the broker,
sends `--events` alternating start/end events (each also flips the retained fall state), and
reports the process's RSS growth, how many messages paho holds in memory and how many wait in the
outbox; then restarts the broker and times the drain. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

from edge_hf.bench.broker import Broker
from edge_hf.daemon.config import MqttConfig
from edge_hf.daemon.mqtt import MqttSink
from edge_hf.daemon.payload import FallEvent, ModelInfo


def _rss_mib() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 / 2**20


def _event(i: int) -> FallEvent:
    kind = "start" if i % 2 == 0 else "end"
    return FallEvent(
        f"00000000-0000-4000-8000-{i:012d}", kind, "hall", "box", 1767225600.0 + i, 1767225600.0,
        0.9, 0.9, ModelInfo("m.onnx", 3, 100.0), end_reason="recovered" if kind == "end" else None,
    )  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--events", type=int, default=20_000)
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="edge-hf-outage-"))
    broker = Broker(work / "broker").start()
    sink = MqttSink(MqttConfig(enabled=True, port=broker.port), "box", ["hall"], work / "state")
    sink.start()
    if not sink.connected.wait(10):
        sys.exit("outage_memory: could not connect to the benchmark's own Mosquitto")
    broker.stop()
    time.sleep(1)
    gc.collect()
    before = _rss_mib()
    t0 = time.perf_counter()
    for i in range(a.events):
        sink.send(_event(i))
    gc.collect()
    result = {
        "events": a.events,
        "send_s": round(time.perf_counter() - t0, 1),
        "rss_growth_mib": round(_rss_mib() - before, 1),
        "paho_queue": len(sink.client._out_messages),
        "outbox_rows": len(sink.outbox),
    }
    broker.start()
    t0 = time.perf_counter()
    while len(sink.outbox) and time.perf_counter() - t0 < 600:
        time.sleep(0.2)
    result["drain_s"] = round(time.perf_counter() - t0, 1)
    result["left"] = len(sink.outbox)
    sink.close()
    broker.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
