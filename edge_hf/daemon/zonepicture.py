"""`edge-hf zones`: a camera's zones drawn on a frame of its own picture, to check them by eye.

The frame comes from the camera's source (a live camera after a few frames, so its exposure has
settled; a file at `at_s`), or from another recording of that camera; it is cut to the camera's
`crop` first, since zones are 0-1 of the camera's view (`edge_hf.core.zones`).
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from edge_hf.core.errors import UserError
from edge_hf.core.video import cut
from edge_hf.core.zones import draw
from edge_hf.daemon.config import CameraConfig, Config
from edge_hf.daemon.sources import SourceError, make_source, redact

SETTLE_FRAMES = 10  # a live camera's first frames are often dark (auto exposure)


def camera_named(cfg: Config, name: str) -> CameraConfig:
    """The camera called `name` in the config; a one-line UserError naming the others."""
    cam = next((c for c in cfg.cameras if c.name == name), None)
    if cam is None:
        names = ", ".join(c.name for c in cfg.cameras)
        raise UserError(f"--camera {name}: no camera of that name in the config (it has: {names})")
    return cam


def grab_frame(cam: CameraConfig, video: Path | None = None, at_s: float = 0.0) -> np.ndarray:
    """One BGR frame of the camera (or of `video`), cut to its crop."""
    source = str(video) if video is not None else cam.source
    src = make_source(source, realtime=False, open_timeout_s=cam.open_timeout_s,
                      read_timeout_s=cam.stall_timeout_s, decoder=cam.decoder)  # fmt: skip
    frame = None
    try:
        src.open()
        for _ in range(SETTLE_FRAMES if src.live else 1_000_000):
            got = src.read()
            if got is None:
                break
            frame, t = got
            if not src.live and t >= at_s:
                break
    except SourceError as exc:
        raise UserError(f"{redact(str(exc))}: check cameras[].source or give --video") from None
    finally:
        src.release()
    if frame is None:
        raise UserError(f"{src.description} opened but gave no frame")
    if cam.crop is not None:
        x, y, w, h = cam.crop
        fh, fw = frame.shape[:2]
        if x + w > fw or y + h > fh:
            raise UserError(
                f"cameras.{cam.name}.crop [{x}, {y}, {w}, {h}] reaches past the {fw}x{fh} frame"
            )
    return np.ascontiguousarray(cut(frame, cam.crop))


def zones_picture(
    cfg: Config, camera: str, out: Path, video: Path | None = None, at_s: float = 0.0
) -> str:
    """Draw `camera`'s zones on one of its frames into the PNG `out`; what was drawn, in words."""
    cam = camera_named(cfg, camera)
    frame = grab_frame(cam, video, at_s)
    ok, png = cv2.imencode(".png", draw(frame, cam.zone_rules()))
    if not ok:
        raise UserError(f"--out {out}: the picture could not be encoded as PNG")
    out.write_bytes(png.tobytes())
    h, w = frame.shape[:2]
    listed = (
        "; ".join(f"{z.name} ({z.kind}, {len(z.points)} corners)" for z in cam.zones)
        or "none (add cameras[].zones)"
    )
    return f"{out}: camera {cam.name}'s {w}x{h} view with its zones: {listed}"
