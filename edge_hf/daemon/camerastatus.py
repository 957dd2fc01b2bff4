"""A camera's status as its users see it (MQTT `<camera>/status`, the stats, systemd's STATUS=),
and the line the log says when it changes.

- `online`: frames arrive and are classified;
- `slow`: the camera delivers fewer frames than the model samples (windows repeat frames);
- `overloaded`: the machine, not the camera, falls behind (`LoadWatch`): windows are skipped;
- `blind`: the picture has been black or frozen for `blind_after_s`;
- `degraded`: the person stage fails on this camera; the classifier decides alone;
- `stalled`: no frame for a while, the reader is being restarted; `offline`: the camera is gone.
"""

from __future__ import annotations

import logging

from edge_hf.daemon.capture import CameraStats

log = logging.getLogger(__name__)

TROUBLE = ("slow", "overloaded", "blind", "degraded")  # statuses whose end is said too


def camera_status(
    st: CameraStats,
    interval_s: float,
    blind_after_s: float | None,
    now: float,
    overloaded: bool,
    degraded: bool,
) -> str | None:
    """The status of a camera whose capture thread reports `st` at monotonic time `now`,
    sampled every `interval_s`, with the machine `overloaded` and its person stage `degraded`;
    None while it is still starting (no status yet)."""
    if st.state == "starting":
        return None
    status = {"online": "online", "stalled": "stalled"}.get(st.state, "offline")
    since = st.blind_since
    if status == "online" and since is not None and blind_after_s and now - since >= blind_after_s:
        status = "blind"
    if status == "online" and st.slow(interval_s):
        status = "slow"
    if status in ("online", "slow") and overloaded:
        status = "overloaded"  # the machine, not the camera (a starved reader is slow)
    if status == "online" and degraded:
        status = "degraded"
    return status


def say_status(
    name: str, status: str, was: str, st: CameraStats | None, interval_s: float, now: float
) -> None:
    """Log camera `name`'s change from `was` to `status`: what is wrong and what to do, or that
    it is well again."""
    if status == "slow" and st is not None and st.frame_gap_s:
        log.warning(
            "%s: the camera delivers %.1f frames/s but the model samples every %.0f ms: "
            "windows repeat frames and falls can be missed; raise the camera's frame rate",
            name, 1.0 / st.frame_gap_s, interval_s * 1000,
        )  # fmt: skip
    elif status == "blind" and st is not None:
        log.warning(
            "%s: the picture has been %s for %.0f s (lens covered? sensor or stream dead?): "
            "no fall can be seen",
            name, st.blind_reason, now - (st.blind_since or 0),
        )  # fmt: skip
    elif status == "degraded":
        log.warning(
            "%s: degraded: the person stage fails on this camera, the classifier decides "
            "alone (see the person stage's error above)", name,
        )  # fmt: skip
    elif was in TROUBLE:
        log.info("%s: camera %s again (was %s)", name, status, was)
