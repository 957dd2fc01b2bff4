"""Repeated log lines, rate-limited: the one helper for every line that a fault can repeat.

20 000 acknowledgements for a camera that does not exist, or a broker that refuses us every few
seconds, must give a few lines that say how many more there were, not a flood that buries the
rest of the journal (and fills the disk the outbox needs).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

EVERY_S = 60.0
MAX_KEYS = 256  # distinct lines remembered, the least recent forgotten first: bounded memory


@dataclass
class _Window:
    since: float
    sent: int = 1
    held: int = 0


class LogRate:
    """At most `burst` lines per key in each `every_s` seconds; the lines held back are counted,
    and the first line let through after them says how many there were."""

    def __init__(
        self, every_s: float = EVERY_S, burst: int = 1, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.every_s, self.burst, self._clock = every_s, burst, clock
        self._keys: OrderedDict[Hashable, _Window] = OrderedDict()
        self._lock = threading.Lock()

    def allow(self, key: Hashable) -> int | None:
        """None: hold this line back (it is counted); else how many were held back before it."""
        now = self._clock()
        with self._lock:
            window = self._keys.get(key)
            if window is None or now - window.since >= self.every_s:
                self._keys[key] = _Window(now)
                self._keys.move_to_end(key)
                while len(self._keys) > MAX_KEYS:
                    self._keys.popitem(last=False)
                return window.held if window is not None else 0
            if window.sent < self.burst:
                window.sent += 1
                return 0
            window.held += 1
            return None

    def log(
        self, logger: logging.Logger, level: int, msg: str, *args: Any, key: Hashable | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        """`logger.log(level, msg, *args)` unless held back; keyed by the template `msg` (so 20 000
        different camera names are one line) unless `key` is given."""
        held = self.allow(msg if key is None else key)
        if held is None:
            return
        logger.log(level, msg + _held_note(held), *args, **kwargs)


def _held_note(held: int) -> str:
    return f" [{held} more like this held back]" if held else ""


class RateLimitFilter(logging.Filter):
    """`LogRate` as a logging filter, for a logger whose calls are not ours (paho): its warnings
    and errors, keyed by their text; debug and info lines pass."""

    def __init__(self, rate: LogRate | None = None) -> None:
        super().__init__()
        self.rate = rate or LogRate()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        text = record.getMessage()
        held = self.rate.allow(text)
        if held is None:
            return False
        if held:
            record.msg, record.args = text + _held_note(held), None
        return True
