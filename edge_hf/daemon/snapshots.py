"""Snapshots of falls: an `AlertSink` in front of the others that writes the picture of a fall's
start, prunes old ones, and forwards the event with its snapshot path: a PNG of the people drawn
as skeletons (`snapshots.mode: skeleton`, the default: `edge_hf.daemon.skeleton`, drawn here on
the alert thread) or a JPEG of the camera's picture (`image`).

The detector only decides: it hands the picture over in the event (`FallEvent.evidence`, never
serialised); this sink is the one place that knows about files. Whether a camera keeps snapshots
is decided once, when `app` composes the sinks. A picture that cannot be written (disk or inodes
full, a file where the folder should be) is logged and the alert goes without it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path

import cv2

from edge_hf.daemon.payload import FallEvent, iso
from edge_hf.daemon.sinks import AlertSink, ForwardingSink
from edge_hf.daemon.skeleton import draw, encode_png

log = logging.getLogger(__name__)
JPEG_QUALITY = 85


@dataclass(frozen=True)
class Retention:
    """How many snapshots a camera keeps: files and bytes (the oldest go first)."""

    keep: int
    max_bytes: int


class SnapshotSink(ForwardingSink):
    """Writes each start's picture under `folder` for the cameras in `retention`, then passes the
    event (start and end) on with its `snapshot` path."""

    def __init__(self, inner: AlertSink, folder: Path, retention: dict[str, Retention]) -> None:
        super().__init__(inner)
        self.folder, self.retention = folder, retention
        self._paths: dict[str, str] = {}  # open event id -> its snapshot

    def send(self, event: FallEvent) -> None:
        if event.type == "start" and event.camera in self.retention:
            written = self._write(event)
            path, data = written if written is not None else (None, None)
            if path is not None:
                self._paths[event.event_id] = path
            event = replace(event, snapshot=path, evidence=None, jpeg=data)
        elif event.type == "end" and event.event_id in self._paths:
            event = replace(event, snapshot=self._paths.pop(event.event_id))
        elif event.type == "escalation" and event.event_id in self._paths:
            event = replace(event, snapshot=self._paths[event.event_id])
        self.inner.send(event)

    def _write(self, event: FallEvent) -> tuple[str, bytes] | None:
        """The start's picture encoded once and written: (its path, its PNG or JPEG bytes)."""
        ev = event.evidence
        if ev is None:
            return None
        if ev.skeleton is not None:
            bgr = draw(ev.skeleton, f"{event.camera}  {iso(event.started_at)}  fall")
        elif ev.camera_bgr is not None:
            bgr = ev.camera_bgr
        elif ev.model_rgb is not None:
            bgr = cv2.cvtColor(ev.model_rgb, cv2.COLOR_RGB2BGR)
        else:
            return None
        path = self.folder / f"{event.event_id}.{'png' if ev.skeleton is not None else 'jpg'}"
        kept = self.retention[event.camera]
        try:
            if ev.skeleton is not None:
                data = encode_png(bgr)
            else:
                ok, encoded = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
                if not ok:
                    raise OSError("OpenCV could not encode it")
                data = encoded.tobytes()
            self.folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            prune(self.folder, kept.keep, kept.max_bytes)
        except (OSError, cv2.error) as exc:
            log.error("%s: no snapshot for this fall (%s: %s); the alert goes without it",
                      event.camera, path, exc)  # fmt: skip
            return None
        return str(path), data


def prune(
    folder: Path, keep: int, max_bytes: int, patterns: tuple[str, ...] = ("*.jpg", "*.png")
) -> int:
    """Delete the oldest pictures (files matching `patterns`) in `folder` until at most `keep`
    files and `max_bytes` remain; returns how many went."""
    try:
        stats = [(p.stat(), p) for pattern in patterns for p in folder.glob(pattern)]
    except OSError:
        return 0
    files = sorted(((st.st_mtime, st.st_size, p) for st, p in stats), key=lambda f: f[0])
    total = sum(size for _, size, _ in files)
    removed = 0
    while files and (len(files) > keep or total > max_bytes):
        _, size, path = files.pop(0)
        try:
            path.unlink()
        except OSError:
            continue
        total -= size
        removed += 1
    return removed
