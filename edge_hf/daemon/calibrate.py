"""`edge-hf calibrate`: a per-camera threshold under which normal activity at the site raises
no fall event, with a stated margin.

The camera's own pipeline (source, crop, model, detection settings) runs over a recording of
normal activity at the site (or the live camera for some minutes), and the camera's detector is fed
the recorded window scores again at one threshold after another, from the top down, until one
raises an event: any threshold above that one (the *quiet point*) keeps this recording silent.
With a two-class model that is the smoothed peak (for `k_of_n`, the highest k-th largest score of
any n consecutive windows); with a three-state model and `confirm_s` it can be lower, since a
descent after which the person did not stay down raises nothing. The quiet point plus the margin
gives `cameras[].threshold`, never below the model's own operating point unless asked: a recording
of normal activity shows where the site would false-alarm, not how its falls would score.
"""

from __future__ import annotations

import logging
import math
import os
import re
import stat
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edge_hf.core.errors import UserError
from edge_hf.core.video import VideoError
from edge_hf.core.zones import Zones
from edge_hf.daemon.app import build_pipeline, operating_point
from edge_hf.daemon.config import Config, DetectionConfig, ensure_state_dir, load_config
from edge_hf.daemon.events import FallDetector
from edge_hf.daemon.pipeline import Pipeline
from edge_hf.daemon.replay import replay_files, video_source
from edge_hf.daemon.scores import smoothed_level
from edge_hf.daemon.sinks import RecordingSink
from edge_hf.daemon.sources import SourceError

log = logging.getLogger(__name__)
MAX_THRESHOLD = 0.99
ZONE_PAD = 0.05  # around the lying positions, in 0-1 of the view
ZONE_LINK = 0.15  # lying positions this close (0-1 of the view) are one place
ZONE_MIN_TICKS = 3  # fewer readings at a place than this: a glitch, no zone


@dataclass(frozen=True)
class ZoneSuggestion:
    """An `ignore` zone around a place where people lay during normal activity."""

    name: str
    points: tuple[tuple[float, float], ...]
    pose_ticks: int  # pose ticks that saw someone down there
    windows: int  # classifier windows at the threshold with someone found there
    t0: float
    t1: float

    def why(self) -> str:
        what = f"{self.pose_ticks} pose ticks"
        if self.windows:
            what += f" and {self.windows} classifier windows at the threshold"
        return (
            f"people lay here during normal activity: {what} between {self.t0:.1f} and "
            f"{self.t1:.1f} s"
        )

    def yaml(self) -> str:
        """The zone as a list item of `cameras[].zones` (to paste under `zones:`)."""
        pts = ", ".join(f"[{x:.2f}, {y:.2f}]" for x, y in self.points)
        return f"  - name: {self.name}\n    kind: ignore\n    points: [{pts}]"


def zones_text(camera: str, config: str, suggestions: Sequence[ZoneSuggestion]) -> str:
    """What calibrate prints for suggested zones: where to paste them, and the YAML."""
    if not suggestions:
        return ""
    lines = [
        f"suggested ignore zone(s) for camera {camera}, to paste under its `zones:` (check them "
        f"with: edge-hf zones --config {config} --camera {camera} --out zones.png):",
        "zones:",
    ]
    for z in suggestions:
        lines += [f"  # {z.why()}", z.yaml()]
    return "\n".join(lines)


def suggest_zones(
    lying: Sequence[tuple[float, tuple[float, float], str]], zones: Zones
) -> list[ZoneSuggestion]:
    """`ignore` zones around the places where people were read as lying (`FallDetector.lying_at`):
    positions within ZONE_LINK of one another are one place, each with at least ZONE_MIN_TICKS
    readings gets the padded box around its positions; positions that the camera's zones already
    refuse are left out."""
    todo = [r for r in lying if zones.refusal(r[1]) is None]
    places: list[list[tuple[float, tuple[float, float], str]]] = []
    while todo:
        place, todo = [todo[0]], todo[1:]
        grew = True
        while grew:
            near = [r for r in todo if any(_close(r[1], q[1]) for q in place)]
            todo = [r for r in todo if not any(_close(r[1], q[1]) for q in place)]
            place += near
            grew = bool(near)
        places.append(place)
    out: list[ZoneSuggestion] = []
    for place in sorted(places, key=len, reverse=True):
        ticks = len({t for t, _, why in place if why == "pose"})
        windows = len({t for t, _, why in place if why == "classifier"})
        if ticks + windows < ZONE_MIN_TICKS:
            continue
        xs, ys = [p[0] for _, p, _ in place], [p[1] for _, p, _ in place]
        x0, y0 = max(0.0, min(xs) - ZONE_PAD), max(0.0, min(ys) - ZONE_PAD)
        x1, y1 = min(1.0, max(xs) + ZONE_PAD), min(1.0, max(ys) + ZONE_PAD)
        times = [t for t, _, _ in place]
        out.append(ZoneSuggestion(f"lying-{len(out) + 1}", ((x0, y0), (x1, y0), (x1, y1), (x0, y1)),
                                  ticks, windows, min(times), max(times)))  # fmt: skip
    return out


def _close(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return math.dist(a, b) <= ZONE_LINK


@dataclass(frozen=True)
class Calibration:
    """The score distribution of normal activity and the threshold it implies."""

    camera: str
    windows: int
    p50: float
    p90: float
    p99: float
    max: float
    trigger: float  # the smoothed score normal activity reached
    # The highest threshold that raised an event here (any threshold above is quiet); None: none
    # at or above floor - margin did.
    quiet: float | None
    margin: float
    floor: float  # the model's operating point (the threshold is not set below it), or 0
    threshold: float
    events_at_current: int  # fall events the current threshold raised on this recording
    current: float  # the threshold the camera runs at now (its own, the config's or the model's)
    # `ignore` zones where people lay during this normal activity (the person stage on; else none)
    zones: tuple[ZoneSuggestion, ...] = ()

    def report(self) -> str:
        return (
            f"{self.camera}: {self.windows} windows of normal activity; fall probability p50 "
            f"{self.p50:.3f}, p90 {self.p90:.3f}, p99 {self.p99:.3f}, max {self.max:.3f}; "
            f"smoothed peak {self.trigger:.3f}; {self._quiet()}; threshold "
            f"{self.current:g} raised {self.events_at_current} event(s); suggested threshold "
            f"{self.threshold:.3f} ({self._rule()})" + self._warning()
        )

    def _quiet(self) -> str:
        if self.quiet is None:
            return f"no event at any threshold from {self.floor - self.margin:.3f} up"
        return f"quiet above {self.quiet:.3f}"

    def _rule(self) -> str:
        if self.quiet is not None and self.quiet + self.margin >= self.floor:
            return f"quiet point + margin {self.margin:g}"
        return f"the model's operating point; quiet point + margin {self.margin:g} is lower"

    def _warning(self) -> str:
        if self.quiet is None or self.quiet + self.margin <= MAX_THRESHOLD - 0.05:
            return ""
        return (
            f". WARNING: normal activity here scores like a fall ({self.quiet:.3f}): at "
            f"{self.threshold:.3f} falls that score lower are missed; check the camera's view "
            "and crop, or use a model trained for such scenes"
        )


def smoothed_levels(scores: Sequence[float], detection: DetectionConfig) -> list[float]:
    """Per window, the highest threshold at which the detector's smoothing is met there."""
    n = detection.n
    return [
        smoothed_level(scores[max(0, i - n + 1) : i + 1], detection) for i in range(len(scores))
    ]


def smoothed_peak(scores: Sequence[float], detection: DetectionConfig) -> float:
    """The highest value the detector's smoothing reaches over `scores` (0 if too few)."""
    return max(smoothed_levels(scores, detection), default=0.0)


Trace = Sequence[tuple[float, float, "float | None"]]  # (t, fall probability, down probability)


def quiet_point(trace: Trace, detector: FallDetector, lowest: float = 0.0) -> float | None:
    """The highest threshold at which a detector set up like `detector` raises an event over
    `trace` (what it was fed), scanned from the top down to `lowest`; None if none does. Any
    threshold above the value returned keeps the recording silent."""
    scores = [s for _, s, _ in trace]
    # The start condition changes only at these values (rounded down: still met at each).
    levels = {math.floor(v * 1e4) / 1e4 for v in smoothed_levels(scores, detector.cfg)}
    cfg = detector.cfg.model_copy(update={"snapshot": False})
    events_log = logging.getLogger(FallDetector.__module__)
    level = events_log.level
    events_log.setLevel(max(level, logging.WARNING))  # not a line per start per try

    def raises(threshold: float) -> bool:
        probe = FallDetector(detector.camera, "calibrate", cfg, threshold, detector.model)
        return any(probe.update(s, t, None, down) for t, s, down in trace)

    # Coarse to fine (a long recording has thousands of levels, each try replays all of it): the
    # highest 0.01-wide bin whose lowest level raises an event, the same within it at 0.001, then
    # its levels one by one. Exact when a threshold raises an event wherever a higher one does;
    # not quite always so (a lower threshold may start a candidate earlier that is then not
    # confirmed, and miss a later descent), hence the test against the plain scan.
    candidates = [v for v in levels if v >= lowest and v > 0]
    try:
        for step in (0.01, 0.001):
            bins: dict[int, list[float]] = {}
            for v in candidates:
                bins.setdefault(math.floor(v / step + 1e-9), []).append(v)
            hit = next((b for b in sorted(bins, reverse=True) if raises(min(bins[b]))), None)
            if hit is None:
                return None
            candidates = bins[hit]
        return next((v for v in sorted(candidates, reverse=True) if raises(v)), None)
    finally:
        events_log.setLevel(level)


def _one_camera(cfg: Config, camera: str, video: Path | None) -> Config:
    cams = [c for c in cfg.cameras if c.name == camera]
    if not cams:
        names = ", ".join(c.name for c in cfg.cameras)
        raise UserError(f"--camera {camera!r}: no such camera in the config (cameras: {names})")
    cam = cams[0].model_copy(update={"enabled": True})
    if video is not None:
        cam = cam.model_copy(update={"source": video_source(video), "loop": False})
    return cfg.model_copy(update={"cameras": [cam]})


def suggested_threshold(quiet_points: Iterable[float | None], floor: float, margin: float) -> float:
    """The threshold that keeps every recording silent with `margin` to spare: the highest quiet
    point + margin (capped at MAX_THRESHOLD), never below `floor`."""
    highest = [q + margin for q in quiet_points if q is not None]
    return min(MAX_THRESHOLD, max([floor, *highest]))


def _watch(cfg: Config, camera: str, video: Path | None, minutes: float) -> Pipeline:
    """The camera's pipeline run over one recording (or the live camera for `minutes`), its
    detector keeping what it was fed."""
    one = _one_camera(cfg, camera, video)
    ensure_state_dir(one)
    pipeline = build_pipeline(
        one, RecordingSink(), config_name="calibrate", score_history=None, live=video is None
    )
    pipeline.cameras[0].detector.trace = []
    pipeline.cameras[0].detector.lying_at = []
    if video is not None:
        try:
            replay_files(pipeline)
        except (SourceError, VideoError) as exc:
            raise UserError(f"cameras.{camera}: {exc}") from None
        return pipeline
    if not 0 < minutes <= 24 * 60:
        raise UserError(f"--minutes {minutes:g}: give 0 < minutes <= 1440 (or --video FILE)")
    timer = threading.Timer(minutes * 60, pipeline.stop.set)
    timer.start()
    try:
        pipeline.start()
        pipeline.run(drain_s=2.0)
    finally:
        timer.cancel()
    return pipeline


def calibrate(
    cfg: Config,
    camera: str,
    videos: Sequence[Path],
    minutes: float,
    margin: float,
    allow_lower: bool = False,
) -> Calibration:
    """Run the camera's pipeline over each recording of normal activity (or the live camera if
    there are none) and derive its threshold: silent on every one of them (each from its own
    start), not below the model's operating point unless `allow_lower`."""
    if not 0.0 <= margin < 0.5:
        raise UserError(f"--margin {margin:g}: a probability margin in [0, 0.5)")
    for video in videos:
        _one_camera(cfg, camera, video)  # every file checked before the first is replayed
    runs = [_watch(cfg, camera, v, 0.0) for v in videos] or [_watch(cfg, camera, None, minutes)]
    cams = [run.cameras[0] for run in runs]
    scores = [s for cam in cams for s in cam.scores]
    detection = cfg.detection_for(cams[0].cfg)
    if len(scores) < detection.n:
        raise UserError(f"{camera}: only {len(scores)} windows came out; give a longer recording")
    floor = 0.0
    if not allow_lower:
        floor = operating_point(cfg, runs[0].classifier.contract, detection)[0]
    quiet = [quiet_point(cam.detector.trace or [], cam.detector, floor - margin) for cam in cams]
    q = np.percentile(scores, [50, 90, 99])
    lying = [r for cam in cams for r in (cam.detector.lying_at or [])]
    return Calibration(
        camera=camera,
        windows=len(scores),
        p50=float(q[0]),
        p90=float(q[1]),
        p99=float(q[2]),
        max=float(max(scores)),
        trigger=max(smoothed_peak(list(cam.scores), detection) for cam in cams),
        quiet=max((v for v in quiet if v is not None), default=None),
        margin=margin,
        floor=floor,
        threshold=suggested_threshold(quiet, floor, margin),
        events_at_current=sum(cam.detector.counts.start for cam in cams),
        current=cams[0].detector.threshold,
        zones=tuple(suggest_zones(lying, cams[0].detector.seen.zones)),
    )


def write_threshold(path: Path, camera: str, threshold: float) -> Path:
    """Set `threshold:` in the camera's block of a block-style YAML list; keeps a `.bak` copy.

    Only the one line changes (comments and layout stay, the line's own comment too; a
    `threshold:` anywhere in the camera's block, before or after `name:`, is replaced); a camera
    written in flow style (`- {name: a, ...}`) is refused with the line to add by hand. A
    symbolic link is written through (the file it points to changes, the `.bak` beside that
    file), and both files get the config's owner and mode (a 0640 config holds camera
    passwords). Both are written whole or not at all (temporary file, fsync, rename): a full
    disk leaves the config as it was.
    """
    target = path.resolve()
    like = target.stat()
    text = target.read_text()
    lines = text.splitlines(keepends=True)
    name_re = re.compile(rf"^(\s*)(-\s+)?name:\s*['\"]?{re.escape(camera)}['\"]?\s*(#.*)?$")
    for i, line in enumerate(lines):
        m = name_re.match(line.rstrip("\n"))
        if not m:
            continue
        indent = len(m.group(1)) + (len(m.group(2)) if m.group(2) else 0)
        first = i if m.group(2) else _item_start(lines, i, indent)
        end = i + 1
        while end < len(lines) and (
            not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) >= indent
        ):
            end += 1
        new = f"threshold: {threshold:.3f}"
        for j in range(first, end):
            key = lines[j].lstrip(" -") if j == first else lines[j][indent:]
            if key.startswith("threshold:") and (j == first or lines[j][:indent].strip() == ""):
                comment = re.search(r"\s+#.*$", key.rstrip("\n"))  # the value is a number: no '#'
                kept = comment.group() if comment else ""
                lines[j] = f"{lines[j][: len(lines[j]) - len(key)]}{new}{kept}\n"
                break
        else:
            lines.insert(i + 1, f"{' ' * indent}{new}\n")
        _replace_atomically(target.with_suffix(target.suffix + ".bak"), text, like)
        _replace_atomically(target, "".join(lines), like, check=load_config)
        return path
    raise UserError(
        f"{path}: no block-style camera entry 'name: {camera}' to write into; add "
        f"'threshold: {threshold:.3f}' to that camera by hand"
    )


def _item_start(lines: list[str], i: int, indent: int) -> int:
    """The line of the `- ` that opens the list item holding line `i` (its keys at `indent`)."""
    for j in range(i - 1, -1, -1):
        stripped = lines[j].lstrip()
        if stripped.startswith("- ") and len(lines[j]) - len(stripped) + 2 == indent:
            return j
        if stripped and len(lines[j]) - len(stripped) < indent - 2:
            break
    return i


def _replace_atomically(
    path: Path, text: str, like: os.stat_result, check: Callable[[Path], object] | None = None
) -> Path:
    """`path` holds `text` afterwards, with the owner and mode of `like`; or (disk full, `check`
    refusing it, an owner this user cannot give) is left as it was."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.unlink(missing_ok=True)
        # Created private, then given the config's owner and mode before it takes its place.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            _keep_owner_and_mode(fd, like, path)
            os.fsync(fd)
        if tmp.stat().st_size != len(text.encode()):
            raise OSError(f"only {tmp.stat().st_size} of {len(text.encode())} bytes written")
        if check is not None:
            check(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"{path}: cannot write ({exc}); the file is unchanged") from None
    except Exception:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _keep_owner_and_mode(fd: int, like: os.stat_result, path: Path) -> None:
    """Give the open file `fd` the owner and mode of `like` (the config it replaces)."""
    st = os.fstat(fd)
    if (st.st_uid, st.st_gid) != (like.st_uid, like.st_gid):
        try:
            os.fchown(fd, like.st_uid, like.st_gid)
        except PermissionError:
            raise UserError(
                f"{path}: cannot give the new file its owner {like.st_uid}:{like.st_gid} as this "
                "user; run calibrate --write as root or as the owner; the file is unchanged"
            ) from None
    os.fchmod(fd, stat.S_IMODE(like.st_mode))
