"""Where events go: one small interface, a JSON-lines sink here and the MQTT publisher later."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any, Protocol, TextIO


class AlertSink(Protocol):
    """What the pipeline needs from an alert destination."""

    def start(self) -> None:
        """Connect or open; must not block on an unreachable destination."""
        ...

    def send(self, event: dict[str, Any]) -> None:
        """Deliver one event (start/end); durable sinks persist it before returning."""
        ...

    def camera_status(self, camera: str, status: str) -> None:
        """A camera became online, stalled or offline."""
        ...

    def stats(self, payload: dict[str, Any]) -> None:
        """Periodic health numbers (MQTT: the retained stats topic)."""
        ...

    def close(self) -> None:
        """Flush and disconnect (the pipeline's last call)."""
        ...


class JsonLinesSink:
    """One JSON object per event and line, on stdout or an open text file."""

    def __init__(self, stream: TextIO | None = None, statuses: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.statuses = statuses
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        return None

    def send(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.events.append(event)
            self.stream.write(json.dumps(event, sort_keys=True) + "\n")
            self.stream.flush()

    def camera_status(self, camera: str, status: str) -> None:
        if self.statuses:
            with self._lock:
                self.stream.write(json.dumps({"camera": camera, "status": status}) + "\n")
                self.stream.flush()

    def stats(self, payload: dict[str, Any]) -> None:
        return None

    def close(self) -> None:
        self.stream.flush()


class TeeSink:
    """Every call to several sinks, in order (e.g. JSON lines on stdout and MQTT)."""

    def __init__(self, *sinks: AlertSink) -> None:
        self.sinks = sinks

    def start(self) -> None:
        for s in self.sinks:
            s.start()

    def send(self, event: dict[str, Any]) -> None:
        for s in self.sinks:
            s.send(event)

    def camera_status(self, camera: str, status: str) -> None:
        for s in self.sinks:
            s.camera_status(camera, status)

    def stats(self, payload: dict[str, Any]) -> None:
        for s in self.sinks:
            s.stats(payload)

    def close(self) -> None:
        for s in self.sinks:
            s.close()
