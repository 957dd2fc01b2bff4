"""Open fall events on disk, so that every `start` gets its `end` even across a crash.

`JournalSink` wraps the daemon's sinks: a `start` is written to `state_dir/open-events.json`
(atomically: temporary file, fsync, rename) before any sink sees it, marked `handed` once the
sinks took it, and removed after its `end` went out. A daemon stopped or killed mid-fall (SIGTERM,
kill -9, power cut) leaves the event there. The next start keeps a latched fall open (the
detector holds it again until acknowledged or clear_after_s; no end, the state stays ON) or ends
it (`end_reason: restart`); its `start` is sent again only if it never reached the sinks (a kill
between the journal and the MQTT outbox cannot lose the alarm itself), so Home Assistant never
sees an old fall go off -> on -> off. A fall's `escalation` ("still on the floor") is journaled
with its start the same way: re-sent at the next start only if it never reached the sinks, and
never raised a second time for a fall held open again.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from edge_hf.core.errors import shown
from edge_hf.daemon.config import is_name
from edge_hf.daemon.lograte import LogRate
from edge_hf.daemon.payload import FallEvent, strict_json
from edge_hf.daemon.sinks import AlertSink, ForwardingSink

log = logging.getLogger(__name__)


class OpenEvents:
    """The events started and not yet ended, as `state_dir/open-events.json`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._open: dict[str, FallEvent] = {}
        self._handed: set[str] = set()  # starts the sinks took (MQTT: in its outbox)
        self._escalations: dict[str, FallEvent] = {}  # open event id -> its escalation
        self._escalations_handed: set[str] = set()  # ... that the sinks took
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(loaded, dict):
                raise ValueError("not an object")
        except FileNotFoundError:
            return
        except (OSError, ValueError, RecursionError) as exc:
            log.warning("%s is unreadable (%s): starting without open events", path, exc)
            return
        # Each entry is checked here, once: a damaged one is skipped with a line in the log
        # (a few lines for a file of them), never a traceback at every start (a crash loop that
        # watches no camera at all).
        rate = LogRate(burst=10)
        for key, entry in loaded.items():
            try:
                escalation = entry.pop("escalation", None) if isinstance(entry, dict) else None
                if isinstance(entry, dict) and entry.pop("handed", False) is True:
                    self._handed.add(str(entry.get("event_id")))
                event = _checked(entry, time.time())
            except (KeyError, TypeError, ValueError, OverflowError, OSError) as exc:
                rate.log(log, logging.WARNING, "%s: skipping an unreadable open event %s (%s)",
                         path, shown(key), exc)  # fmt: skip
                continue
            if key != event.event_id:  # kept under its own id, or its end could never remove it
                rate.log(log, logging.WARNING, "%s: open event %s is filed under %s: kept under "
                         "its event_id", path, event.event_id, shown(key))  # fmt: skip
            self._open[event.event_id] = event
            if escalation is not None:
                self._load_escalation(event, escalation, rate)

    def _load_escalation(self, start: FallEvent, entry: Any, rate: LogRate) -> None:
        """An open event's journaled escalation, checked like its start (skipped if damaged: the
        start still ends)."""
        try:
            handed = isinstance(entry, dict) and entry.pop("handed", False) is True
            event = _checked(entry, time.time())
            if event.type != "escalation" or event.event_id != start.event_id:
                raise ValueError(f"a {event.type} of {event.event_id}, not this fall's escalation")
        except (KeyError, TypeError, ValueError, OverflowError, OSError) as exc:
            rate.log(log, logging.WARNING, "%s: skipping the unreadable escalation of open event "
                     "%s (%s)", self.path, start.event_id, exc)  # fmt: skip
            return
        self._escalations[start.event_id] = event
        if handed:
            self._escalations_handed.add(start.event_id)

    def leftovers(self) -> list[tuple[FallEvent, FallEvent]]:
        """(the recorded `start`, its `end` with reason `restart`) of each event an earlier run
        left open, oldest first."""
        now = time.time()
        return [
            (e, replace(e, type="end", time=max(now, e.started_at), score=0.0,
                        end_reason="restart"))
            for e in sorted(self._open.values(), key=lambda e: e.started_at)
        ]  # fmt: skip

    def record(self, event: FallEvent) -> None:
        """Note a start or its escalation, forget an end; on disk before returning."""
        if event.type == "start":
            if event.event_id in self._open:
                return  # (journaled already: by AlertThread before it queued the event)
            self._open[event.event_id] = replace(event, evidence=None, jpeg=None)
        elif event.type == "escalation":
            if event.event_id not in self._open or event.event_id in self._escalations:
                return  # (a fall not journaled, or journaled already)
            self._escalations[event.event_id] = replace(event, evidence=None, jpeg=None)
        elif self._open.pop(event.event_id, None) is None:
            return
        else:
            self._handed.discard(event.event_id)
            self._escalations.pop(event.event_id, None)
            self._escalations_handed.discard(event.event_id)
        self._write()

    def handed(self, event_id: str) -> bool:
        """Whether the sinks took this open event's start (it need not be sent again)."""
        return event_id in self._handed

    def mark_handed(self, event_id: str) -> None:
        """The sinks took the start (on disk before returning)."""
        if event_id in self._open and event_id not in self._handed:
            self._handed.add(event_id)
            self._write()

    def escalation(self, event_id: str) -> FallEvent | None:
        """The open event's journaled escalation, if it escalated."""
        return self._escalations.get(event_id)

    def escalation_handed(self, event_id: str) -> bool:
        """Whether the sinks took this open event's escalation."""
        return event_id in self._escalations_handed

    def mark_escalation_handed(self, event_id: str) -> None:
        """The sinks took the escalation (on disk before returning)."""
        if event_id in self._escalations and event_id not in self._escalations_handed:
            self._escalations_handed.add(event_id)
            self._write()

    def _write(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        entries = {
            k: {**e.as_dict(), **({"handed": True} if k in self._handed else {})}
            for k, e in self._open.items()
        }
        for k, esc in self._escalations.items():
            handed = {"handed": True} if k in self._escalations_handed else {}
            entries[k]["escalation"] = {**esc.as_dict(), **handed}
        try:
            with tmp.open("w", encoding="utf-8") as fh:
                fh.write(strict_json(entries))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:  # a full disk must not stop the alert itself
            log.error("%s: cannot write (%s); a crash now leaves this fall open", self.path, exc)

    def __len__(self) -> int:
        return len(self._open)


MAX_FUTURE_S = 24 * 3600.0  # a start this far ahead of the clock is damage, not a clock step


def _checked(e: Any, now: float) -> FallEvent:
    """One journal entry as the start event it recorded, checked: names that make valid topics,
    times and scores a fall can have (ValueError / TypeError / KeyError otherwise)."""
    # (every entry is a start; files written before entries were `as_dict` payloads lack it)
    event = FallEvent.from_dict({"type": "start", **e} if isinstance(e, dict) else e)
    for key in ("camera", "device_id"):
        if not is_name(getattr(event, key)):
            raise ValueError(f"{key} {shown(getattr(event, key))} is not a camera/device name")
    for key in ("started_at", "time"):
        t = getattr(event, key)
        if not (0.0 <= t <= now + MAX_FUTURE_S):
            raise ValueError(f"{key} {t!r} is not a time this journal could hold")
    for key in ("score", "peak_score"):  # (NaN fails every comparison)
        if not (0.0 <= getattr(event, key) <= 1.0):
            raise ValueError(f"{key} {getattr(event, key)!r} is not a probability")
    if event.model.window < 1 or not (0.0 < event.model.interval_ms < math.inf):
        raise ValueError(f"model window {event.model.window!r}, interval_ms "
                         f"{event.model.interval_ms!r}: not a model's")  # fmt: skip
    return event


class JournalSink(ForwardingSink):
    """An AlertSink that journals open events before passing everything on to `inner`.

    At start, each event an earlier run left open (a restart, a crash) is either **kept** (`keep`
    says so: a latched fall of a camera still configured, within clear_after_s; the detector
    holds it open again, no `end`, the fall state stays ON: no off -> on edge) or **ended**
    (`end_reason: restart`). Either way its `start` is sent again only if the sinks never took it
    (a crash between the journal and the outbox), so an old fall fires no automation twice."""

    def __init__(
        self, inner: AlertSink, journal: OpenEvents,
        keep: Callable[[FallEvent], bool] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(inner)
        self.journal = journal
        self.keep = keep

    def start(self) -> None:
        leftovers = [(s, e, self.keep is not None and self.keep(s))
                     for s, e in self.journal.leftovers()]  # fmt: skip
        for start, _, kept in leftovers:  # before connecting: the first states said are true
            if kept:
                self.inner.restore(start)
                escalation = self.journal.escalation(start.event_id)
                if escalation is not None and self.journal.escalation_handed(start.event_id):
                    self.inner.restore(escalation)  # (still on the floor: as it was said)
        self.inner.start()
        for start, end, kept in leftovers:
            resend = not self.journal.handed(start.event_id)
            log.warning(
                "%s: fall event %s was still open when the daemon last stopped: %s%s",
                end.camera, end.event_id,
                "still latched, kept open" if kept else "ended (end_reason restart)",
                "; its start never reached the sinks: sent again" if resend else "",
            )  # fmt: skip
            if resend:  # (already in the journal: recorded by the run that stopped)
                self.inner.send(start)
                self.journal.mark_handed(start.event_id)
            escalation = self.journal.escalation(start.event_id)
            if escalation is not None and not self.journal.escalation_handed(start.event_id):
                log.warning("%s: the escalation of fall event %s never reached the sinks: sent "
                            "again", end.camera, end.event_id)  # fmt: skip
                self.inner.send(escalation)
                self.journal.mark_escalation_handed(start.event_id)
            if not kept:
                self.send(end)

    def send(self, event: FallEvent) -> None:
        # A start is on disk before anyone hears of it, and marked handed once the sinks took
        # it (MQTT: in its outbox); an end leaves the journal only once the sinks took it. A
        # crash in between ends the event twice at most.
        if event.type in ("start", "escalation"):
            self.journal.record(event)
        self.inner.send(event)
        if event.type == "start":
            self.journal.mark_handed(event.event_id)
        elif event.type == "escalation":
            self.journal.mark_escalation_handed(event.event_id)
        else:
            self.journal.record(event)
