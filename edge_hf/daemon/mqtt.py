"""MQTT alerts that are never lost: durable outbox, availability, state, Home Assistant discovery.

Delivery contract: at least once, in order. Every event (and every fall ON/OFF state change) is
written to the SQLite outbox under `state_dir` before it is handed to paho, and deleted only in
`on_publish` for its message id, i.e. once the broker acknowledged it (QoS 1). paho holds at most
`HAND_OVER` unacknowledged alerts in memory (it re-sends them after a reconnect); past that, alerts
wait in the outbox and are handed over oldest first as acks come back, so a week-long broker outage
costs disk, not memory, and a later OFF never overtakes an earlier ON. A daemon killed (even with
SIGKILL) before the broker acked replays the outbox, oldest first, at the next start. Subscribers
de-duplicate by `event_id`. Camera status and discovery published while disconnected are not
queued: every (re)connect announces the current state, and once every waiting alert is acked,
every camera's fall state again (retained), so the broker's state is true after any outage or
crash (a retained `ON` left by a killed daemon is overwritten).

Topics (prefix `edge_hf` by default):
- `<prefix>/<device>/availability`         retained `online` / `offline` (also the last will)
- `<prefix>/<device>/stats`                retained JSON health numbers (QoS 0)
- `<prefix>/<device>/<camera>/status`      retained `online` / `slow` / `overloaded` /
                                          `degraded` / `blind` / `stalled` / `offline`
- `<prefix>/<device>/<camera>/fall`        retained `ON` / `OFF`
- `<prefix>/<device>/<camera>/event`       QoS 1 JSON event: start, escalation, end
                                          (see `event.schema.json`)
- `<prefix>/<device>/<camera>/attributes`  retained: the camera's last event (entity attributes)
- `<prefix>/<device>/<camera>/snapshot`    retained picture of the last fall (`detection.snapshot`):
                                          PNG skeleton, or JPEG with `snapshots.mode: image`
- `<prefix>/<device>/<camera>/clip`        retained JSON: the last fall's event clip (`clips`)
- `<prefix>/<device>/<camera>/ack`         subscribed: any payload acknowledges a latched fall
- `<discovery>/<component>/<device>/<object>/config`  Home Assistant discovery, retained
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.reasoncodes import ReasonCode

from edge_hf.core.errors import shown
from edge_hf.daemon.config import MqttConfig, StateFiles, is_name
from edge_hf.daemon.homeassistant import Discovery, discovery, discovery_topics
from edge_hf.daemon.lograte import LogRate, RateLimitFilter
from edge_hf.daemon.outbox import Outbox
from edge_hf.daemon.payload import FallEvent, strict_json
from edge_hf.daemon.sinks import ClipNotice
from edge_hf.daemon.status import SinkHealth, Snapshot

log = logging.getLogger(__name__)
PAHO_LOG = logging.getLogger("edge_hf.daemon.paho")
RECONNECT_MAX_S = 4  # the longest wait between two reconnect attempts
WATCH_S = 2.0  # how often the network thread is checked
MAX_SNAPSHOT_BYTES = 5_000_000  # a larger picture is not published (it stays on disk)
CONNACK_TIMEOUT_S = 5.0  # a CONNECT unanswered this long is said (a broker answers in ms)
SENDER_MAX_ERRORS = 5  # sender rounds failing in a row before the sink is marked failed
SENDER_RETRY_S = 1.0  # the wait before a failed round is tried again
HAND_OVER = 100  # most alerts held in paho's memory at once; the rest wait in the outbox
ANNOUNCE_DELAY_S = 1.0  # Home Assistant "online" bursts are answered once, this much later


def apply_auth_tls(client: mqtt.Client, cfg: MqttConfig) -> None:
    """Username/password (password from env or file) and TLS from the config."""
    if cfg.username:
        client.username_pw_set(cfg.username, cfg.password())
    if cfg.tls.ca or cfg.tls.cert:
        client.tls_set(
            ca_certs=str(cfg.tls.ca) if cfg.tls.ca else None,
            certfile=str(cfg.tls.cert) if cfg.tls.cert else None,
            keyfile=str(cfg.tls.key) if cfg.tls.key else None,
            cert_reqs=ssl.CERT_REQUIRED,
        )
        client.tls_insecure_set(cfg.tls.insecure)


class _ClosingFilter(logging.Filter):
    """paho's network thread may run one more loop after a clean `disconnect()` and log
    "Client is not connected" as an ERROR: noise at every shutdown, dropped while closing."""

    def __init__(self, sink: MqttSink) -> None:
        super().__init__()
        self.sink = sink

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.sink._closing and "Client is not connected" in record.getMessage())


class MqttSink:
    """The AlertSink that publishes to an MQTT broker through a durable outbox."""

    def __init__(
        self,
        cfg: MqttConfig,
        device_id: str,
        cameras: list[str],
        state_dir: Path,
        model_name: str = "",
        snapshot_cameras: Iterable[str] = (),
        snapshot_type: str = "image/png",  # the snapshots' (snapshots.mode: image: image/jpeg)
    ) -> None:
        self.cfg = cfg
        self.device_id = device_id
        self.cameras = cameras
        self.model_name = model_name
        self.snapshot_cameras = set(snapshot_cameras)  # they get a Home Assistant image entity
        self.ha = Discovery(
            device_id, cfg.topic_prefix, cfg.discovery_prefix, tuple(cameras),
            frozenset(self.snapshot_cameras), model_name, snapshot_type,
        )  # fmt: skip
        self.base = f"{cfg.topic_prefix}/{device_id}"
        max_bytes = int(cfg.outbox_max_mb * 1e6) if cfg.outbox_max_mb else None
        self.outbox = Outbox(state_dir / StateFiles.OUTBOX, max_bytes=max_bytes)
        self.connected = threading.Event()
        self.last_error = ""
        self.failed = ""  # why the sender gave up (the daemon then stops): nothing can be sent
        self.connect_timeouts = 0  # connections the broker took without answering CONNECT
        self._connecting_since: float | None = None  # monotonic start of the current attempt
        self._lock = threading.Lock()
        self._inflight: dict[int, int | None] = {}  # mid -> outbox row (None: not durable)
        self._acked_since_connect = False  # an ack came since the last (re)connect
        self._early: set[int] = set()  # acks that arrived before publish() returned the mid
        self._status: dict[str, str] = {}
        self._fall: dict[str, str] = {c: "OFF" for c in cameras}
        self._attributes: dict[str, str] = {}  # camera -> its last event's JSON
        self._closing = False
        self._announce_timer: threading.Timer | None = None
        # Alerts go to paho in outbox order: while `_backlog` is set, new ones wait in the outbox
        # behind older ones and the sender thread hands them over as paho's window frees up.
        self._send_lock = threading.Lock()
        self._backlog = False
        self._refill = threading.Event()
        # Every camera's fall state is re-published once the backlog drained after a connect.
        self._state_due = False
        self._command: Callable[[str, str], None] | None = None
        self._quiet_close = _ClosingFilter(self)
        # paho repeats itself ("Client is not connected" at every retry while refused): once a
        # minute, with a count; our own repeatable lines go through `_rate`.
        self._paho_rate = RateLimitFilter()
        self._rate = LogRate()
        self._announced_file = state_dir / StateFiles.ANNOUNCED
        self._removed = self._cameras_that_left()
        self.client = self._make_client()

    # ------------------------------------------------------------------ set-up

    def _make_client(self) -> mqtt.Client:
        cfg = self.cfg
        client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=cfg.client_id or f"edge-hf-{self.device_id}",
            protocol=mqtt.MQTTv5 if cfg.protocol == "5" else mqtt.MQTTv311,
        )
        apply_auth_tls(client, cfg)
        client.will_set(f"{self.base}/availability", "offline", qos=1, retain=True)
        # Backoff capped well under the keepalive: a broker back after an outage is found
        # within seconds (reconnect attempts to one broker cost nothing).
        client.reconnect_delay_set(min_delay=1, max_delay=RECONNECT_MAX_S)
        client.max_queued_messages_set(0)  # unbounded in memory; the outbox is the bound
        client.on_pre_connect = self._on_pre_connect
        client.on_connect = self._on_connect
        client.on_connect_fail = self._on_connect_fail
        client.on_disconnect = self._on_disconnect
        # An exception in one of our callbacks is logged, not raised: raised, it would end paho's
        # network thread and with it every later alert, silently.
        client.suppress_exceptions = True
        PAHO_LOG.addFilter(self._quiet_close)  # (once: a logger keeps one of each filter)
        PAHO_LOG.addFilter(self._paho_rate)
        client.enable_logger(PAHO_LOG)
        client.on_publish = self._on_publish
        client.on_message = self._on_message
        return client

    def _cameras_that_left(self) -> list[str]:
        """Cameras announced by an earlier run but no longer configured (their entities go)."""
        try:
            before = json.loads(self._announced_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            before = []
        if not isinstance(before, list):
            before = []
        # Only names a camera can have: anything else (a damaged file, "a/#", 70 000 letters)
        # would make a topic the broker or paho refuses, inside on_connect.
        left = [c for c in before if is_name(c)]
        if len(left) != len(before):
            log.warning("%s: ignoring %d entries that are not camera names",
                        self._announced_file, len(before) - len(left))  # fmt: skip
        return [c for c in left if c not in self.cameras]

    def _remember_announced(self) -> None:
        tmp = self._announced_file.with_name(self._announced_file.name + ".tmp")
        try:
            tmp.write_text(json.dumps(self.cameras), encoding="utf-8")
            os.replace(tmp, self._announced_file)
        except OSError as exc:
            log.warning("%s: cannot write (%s)", self._announced_file, exc)

    @property
    def broker(self) -> str:
        return f"{self.cfg.host}:{self.cfg.port}"

    def start(self) -> None:
        """Replay the outbox, then connect in the background (never blocks on the broker)."""
        waiting = len(self.outbox)
        if waiting:
            log.warning(
                "outbox: %d undelivered alert(s) from an earlier run, sending first", waiting
            )
            # Handed over by the sender once connected, oldest first: a message queued in paho
            # before the connection is re-sent by paho only after on_connect, and an alert
            # published meanwhile (this start's restart `end`) would overtake it.
            self._backlog = True
        self.client.connect_async(self.cfg.host, self.cfg.port, keepalive=self.cfg.keepalive_s)
        self.client.loop_start()
        threading.Thread(target=self._sender, name="mqtt-sender", daemon=True).start()

    def _held(self) -> set[int]:
        """Outbox rows paho holds (handed over, not yet acknowledged)."""
        with self._lock:
            rows = [r for r in self._inflight.values() if r is not None]
        return {self.outbox.current_id(r) for r in rows}

    def _hand_over(self) -> None:
        """Give paho the oldest waiting alerts, up to `HAND_OVER` held at once, in outbox order."""
        with self._send_lock:
            if not self._backlog or not self.connected.is_set():
                return  # offline, alerts wait in the outbox, in order (not in paho's queue)
            held = self._held()
            if held and not self._acked_since_connect:
                # paho re-sends what it held at a disconnect only after on_connect: newer alerts
                # wait for its first ack so that they cannot overtake those.
                return
            room = HAND_OVER - len(held)
            if room <= 0:
                return
            # Held rows are the oldest ones, so the first len(held) + room rows cover the window.
            waiting = [r for r in self.outbox.pending(len(held) + room) if r[0] not in held]
            for row_id, topic, payload, qos, retain in waiting:
                try:
                    self._publish(topic, payload, qos, retain, row_id)
                except ValueError as exc:  # paho refuses it: it never will take it, drop it
                    self._rate.log(log, logging.ERROR, "outbox: dropping row %d, which MQTT "
                                   "cannot carry (%s)", row_id, exc)  # fmt: skip
                    self.outbox.remove(row_id)
            if len(waiting) < room:  # nothing else waits: new alerts may go straight to paho
                self._backlog = False

    def _sender(self) -> None:
        """Hands waiting alerts to paho as acks free its window, and rebuilds the client if
        paho's network thread ever dies (nothing would be sent again). It never ends silently:
        an exception is logged and the round tried again; SENDER_MAX_ERRORS in a row mark the
        sink `failed`, and the pipeline then stops the daemon non-zero (systemd restarts it)."""
        errors = 0
        while not self._closing:
            if self._refill.wait(SENDER_RETRY_S if errors else WATCH_S):
                self._refill.clear()
            if self._closing:
                return
            try:
                self._send_round()
            except Exception as exc:  # a bug or a fault we do not know: every alert waits on us
                errors += 1
                if errors >= SENDER_MAX_ERRORS:
                    self.failed = f"the MQTT sender failed {errors} times in a row ({exc!r})"
                    log.critical("%s: no alert can be sent", self.failed, exc_info=True)
                    return
                self._rate.log(log, logging.ERROR, "MQTT sender failed (%r), %d in a row; "
                               "retrying", exc, errors, exc_info=True)  # fmt: skip
            else:
                errors = 0

    def _send_round(self) -> None:
        # paho clears `_thread` when its thread ends; only close() (with _closing) may end it.
        thread = getattr(self.client, "_thread", None)
        if thread is None or not thread.is_alive():
            self._rebuild()
        self._watch_connect()
        self._hand_over()
        self._publish_states()

    def _watch_connect(self) -> None:
        """A broker that takes the TCP connection but never answers our CONNECT (no MQTT
        listener on that port, a proxy, TLS expected, an overloaded broker) would be silent:
        paho only gives up after a keepalive, then tries again. Said once per attempt."""
        since = self._connecting_since
        if since is None or time.monotonic() - since < CONNACK_TIMEOUT_S:
            return
        if self.connected.is_set() or self.client.socket() is None:
            return  # connected, or still opening the socket (paho says if that fails)
        self._connecting_since = None
        self.connect_timeouts += 1
        self._rate.log(log, logging.ERROR, "MQTT broker %s took the connection but did not answer "
                       "CONNECT within %g s (an MQTT listener on that port? TLS? overloaded?); "
                       "alerts are kept in the outbox; retrying", self.broker,
                       CONNACK_TIMEOUT_S)  # fmt: skip

    def _publish_states(self) -> None:
        """Every camera's fall state, retained, once nothing older waits or is in flight; then
        availability `online`. In that order: Home Assistant shows an entity again with the
        last state it received, and a stale `ON` (left by a killed daemon) must be overwritten
        before, or an automation on `to: "on"` fires a false alarm."""
        with self._send_lock:
            if not self._state_due or not self.connected.is_set() or self._backlog:
                return
            if self._held():
                return  # an older ON/OFF may still be on its way: after its ack
            self._state_due = False
            for cam in self.cameras:
                self._publish(f"{self.base}/{cam}/fall", self._fall[cam], 1, True, None)
                if cam in self._attributes:
                    self._publish(
                        f"{self.base}/{cam}/attributes", self._attributes[cam], 1, True, None
                    )
            self._publish(f"{self.base}/availability", "online", 1, True, None)

    def _rebuild(self) -> None:
        self._rate.log(log, logging.ERROR, "MQTT network thread ended unexpectedly: rebuilding "
                       "the client")  # fmt: skip
        self.connected.clear()
        with self._send_lock:
            with self._lock:
                self._inflight.clear()
                self._early.clear()
            self._backlog = len(self.outbox) > 0  # all of it is re-sent, oldest first
            self.client = self._make_client()
        self.client.connect_async(self.cfg.host, self.cfg.port, keepalive=self.cfg.keepalive_s)
        self.client.loop_start()

    # ------------------------------------------------------------------ callbacks (paho's thread)

    def _on_pre_connect(self, _client: mqtt.Client, _userdata: Any) -> None:
        self._connecting_since = time.monotonic()

    def _on_connect(
        self, client: mqtt.Client, _userdata: Any, _flags: Any, reason: ReasonCode, _props: Any
    ) -> None:
        self._connecting_since = None
        if reason.is_failure:
            self.connected.clear()
            error = f"MQTT broker {self.broker} refused the connection: {reason}"
            if error != self.last_error:  # once per distinct problem, not on every retry
                log.error("%s (check mqtt.username and the password; retrying)", error)
            self.last_error = error
            return
        log.info("MQTT connected to %s", self.broker)
        self.last_error = ""
        self._acked_since_connect = False
        self.connected.set()
        # Subscriptions belong here: a reconnect starts a fresh session without them.
        client.subscribe([(f"{self.cfg.discovery_prefix}/status", 1), (f"{self.base}/+/ack", 1)])
        try:
            self._announce()
        finally:  # whatever announcing did, the fall states and `online` follow
            self._state_due = True
            self._refill.set()  # the sender re-publishes the fall states when it is safe

    def _on_connect_fail(self, _client: mqtt.Client, _userdata: Any) -> None:
        # paho calls this inside its `except OSError`: the exception says why (refused, DNS,
        # TLS verification or handshake).
        exc = sys.exc_info()[1]
        self._connecting_since = None
        error = f"MQTT broker {self.broker} unreachable: {exc or 'connection failed'}"
        if error != self.last_error:  # once per distinct problem, not on every retry
            log.error("%s (alerts are kept in the outbox; retrying)", error)
        self.last_error = error

    def _on_disconnect(
        self, _client: mqtt.Client, _userdata: Any, _flags: Any, reason: ReasonCode, _props: Any
    ) -> None:
        was = self.connected.is_set()
        self.connected.clear()
        self._connecting_since = None
        if was and not self._closing:
            log.warning(
                "MQTT disconnected from %s (%s); alerts are kept in the outbox", self.broker, reason
            )

    def _on_publish(
        self, _client: mqtt.Client, _userdata: Any, mid: int, _reason: ReasonCode, _props: Any
    ) -> None:
        with self._lock:
            if mid not in self._inflight:
                self._early.add(mid)
                return
            row = self._inflight.pop(mid)
            self._acked_since_connect = True
            # Refill in batches, when half the window is free; not here: paho holds its lock
            # while it calls us, and the sender takes ours.
            refill = (self._backlog and len(self._inflight) <= HAND_OVER // 2) or self._state_due
        if row is not None:
            self.outbox.remove(row)
        if refill:
            self._refill.set()

    def _on_message(self, _client: mqtt.Client, _userdata: Any, msg: mqtt.MQTTMessage) -> None:
        prefix = f"{self.base}/"
        if msg.topic.startswith(prefix) and msg.topic.endswith("/ack"):
            camera = msg.topic[len(prefix) : -len("/ack")]
            if camera not in self.cameras:
                line = "MQTT: acknowledgement for unknown camera %s ignored"
                self._rate.log(log, logging.WARNING, line, shown(camera))
            elif msg.retain:
                line = "MQTT: retained acknowledgement on %s ignored (stale)"
                self._rate.log(log, logging.WARNING, line, msg.topic)
            elif self._command is not None:
                self._command(camera, "ack")
            return
        if msg.topic == f"{self.cfg.discovery_prefix}/status" and msg.payload == b"online":
            # Coalesced: a burst of "online" messages gives one re-send a second at most.
            with self._lock:
                if self._announce_timer is not None and self._announce_timer.is_alive():
                    return
                self._announce_timer = threading.Timer(ANNOUNCE_DELAY_S, self._reannounce)
                self._announce_timer.daemon = True
                self._announce_timer.start()

    def _reannounce(self) -> None:
        if self.connected.is_set() and not self._closing:
            log.info("Home Assistant came online: re-sending discovery")
            self._announce()

    # ------------------------------------------------------------------ publishing

    def _publish(
        self, topic: str, payload: bytes | str, qos: int, retain: bool, row: int | None
    ) -> None:
        info = self.client.publish(topic, payload, qos=qos, retain=retain)
        if qos == 0 and info.rc != mqtt.MQTT_ERR_SUCCESS:
            return  # not queued by paho (offline): no on_publish will ever come for it
        # For QoS 1 the return code says "no connection" while offline, yet paho queued the
        # message: only on_publish tells delivery. Register the mid, unless its ack already came.
        with self._lock:
            if info.mid in self._early:
                self._early.discard(info.mid)
                acked = True
            else:
                self._inflight[info.mid] = row
                acked = False
        if acked and row is not None:
            self.outbox.remove(row)

    def _durable(self, topic: str, payload: str | bytes, retain: bool = False) -> None:
        data = payload.encode() if isinstance(payload, str) else payload
        with self._send_lock:
            row = self.outbox.add(topic, data, self.cfg.qos, retain)
            ready = self.connected.is_set() and not self._backlog
            if ready and len(self._held()) < HAND_OVER:
                self._publish(topic, data, self.cfg.qos, retain, row)
                return
            self._backlog = True  # it waits behind the older ones; the sender hands it over
        self._refill.set()

    def _state(self, topic: str, payload: str) -> None:
        """Retained QoS 1 state: sent when connected; every (re)connect re-announces it."""
        if self.connected.is_set():
            self._publish(topic, payload, 1, True, None)

    def _announce(self) -> None:
        """Discovery and camera states: re-sent on every (re)connect (availability follows the
        fall states, in `_publish_states`)."""
        for topic, payload in self.discovery().items():
            self._publish(topic, strict_json(payload), 1, True, None)
        for cam in self.cameras:
            self._publish(
                f"{self.base}/{cam}/status", self._status.get(cam, "offline"), 1, True, None
            )
        for cam in self._removed:  # an empty retained config removes an entity
            log.info("camera %r left the config: removing its Home Assistant entities", cam)
            for topic in self._discovery_topics(cam):
                self._publish(topic, b"", 1, True, None)
            for leaf in ("fall", "status", "attributes", "snapshot", "clip"):
                self._publish(f"{self.base}/{cam}/{leaf}", b"", 1, True, None)
        self._removed = []
        self._remember_announced()

    def _discovery_topics(self, camera: str) -> list[str]:
        return discovery_topics(self.ha, camera)

    def discovery(self) -> dict[str, dict[str, Any]]:
        """Every Home Assistant discovery payload, by topic (`homeassistant.discovery`)."""
        return discovery(self.ha)

    # ------------------------------------------------------------------ AlertSink

    def send(self, event: FallEvent) -> None:
        """Persist, then publish the event and the camera's fall state."""
        cam = event.camera
        if event.type == "start" and event.snapshot and cam in self._fall:
            self._send_snapshot(cam, Path(event.snapshot), event.jpeg)  # first: shown by it
        payload = event.to_json()
        self._durable(f"{self.base}/{cam}/event", payload)
        if cam not in self._fall:
            return  # a camera that left the config (an earlier run's open event ending)
        self._attributes[cam] = payload  # retained, not durable: re-said after every connect
        self._state(f"{self.base}/{cam}/attributes", payload)
        state = "OFF" if event.type == "end" else "ON"  # (an escalation: still ON)
        if self._fall.get(cam) != state:
            self._fall[cam] = state
            self._durable(f"{self.base}/{cam}/fall", state, retain=True)

    def restore(self, event: FallEvent) -> None:
        """A fall still latched from the last run (its start, then its escalation if it had
        one): the camera's state is ON (re-said as it is after every connect: the retained ON
        stays ON, no edge), nothing is sent again."""
        if event.camera in self._fall:
            self._fall[event.camera] = "ON"
            self._attributes[event.camera] = event.to_json()

    def _send_snapshot(self, camera: str, path: Path, data: bytes | None = None) -> None:
        """The picture as encoded (`data`), or read back from `path` (an earlier run's)."""
        try:
            data = path.read_bytes() if data is None else data
        except OSError as exc:
            log.warning("%s: snapshot %s not published (%s)", camera, path, exc.strerror)
            return
        if len(data) > MAX_SNAPSHOT_BYTES:
            log.warning("%s: snapshot %s is %d bytes: not published", camera, path, len(data))
            return
        self._durable(f"{self.base}/{camera}/snapshot", data, retain=True)

    def clip(self, notice: ClipNotice) -> None:
        """A fall's clip was written: its path and what it holds, retained on `<camera>/clip`."""
        if notice.camera in self._fall:
            payload = strict_json(notice.as_dict(), sort_keys=True)
            self._durable(f"{self.base}/{notice.camera}/clip", payload, retain=True)

    def listen(self, handler: Callable[[str, str], None]) -> None:
        self._command = handler

    def stats(self, snapshot: Snapshot) -> None:
        if self.connected.is_set():
            payload = strict_json(snapshot.stats_payload(), sort_keys=True)
            self._publish(f"{self.base}/stats", payload, 0, True, None)

    def health(self) -> list[SinkHealth]:
        o = self.outbox
        return [
            SinkHealth(
                "mqtt",
                self.connected.is_set(),
                len(o),
                o.dropped,
                o.degraded,
                failed=self.failed,
                connect_timeouts=self.connect_timeouts,
            )
        ]

    def camera_status(self, camera: str, status: str) -> None:
        self._status[camera] = status
        self._state(f"{self.base}/{camera}/status", status)

    def close(self, timeout_s: float = 5.0) -> None:
        """Give pending alerts `timeout_s` to be acked, say offline, disconnect."""
        deadline = time.monotonic() + timeout_s
        while self.connected.is_set() and len(self.outbox) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._closing = True
        self._refill.set()
        info = self.client.publish(f"{self.base}/availability", "offline", qos=1, retain=True)
        if self.connected.is_set():
            # If the connection drops meanwhile, the last will says offline for us.
            with contextlib.suppress(RuntimeError, ValueError):
                info.wait_for_publish(max(0.1, deadline - time.monotonic()))
        self.client.disconnect()
        self.client.loop_stop()
        PAHO_LOG.removeFilter(self._quiet_close)
        PAHO_LOG.removeFilter(self._paho_rate)
        left = len(self.outbox)
        if left:
            log.warning(
                "%d alert(s) not acknowledged by %s: kept in %s, sent at the next start",
                left, self.broker, self.outbox.path,
            )  # fmt: skip
        self.outbox.close()
