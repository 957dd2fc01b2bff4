"""Where events go: one small interface; JSON lines here, the MQTT publisher in `mqtt`."""

from __future__ import annotations

import logging
import queue
import sys
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol, TextIO

from edge_hf.daemon.payload import FallEvent, iso, strict_json
from edge_hf.daemon.status import SinkHealth, Snapshot

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClipNotice:
    """A fall's event clip, written (`edge_hf.daemon.clips`): what MQTT announces on
    `<camera>/clip`."""

    event_id: str
    camera: str
    device_id: str
    path: str
    mode: str  # skeleton or image
    started_at: float  # the fall's start (Unix seconds)
    from_s: float  # the clip's first and last frame, seconds from the fall's start
    to_s: float
    frames: int
    fps: float
    size_bytes: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id, "camera": self.camera, "device_id": self.device_id,
            "path": self.path, "mode": self.mode, "started_at": iso(self.started_at),
            "from_s": round(self.from_s, 1), "to_s": round(self.to_s, 1), "frames": self.frames,
            "fps": round(self.fps, 2), "bytes": self.size_bytes,
        }  # fmt: skip


class AlertSink(Protocol):
    """What the pipeline needs from an alert destination. Every call has a caller (the pipeline,
    replay, the journal's `restore`, the clip writer's `clip`), but a sink that cares about only
    some calls writes only those and takes the rest from QuietSink (no-ops) or ForwardingSink (on
    to the sink behind it); MQTT and TeeSink write all."""

    def start(self) -> None:
        """Connect or open; must not block on an unreachable destination."""
        ...

    def send(self, event: FallEvent) -> None:
        """Deliver one event (start/escalation/end); durable sinks persist it before returning."""
        ...

    def camera_status(self, camera: str, status: str) -> None:
        """A camera became online, stalled or offline."""
        ...

    def stats(self, snapshot: Snapshot) -> None:
        """Periodic health numbers (MQTT: the retained stats topic)."""
        ...

    def health(self) -> list[SinkHealth]:
        """The sink's own state for the status snapshot (none for a plain stream)."""
        ...

    def listen(self, handler: Callable[[str, str], None]) -> None:
        """Commands from outside (MQTT `<camera>/ack`) go to `handler(camera, command)`."""
        ...

    def close(self) -> None:
        """Flush and disconnect (the pipeline's last call)."""
        ...

    def restore(self, event: FallEvent) -> None:
        """An earlier run's `start`, still open (latched across a restart): take it as the
        camera's current state without sending it again."""
        ...

    def clip(self, notice: ClipNotice) -> None:
        """A fall's event clip was written (MQTT: `<camera>/clip`); from the clip writer's
        thread."""
        ...


class QuietSink:
    """No-op defaults for every AlertSink call: a sink subclasses it and writes only the calls
    it cares about (events, statuses...)."""

    def start(self) -> None:
        return None

    def send(self, event: FallEvent) -> None:
        return None

    def camera_status(self, camera: str, status: str) -> None:
        return None

    def stats(self, snapshot: Snapshot) -> None:
        return None

    def health(self) -> list[SinkHealth]:
        return []

    def listen(self, handler: Callable[[str, str], None]) -> None:
        return None

    def close(self) -> None:
        return None

    def restore(self, event: FallEvent) -> None:
        return None

    def clip(self, notice: ClipNotice) -> None:
        return None


class ForwardingSink:
    """A sink in front of another (`inner`): every call goes on to it unless overridden (the
    journal, snapshots)."""

    def __init__(self, inner: AlertSink) -> None:
        self.inner = inner

    def start(self) -> None:
        self.inner.start()

    def send(self, event: FallEvent) -> None:
        self.inner.send(event)

    def camera_status(self, camera: str, status: str) -> None:
        self.inner.camera_status(camera, status)

    def stats(self, snapshot: Snapshot) -> None:
        self.inner.stats(snapshot)

    def health(self) -> list[SinkHealth]:
        return self.inner.health()

    def listen(self, handler: Callable[[str, str], None]) -> None:
        self.inner.listen(handler)

    def close(self) -> None:
        self.inner.close()

    def restore(self, event: FallEvent) -> None:
        self.inner.restore(event)

    def clip(self, notice: ClipNotice) -> None:
        self.inner.clip(notice)


class JsonLinesSink(QuietSink):
    """One JSON object per event and line, on stdout or an open text file."""

    def __init__(self, stream: TextIO | None = None, statuses: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.statuses = statuses
        self._lock = threading.Lock()

    def send(self, event: FallEvent) -> None:
        with self._lock:
            self.stream.write(event.to_json() + "\n")
            self.stream.flush()

    def camera_status(self, camera: str, status: str) -> None:
        if self.statuses:
            with self._lock:
                self.stream.write(strict_json({"camera": camera, "status": status}) + "\n")
                self.stream.flush()

    def close(self) -> None:
        self.stream.flush()


class TeeSink:
    """Every call to several sinks, in order (e.g. JSON lines on stdout and MQTT)."""

    def __init__(self, *sinks: AlertSink) -> None:
        self.sinks = sinks

    def _each(self, call: Callable[[AlertSink], object]) -> None:
        for s in self.sinks:
            call(s)

    def start(self) -> None:
        self._each(lambda s: s.start())

    def send(self, event: FallEvent) -> None:
        self._each(lambda s: s.send(event))

    def camera_status(self, camera: str, status: str) -> None:
        self._each(lambda s: s.camera_status(camera, status))

    def stats(self, snapshot: Snapshot) -> None:
        self._each(lambda s: s.stats(snapshot))

    def health(self) -> list[SinkHealth]:
        return [h for s in self.sinks for h in s.health()]

    def listen(self, handler: Callable[[str, str], None]) -> None:
        self._each(lambda s: s.listen(handler))

    def close(self) -> None:
        self._each(lambda s: s.close())

    def restore(self, event: FallEvent) -> None:
        self._each(lambda s: s.restore(event))

    def clip(self, notice: ClipNotice) -> None:
        self._each(lambda s: s.clip(notice))


class RecordingSink(QuietSink):
    """Keeps the newest `maxlen` events in memory (bounded): for replays, calibration and tests."""

    def __init__(self, maxlen: int = 10_000) -> None:
        self.events: deque[FallEvent] = deque(maxlen=maxlen)
        self.statuses: deque[tuple[str, str]] = deque(maxlen=maxlen)  # (camera, status)
        self.clips: deque[ClipNotice] = deque(maxlen=maxlen)

    def clip(self, notice: ClipNotice) -> None:
        self.clips.append(notice)

    def send(self, event: FallEvent) -> None:
        self.events.append(event)

    def camera_status(self, camera: str, status: str) -> None:
        self.statuses.append((camera, status))


class OpenEventsLike(Protocol):
    """What AlertThread needs of the journal of open events (`journal.OpenEvents`)."""

    def record(self, event: FallEvent) -> None: ...


ALERT_QUEUE = 256  # events waiting for the alert thread (then the inference loop waits: none lost)


class AlertThread(ForwardingSink):
    """The sinks behind it (journal, snapshots, outbox, MQTT) run on one alert thread, in event
    order, so that the inference loop never waits on a disk (a JPEG, an fsync, a SQLite commit
    on an SD card) for a fall: `send` copies the event's pictures (the ring reuses its slots) and
    queues it. The queue is bounded; when full, `send` waits: an event is never dropped.
    `close` drains what waits within its budget, then closes the sinks."""

    def __init__(
        self, inner: AlertSink, drain_s: float = 10.0, journal: OpenEventsLike | None = None
    ) -> None:
        super().__init__(inner)
        self.drain_s = drain_s
        # A start is journaled here, before it is queued (one small fsync on the loop, per fall):
        # a start still waiting when the process dies is re-sent by the next start.
        self.journal = journal
        self._queue: queue.Queue[FallEvent | None] = queue.Queue(ALERT_QUEUE)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.inner.start()
        self._thread = threading.Thread(target=self._run, name="alerts", daemon=True)
        self._thread.start()

    def send(self, event: FallEvent) -> None:
        if self._thread is None:  # not started (replay, tests): in the caller's thread
            self.inner.send(event)
            return
        if self.journal is not None and event.type in ("start", "escalation"):
            self.journal.record(event)
        ev = event.evidence
        if ev is not None:
            ev = replace(
                ev,
                camera_bgr=None if ev.camera_bgr is None else ev.camera_bgr.copy(),
                model_rgb=None if ev.model_rgb is None else ev.model_rgb.copy(),
            )
            event = replace(event, evidence=ev)
        self._queue.put(event)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            try:
                self.inner.send(event)
            except Exception:  # a sink's bug must not stop the alerts after it
                log.exception("%s: the sinks failed on event %s %s", event.camera,
                              event.type, event.event_id)  # fmt: skip

    @property
    def waiting(self) -> int:
        """Events queued for the alert thread."""
        return self._queue.qsize()

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(self.drain_s)
            if self._thread.is_alive():
                log.error(
                    "shutdown: %d alerts still waiting for the sinks after %.0f s: their starts "
                    "are journaled and go out at the next start", self._queue.qsize(),
                    self.drain_s,
                )  # fmt: skip
                return  # (the sinks are still busy on the alert thread: not closed under it)
        self.inner.close()
