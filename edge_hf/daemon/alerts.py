"""`edge-hf alerts`: a terminal subscriber that prints each fall alert once, and state changes.

What a nurse-call bridge or phone notifier has to do, in a few lines: subscribe in on_connect (so a
reconnect subscribes again), and drop repeats by `event_id` (delivery is at least once).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.reasoncodes import ReasonCode

from edge_hf.daemon.config import MqttConfig
from edge_hf.daemon.mqtt import apply_auth_tls

SEEN_MAX = 10_000  # event keys remembered for de-duplication


_EVENT_KEYS = ("event_id", "type", "camera", "device_id", "time")


def _is_event(event: Any) -> bool:
    """A fall event as the daemon sends it (edge_hf/event.schema.json's required keys)."""
    return (
        isinstance(event, dict)
        and all(isinstance(event.get(k), str) and event[k] for k in _EVENT_KEYS)
        and event["type"] in ("start", "escalation", "end")
    )


def printable(text: str) -> str:
    """`text` safe for a terminal: control characters (escape sequences, BEL, bidi overrides)
    from a payload are shown escaped (\\x1b), never sent to the terminal to act on."""
    return "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text
    )


def watch_alerts(
    cfg: MqttConfig, device_id: str = "+", out: Any = None, stop: threading.Event | None = None
) -> int:
    """`edge-hf alerts`: print each event once (de-duplicated by event_id) and state changes."""
    import sys

    out = out or sys.stdout
    stop = stop or threading.Event()
    seen: OrderedDict[str, None] = OrderedDict()  # the newest SEEN_MAX keys: bounded
    prefix = f"{cfg.topic_prefix}/{device_id}"

    def on_connect(c: mqtt.Client, _u: Any, _f: Any, reason: ReasonCode, _p: Any) -> None:
        if reason.is_failure:
            print(
                printable(f"MQTT broker {cfg.host}:{cfg.port} refused the connection: {reason}"),
                file=sys.stderr,
            )
            return
        c.subscribe(
            [(f"{prefix}/+/event", 1), (f"{prefix}/availability", 1), (f"{prefix}/+/status", 1)]
        )

    def say(line: str) -> None:  # anything from a payload or topic goes through here
        print(printable(line), file=out, flush=True)

    def on_message(_c: mqtt.Client, _u: Any, msg: mqtt.MQTTMessage) -> None:
        text = msg.payload.decode(errors="replace")
        if msg.topic.endswith("/event"):
            try:
                event = json.loads(text)
            except json.JSONDecodeError:
                say(f"{msg.topic}: not JSON: {text[:80]}")
                return
            if not _is_event(event):
                say(f"{msg.topic}: not an edge_hf event: {text[:80]}")
                return
            key = f"{event.get('event_id')}/{event.get('type')}"
            if key in seen:
                return  # at-least-once delivery: a repeat of something already shown
            seen[key] = None
            if len(seen) > SEEN_MAX:
                seen.popitem(last=False)
            kind = {"start": "FALL", "escalation": "ON FLOOR"}.get(event["type"], "fall over")
            where = f"{event.get('device_id')}/{event.get('camera')}"
            down = f" down {event.get('down_s')} s" if event["type"] == "escalation" else ""
            say(
                f"{event.get('time')} {kind:9s} {where} score {event.get('score')} "
                f"peak {event.get('peak_score')}{down} id {event.get('event_id')}"
            )
        else:
            say(f"{msg.topic} {text}")

    def on_subscribe(_c: mqtt.Client, _u: Any, _mid: int, _codes: Any, _p: Any) -> None:
        print(f"subscribed to {prefix}/...", file=sys.stderr, flush=True)

    client = mqtt.Client(CallbackAPIVersion.VERSION2)
    apply_auth_tls(client, cfg)
    client.on_connect = on_connect
    client.on_subscribe = on_subscribe
    client.on_message = on_message
    client.connect_async(cfg.host, cfg.port)
    client.loop_start()
    try:
        while not stop.wait(0.5):
            pass
    finally:
        client.disconnect()
        client.loop_stop()
    return 0
