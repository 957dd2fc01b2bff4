"""The daemon's state_dir: the files it keeps there, and the checks that it is safe (no other
user can write to it, no links planted in place of its files) and writable."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

from edge_hf.core.errors import UserError
from edge_hf.daemon.config.schema import Config

# The name its lines carried before config became a package (a journal filter may use it).
log = logging.getLogger("edge_hf.daemon.config")

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)  # errnos of a disk that is full, not of a mistake


class StateFiles:
    """What the daemon keeps in `state_dir`, by name: the one table every part uses."""

    OUTBOX = "outbox.sqlite3"
    LOCK = "edge-hf.lock"
    SNAPSHOTS = "snapshots"
    TRT_CACHE = "trt-cache"
    WRITE_TEST = ".write-test"
    OPEN_EVENTS = "open-events.json"
    ANNOUNCED = "announced.json"
    CLIPS = "clips"


# None of these may be a link planted by someone else (with SQLite's and the atomic writes' side
# files).
STATE_ENTRIES = (
    StateFiles.OUTBOX, *(f"{StateFiles.OUTBOX}-{x}" for x in ("wal", "shm", "journal")),
    StateFiles.LOCK, StateFiles.SNAPSHOTS, StateFiles.TRT_CACHE, StateFiles.WRITE_TEST,
    StateFiles.OPEN_EVENTS, f"{StateFiles.OPEN_EVENTS}.tmp",
    StateFiles.ANNOUNCED, f"{StateFiles.ANNOUNCED}.tmp", StateFiles.CLIPS,
)  # fmt: skip


def _refuse_unsafe_state(state: Path) -> None:
    """A state_dir others can write to, or holding links where the daemon's files go: refused."""
    mode = state.stat().st_mode
    if mode & 0o022:
        raise UserError(
            f"state_dir: {state} is writable by other users (mode {mode & 0o7777:o}); use a "
            "folder only the service user can write, e.g. /var/lib/edge-hf (chmod 700)"
        )
    for name in STATE_ENTRIES:
        if (state / name).is_symlink():
            raise UserError(
                f"state_dir: {state / name} is a symbolic link; edge-hf does not follow links in "
                "its state_dir: remove it"
            )


def ensure_state_dir(cfg: Config) -> None:
    """Create `state_dir` (outbox, snapshots, TensorRT cache) or fail in one line.

    The daemon (often root) writes there, so a folder other users can write to is refused (they
    could plant `outbox.sqlite3 -> /etc/shadow`), and so is a link in place of any of its files.
    `state_dir` itself may be a link the administrator made.
    """
    state = cfg.state_dir
    try:
        state.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"state_dir: cannot create {state} ({exc.strerror}); set state_dir to a writable "
            "folder or run as the service user"
        ) from None
    _refuse_unsafe_state(state)
    try:
        probe = state / StateFiles.WRITE_TEST
        probe.touch()
        probe.unlink()
    except OSError as exc:
        if exc.errno in DISK_FULL:  # not a mistake in the set-up: the daemon runs degraded
            log.error(
                "state_dir: %s is full (%s): cameras are watched and alerts sent, but new "
                "alerts are kept in memory until it has room; free some space", state,
                exc.strerror,
            )  # fmt: skip
            return
        raise UserError(
            f"state_dir: cannot write to {state} ({exc.strerror}); set state_dir to a "
            "writable folder or run as the service user"
        ) from None


def check_state_dir(cfg: Config) -> None:
    """What `ensure_state_dir` would refuse, found without creating or writing anything (for
    `check`): an unsafe folder, one this user cannot write, or one that cannot be created."""
    state = cfg.state_dir
    if state.exists():
        if not state.is_dir():
            raise UserError(f"state_dir: {state} is not a folder; point state_dir at a folder")
        _refuse_unsafe_state(state)
        target = state
    else:
        target = next((p for p in state.parents if p.exists()), Path("/"))
    if not os.access(target, os.W_OK | os.X_OK):
        what = "write to" if target == state else f"create {state} in"
        raise UserError(
            f"state_dir: this user cannot {what} {target}; set state_dir to a writable folder "
            "or run check as the service user"
        )
