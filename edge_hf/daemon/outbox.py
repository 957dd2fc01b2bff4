"""A durable outbox: every alert is on disk before it is published, and leaves only when acked.

SQLite in WAL mode with synchronous=FULL: a row that `add` returned survives `kill -9` and a power
cut. Rows come back in insertion order. The outbox is bounded: past `max_rows` the oldest rows are
dropped and counted (a box offline for months must not fill its disk), and the drop is logged.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)


class Outbox:
    """Pending messages (topic, payload, qos, retain), oldest first."""

    def __init__(self, path: Path, max_rows: int = 100_000) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.max_rows = max_rows
        self.dropped = 0
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS outbox ("
            " id INTEGER PRIMARY KEY AUTOINCREMENT,"
            " topic TEXT NOT NULL, payload BLOB NOT NULL, qos INTEGER NOT NULL,"
            " retain INTEGER NOT NULL, created REAL NOT NULL)"
        )

    def add(self, topic: str, payload: bytes, qos: int, retain: bool = False) -> int:
        """Persist a message; returns its id once it is on disk."""
        with self._lock:
            cur = self._db.execute(
                "INSERT INTO outbox (topic, payload, qos, retain, created) VALUES (?, ?, ?, ?, ?)",
                (topic, payload, qos, int(retain), time.time()),
            )
            row_id = int(cur.lastrowid or 0)
            excess = self._count() - self.max_rows
            if excess > 0:
                self._db.execute(
                    "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox ORDER BY id LIMIT ?)",
                    (excess,),
                )
                self.dropped += excess
                log.error(
                    "outbox full (%d rows): dropped the %d oldest alerts", self.max_rows, excess
                )
            return row_id

    def remove(self, row_id: int) -> None:
        """The broker acknowledged it."""
        with self._lock:
            self._db.execute("DELETE FROM outbox WHERE id = ?", (row_id,))

    def pending(self) -> list[tuple[int, str, bytes, int, bool]]:
        """All rows, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, topic, payload, qos, retain FROM outbox ORDER BY id"
            ).fetchall()
        return [(int(r[0]), str(r[1]), bytes(r[2]), int(r[3]), bool(r[4])) for r in rows]

    def _count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])

    def __len__(self) -> int:
        with self._lock:
            return self._count()

    def close(self) -> None:
        with self._lock:
            self._db.close()
