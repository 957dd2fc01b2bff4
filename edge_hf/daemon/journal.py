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
from pathlib import Path
from typing import Any

from edge_hf.daemon.config import NAME
from edge_hf.daemon.events import FallEvent, ModelInfo
from edge_hf.daemon.sinks import AlertSink, ForwardingSink

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
        except FileNotFoundError:
            return
        except (OSError, ValueError, RecursionError) as exc:
            log.warning("%s is unreadable (%s): starting without open events", path, exc)
            return
        # Each entry is checked here, once: a damaged one is skipped with a line in the log,
        # never a traceback at every start (a crash loop that watches no camera at all).
        for key, entry in loaded.items():
            try:
                self._open[str(key)] = _entry(entry, time.time())
            except (KeyError, TypeError, ValueError, OverflowError) as exc:
                log.warning("%s: skipping an unreadable open event %r (%s)", path, key, exc)

    def leftovers(self) -> list[FallEvent]:
        """`end` events (reason `restart`) for what an earlier run left open, oldest first."""
        now = time.time()
        out = []
        for e in sorted(self._open.values(), key=lambda e: e["started_at"]):
            out.append(
                FallEvent(
                    e["event_id"], "end", e["camera"], e["device_id"], max(now, e["started_at"]),
                    e["started_at"], 0.0, e["peak_score"], ModelInfo(**e["model"]),
                    e.get("snapshot"), "restart",
                )
            )  # fmt: skip
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


MAX_FUTURE_S = 24 * 3600.0  # a start this far ahead of the clock is damage, not a clock step


def _entry(e: Any, now: float) -> dict[str, Any]:
    """One journal entry, checked: names that make valid topics, times and scores that are
    numbers a fall can have (ValueError / TypeError / KeyError otherwise)."""
    if not isinstance(e, dict):
        raise TypeError(f"{type(e).__name__}, not an object")
    for key in ("camera", "device_id"):
        if not isinstance(e[key], str) or not NAME.fullmatch(e[key]):
            raise ValueError(f"{key} {e[key]!r} is not a camera/device name")
    if not isinstance(e["event_id"], str) or not e["event_id"]:
        raise ValueError("no event_id")
    started, peak = float(e["started_at"]), float(e["peak_score"])
    if not (0.0 <= started <= now + MAX_FUTURE_S):
        raise ValueError(f"started_at {started!r} is not a time this journal could hold")
    if not (0.0 <= peak <= 1.0):
        raise ValueError(f"peak_score {peak!r} is not a probability")
    model = e["model"]
    if not isinstance(model, dict):
        raise TypeError("model is not an object")
    info = ModelInfo(str(model["name"]), int(model["window"]), float(model["interval_ms"]))
    snapshot = e.get("snapshot")
    return {"event_id": e["event_id"], "camera": e["camera"], "device_id": e["device_id"],
            "started_at": started, "peak_score": peak, "model": info.as_dict(),
            "snapshot": snapshot if isinstance(snapshot, str) else None}  # fmt: skip


class JournalSink(ForwardingSink):
    """An AlertSink that journals open events before passing everything on to `inner`."""

    def __init__(self, inner: AlertSink, journal: OpenEvents) -> None:
        super().__init__(inner)
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
