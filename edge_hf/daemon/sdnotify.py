"""systemd's notify protocol in pure Python: one datagram per message to $NOTIFY_SOCKET.

READY=1 once the model is loaded and the cameras are started; STATUS= lines with per-camera
state; WATCHDOG=1 only while frames advance and inference completes; EXTEND_TIMEOUT_USEC while
a TensorRT engine builds; STOPPING=1 on shutdown. Without $NOTIFY_SOCKET every call is a no-op.
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger(__name__)


class Notifier:
    """Sends sd_notify messages; silent outside systemd."""

    def __init__(self, address: str | None = None) -> None:
        address = address if address is not None else os.environ.get("NOTIFY_SOCKET", "")
        self._address: str | None = None
        self._sock: socket.socket | None = None
        if not address:
            return
        # "@name" is the abstract namespace: a leading NUL byte on Linux.
        self._address = "\0" + address[1:] if address.startswith("@") else address
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)

    @property
    def enabled(self) -> bool:
        return self._sock is not None

    def notify(self, *lines: str) -> bool:
        """Send `KEY=value` lines as one datagram; False if not under systemd or it failed."""
        if self._sock is None or self._address is None:
            return False
        try:
            self._sock.sendto("\n".join(lines).encode(), self._address)
        except OSError as exc:
            log.warning("sd_notify failed: %s", exc)
            return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.notify("READY=1", *([f"STATUS={status}"] if status else []))

    def status(self, text: str) -> bool:
        return self.notify(f"STATUS={text}")

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def extend_timeout(self, seconds: float) -> bool:
        return self.notify(f"EXTEND_TIMEOUT_USEC={int(seconds * 1_000_000)}")

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def watchdog_interval_s() -> float | None:
    """Half of systemd's WatchdogSec for this process (its advice), or None when not asked."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        return int(usec) / 2e6
    except ValueError:
        return None
