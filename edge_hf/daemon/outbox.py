"""A durable outbox: every alert is on disk before it is published, and leaves only when acked.

SQLite in WAL mode with synchronous=FULL: a row that `add` returned survives `kill -9` and a power
cut. Rows come back in insertion order. The outbox is bounded: past `max_rows` the oldest rows are
dropped and counted (a box offline for months must not fill its disk), and the drops are logged
once a minute at most, with their count.

A write that fails (disk full, I/O error) never loses the alert and never raises: the message is
kept in memory (negative ids), the sink publishes it anyway, every later `add` first retries
writing the kept ones, and the failure is logged once per episode (`degraded` while it lasts). A
row that is acked while the disk refuses to delete it is remembered and never sent again.

A file that is not a database is moved aside (`outbox.sqlite3.corrupt-<time>`, kept for
inspection) and a new one started. A disk that refuses writes at start-up (full: space or inodes;
SQLite then cannot even create its side files) is not damage: the file is opened read-only, what
waits in it is sent, new alerts are held in memory, and all of it is written back once the disk
takes writes again.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from edge_hf.core.errors import shown
from edge_hf.daemon.config import is_topic
from edge_hf.daemon.lograte import LogRate

log = logging.getLogger(__name__)
MAX_PAYLOAD = 268_435_455  # bytes: MQTT's limit on a message (paho raises past it)
DROP_LOG_EVERY_S = 60.0  # one "dropped" line per minute at most, however many alerts go

Row = tuple[int, str, bytes, int, bool]
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS outbox ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " topic TEXT NOT NULL, payload BLOB NOT NULL, qos INTEGER NOT NULL,"
    " retain INTEGER NOT NULL, created REAL NOT NULL)"
)


class Outbox:
    """Pending messages (topic, payload, qos, retain), oldest first."""

    def __init__(self, path: Path, max_rows: int = 100_000, max_bytes: int | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.max_rows = max_rows
        self.dropped = 0
        self._dropped_logged = 0  # `dropped` as of the last log line
        self._drop_rate = LogRate(DROP_LOG_EVERY_S)
        self._damage_rate = LogRate(burst=10)  # a file of damaged rows is a few lines
        self.degraded = False  # writes are failing: alerts are held in memory
        self._memory: dict[int, tuple[str, bytes, int, bool]] = {}  # id < 0 -> message
        self._next_memory_id = -1
        # memory id -> disk id of messages moved to disk (an ack may still name the memory id)
        self._moved: dict[int, int] = {}
        self._lock = threading.Lock()
        self._max_bytes = max_bytes
        self._undeleted: set[int] = set()  # acked rows the disk could not delete yet
        self._read_only = False  # the disk refused writes at start-up: the file is only read
        self._db = self._connect()

    def _connect(self) -> sqlite3.Connection:
        """The file opened for writing; a damaged one moved aside and a new one started; on a
        disk that refuses writes, the file opened read-only (`degraded`)."""
        try:
            return self._open()
        except sqlite3.OperationalError as exc:  # full, read-only, I/O: the disk, not the file
            refused = exc
        except sqlite3.DatabaseError as exc:  # not a database, malformed
            self._move_aside(exc)
            try:
                return self._open()
            except sqlite3.OperationalError as again:
                refused = again
        db = self._open_read_only()
        self._read_only = self.degraded = True
        waiting = int(db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])
        log.error(
            "outbox %s: cannot write (%s); not damage: read-only, the %d alert(s) waiting in it "
            "are sent, new alerts are kept in memory and published directly until the disk "
            "takes writes again (a restart meanwhile would lose those)",
            self.path, refused, waiting,
        )  # fmt: skip
        return db

    def _move_aside(self, exc: sqlite3.DatabaseError) -> None:
        path = self.path
        aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}")
        for suffix in ("", "-wal", "-shm"):
            old = Path(str(path) + suffix)
            if old.exists():
                old.rename(Path(str(aside) + suffix))
        log.warning(
            "outbox %s is unreadable (%s): moved aside to %s, starting a new one; alerts "
            "waiting in it (if any) were not sent",
            path, exc, aside,
        )  # fmt: skip

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            if self._max_bytes is not None:  # a size bound on disk, besides the row bound
                page = int(db.execute("PRAGMA page_size").fetchone()[0])
                db.execute(f"PRAGMA max_page_count={max(8, self._max_bytes // page)}")
            db.execute(SCHEMA)
            db.execute("SELECT COUNT(*) FROM outbox").fetchone()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def _open_read_only(self) -> sqlite3.Connection:
        """The file for reading alone. `mode=ro` still needs SQLite's side files; after a clean
        stop (no WAL to read) `immutable` reads the file with none. Failing both, an empty
        table in memory: the waiting alerts are read once the disk takes writes again."""
        wal = Path(f"{self.path}-wal")
        try:
            in_wal = wal.exists() and wal.stat().st_size > 0
        except OSError:
            in_wal = True  # unknown: do not risk missing its alerts
        uri = self.path.absolute().as_uri()
        for query in ("?mode=ro", "?mode=ro&immutable=1"):
            if query.endswith("immutable=1") and in_wal:
                break  # immutable ignores the WAL: the alerts in it would be missed
            try:
                db = sqlite3.connect(uri + query, uri=True, check_same_thread=False,
                                     isolation_level=None)  # fmt: skip
            except sqlite3.Error:
                continue
            try:
                db.execute("SELECT COUNT(*) FROM outbox").fetchone()
                return db
            except sqlite3.Error:
                db.close()
        log.error("outbox %s: cannot read it either: its alerts wait until the disk has room",
                  self.path)  # fmt: skip
        db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        db.execute(SCHEMA)
        return db

    def set_max_bytes(self, max_bytes: int) -> None:
        """Change the size bound (tests: the disk "gets space back")."""
        with self._lock:
            self._max_bytes = max_bytes
            page = int(self._db.execute("PRAGMA page_size").fetchone()[0])
            self._db.execute(f"PRAGMA max_page_count={max(8, max_bytes // page)}")

    def add(self, topic: str, payload: bytes, qos: int, retain: bool = False) -> int:
        """Persist a message; returns its id (negative: held in memory, the disk refused it)."""
        with self._lock:
            if self.degraded:
                self._write_back()
            if not self.degraded:
                try:
                    return self._insert(topic, payload, qos, retain)
                except sqlite3.Error as exc:
                    self._degrade(exc)
            row_id = self._next_memory_id
            self._next_memory_id -= 1
            self._memory[row_id] = (topic, payload, qos, retain)
            if len(self._memory) > self.max_rows:  # bounded in memory too: drop the oldest
                del self._memory[max(self._memory)]
                self.dropped += 1
                self._log_drops()
            return row_id

    def _insert(self, topic: str, payload: bytes, qos: int, retain: bool) -> int:
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
            self._log_drops()
        return row_id

    def _log_drops(self) -> None:
        if self._drop_rate.allow("dropped") is None:
            return  # (this line counts the drops itself)
        log.error(
            "outbox full (%d alerts): dropped the %d oldest since the last report (%d in all); "
            "the broker has not acknowledged anything for a long time",
            self.max_rows, self.dropped - self._dropped_logged, self.dropped,
        )  # fmt: skip
        self._dropped_logged = self.dropped

    def _degrade(self, exc: sqlite3.Error) -> None:
        if not self.degraded:
            log.error(
                "outbox %s: cannot write (%s); alerts are kept in memory and published directly "
                "until it can (a restart meanwhile would lose the unacknowledged ones)",
                self.path, exc,
            )  # fmt: skip
        self.degraded = True

    def _write_back(self) -> None:
        """Once the disk takes writes again: the file reopened for writing (if it was read-only),
        the rows acked meanwhile deleted, the messages held in memory written, oldest first."""
        if self._read_only:
            try:
                db = self._open()
            except sqlite3.Error as exc:
                self._degrade(exc)
                return
            self._db.close()
            self._db, self._read_only = db, False
        if not all(self._delete(row_id) for row_id in sorted(self._undeleted)):
            return
        for row_id in sorted(self._memory, reverse=True):  # -1 is the oldest
            try:
                disk_id = self._insert(*self._memory[row_id])
            except sqlite3.Error as exc:
                self._degrade(exc)
                return
            del self._memory[row_id]
            self._moved[row_id] = disk_id
        self.degraded = False
        log.warning("outbox %s: writing again; alerts held in memory are on disk", self.path)

    def _delete(self, row_id: int) -> bool:
        """Delete a row on disk; one the disk refuses to delete now is remembered (never read
        again, deleted at the next write back)."""
        try:
            self._db.execute("DELETE FROM outbox WHERE id = ?", (row_id,))
        except sqlite3.Error as exc:
            self._undeleted.add(row_id)
            self._degrade(exc)
            return False
        self._undeleted.discard(row_id)
        return True

    def remove(self, row_id: int) -> None:
        """The broker acknowledged it."""
        with self._lock:
            if row_id < 0:
                if self._memory.pop(row_id, None) is not None:
                    return
                moved = self._moved.pop(row_id, None)
                if moved is None:
                    return
                row_id = moved
            self._delete(row_id)

    def pending(self, limit: int | None = None) -> list[Row]:
        """The oldest `limit` rows (all by default), oldest first: those on disk, then those
        held in memory."""
        with self._lock:
            try:
                rows = self._db.execute(
                    # As bytes: a topic that is not UTF-8 is one damaged row (below), not a
                    # read error that would hold back every row after it.
                    "SELECT id, CAST(topic AS BLOB), CAST(payload AS BLOB), qos, retain "
                    "FROM outbox ORDER BY id LIMIT ?",
                    (-1 if limit is None else limit + len(self._undeleted),),
                ).fetchall()
            except sqlite3.Error as exc:
                self._degrade(exc)
                rows = []
            held = [(i, *m) for i, m in sorted(self._memory.items(), reverse=True)]
        rows = [r for r in rows if r[0] not in self._undeleted]  # acked, not yet deleted
        disk = [row for r in rows if (row := self._checked(r)) is not None]
        out = disk + [(int(i), str(t), bytes(p), int(q), bool(r)) for i, t, p, q, r in held]
        return out if limit is None else out[:limit]

    def _checked(self, r: Any) -> Row | None:
        """A row read from disk as (id, topic, payload, qos, retain), or None for a damaged one
        (a topic not UTF-8, with wildcards or longer than MQTT carries, a QoS that MQTT has not):
        deleted and logged, never sent."""
        row_id, raw, payload, qos, retain = r
        try:
            topic = bytes(raw).decode("utf-8")
        except (TypeError, UnicodeDecodeError):
            topic = raw
        ok = (
            is_topic(topic) and isinstance(payload, bytes) and len(payload) <= MAX_PAYLOAD
            and qos in (0, 1, 2) and retain in (0, 1)
        )  # fmt: skip
        if ok:
            return (int(row_id), topic, payload, int(qos), bool(retain))
        self._damage_rate.log(log, logging.ERROR, "outbox %s: dropping damaged row %r (topic %s, "
                              "qos %s)", self.path, row_id, shown(topic), shown(qos))  # fmt: skip
        self._delete(row_id)
        return None

    def current_id(self, row_id: int) -> int:
        """The id a row has now (a message held in memory gets a disk id once written)."""
        with self._lock:
            return self._moved.get(row_id, row_id)

    def _count(self) -> int:
        rows = int(self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])
        return rows - len(self._undeleted)

    def __len__(self) -> int:
        with self._lock:
            return self._count() + len(self._memory)

    def close(self) -> None:
        with self._lock:
            if self._memory:
                log.error(
                    "outbox %s: %d unacknowledged alert(s) held in memory are lost at exit "
                    "(the disk refused them)", self.path, len(self._memory),
                )  # fmt: skip
            if self._undeleted:
                log.warning(
                    "outbox %s: %d acknowledged alert(s) could not be deleted (the disk refused): "
                    "sent again at the next start", self.path, len(self._undeleted),
                )  # fmt: skip
            self._db.close()
