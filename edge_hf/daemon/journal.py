"""Open fall events on disk, so that every `start` gets its `end` even across a crash.

`JournalSink` wraps the daemon's sinks: a `start` is written to `state_dir/open-events.json`
(atomically: temporary file, fsync, rename) before any sink sees it, and removed after its `end`
went out. A daemon killed mid-fall (kill -9, power cut) leaves the event there; the next start
ends it (`end_reason: restart`) before anything else is sent, so Home Assistant and every
subscriber see the fall end and the next real fall is again an off -> on change.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edge_hf.daemon.events import FallEvent, ModelInfo
from edge_hf.daemon.sinks import AlertSink
from edge_hf.daemon.status import SinkHealth, Snapshot

log = logging.getLogger(__name__)


class OpenEvents:
    """The events started and not yet ended, as `state_dir/open-events.json`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._open: dict[str, dict[str, Any]] = {}
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(loaded, dict):
                raise ValueError("not an object")
            self._open = loaded
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            log.warning("%s is unreadable (%s): starting without open events", path, exc)

    def leftovers(self) -> list[FallEvent]:
        """`end` events (reason `restart`) for what an earlier run left open, oldest first."""
        now = time.time()
        out = []
        for e in sorted(self._open.values(), key=lambda e: float(e.get("started_at", 0.0))):
            try:
                out.append(
                    FallEvent(
                        str(e["event_id"]), "end", str(e["camera"]), str(e["device_id"]), now,
                        float(e["started_at"]), 0.0, float(e["peak_score"]),
                        ModelInfo(**e["model"]), e.get("snapshot"), "restart",
                    )
                )  # fmt: skip
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("%s: skipping an unreadable open event (%s)", self.path, exc)
        return out

    def record(self, event: FallEvent) -> None:
        """Note a start, forget an end; on disk before returning."""
        if event.type == "start":
            self._open[event.event_id] = {
                "event_id": event.event_id,
                "camera": event.camera,
                "device_id": event.device_id,
                "started_at": event.started_at,
                "peak_score": event.peak_score,
                "model": event.model.as_dict(),
                "snapshot": event.snapshot,
            }
        elif self._open.pop(event.event_id, None) is None:
            return
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            with tmp.open("w", encoding="utf-8") as fh:
                json.dump(self._open, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:  # a full disk must not stop the alert itself
            log.error("%s: cannot write (%s); a crash now leaves this fall open", self.path, exc)

    def __len__(self) -> int:
        return len(self._open)


class JournalSink:
    """An AlertSink that journals open events before passing everything on to `inner`."""

    def __init__(self, inner: AlertSink, journal: OpenEvents) -> None:
        self.inner = inner
        self.journal = journal

    def start(self) -> None:
        self.inner.start()
        for end in self.journal.leftovers():
            log.warning(
                "%s: fall event %s was still open when the daemon last stopped: ending it "
                "(end_reason restart)", end.camera, end.event_id,
            )  # fmt: skip
            self.send(end)

    def send(self, event: FallEvent) -> None:
        # A start is on disk before anyone hears of it; an end leaves the journal only once the
        # sinks took it (MQTT: in its outbox). A crash in between ends the event twice at most.
        if event.type == "start":
            self.journal.record(event)
        self.inner.send(event)
        if event.type != "start":
            self.journal.record(event)

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
