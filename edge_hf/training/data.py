"""Clips from a manifest or a folder per class, and the hyperframe dataset that trains on them.

Windows are chosen by time with `frame_indices` and built with `stack_frames`: the same code the
daemon runs. Training draws a random centre inside each clip's labelled segment, shifts it by a
random whole number of sampling steps, and applies one random crop/flip to all T frames.
"""

from __future__ import annotations

import csv
import logging
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from edge_hf.core.contract import PersonCropRule
from edge_hf.core.errors import UserError
from edge_hf.core.hyperframe import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    frame_indices,
    stack_frames,
    time_shuffle,
)
from edge_hf.core.personcrop import BoxTrack, clip_boxes, crop_box, cut, work_size
from edge_hf.core.video import (
    RESIZE,
    Crop,
    DecodedVideo,
    VideoError,
    check_crop,
    decode_video,
)
from edge_hf.training.augment import camera_augment, condition_augment

log = logging.getLogger(__name__)

VIDEO_SUFFIXES = {".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v"}
EVAL_FRACTIONS = (0.25, 0.5, 0.75)


@dataclass(frozen=True)
class Clip:
    """One video and what happens in it: its label over [start_s, end_s] (whole clip if None)."""

    path: Path
    label: str
    fps: float | None = None
    start_s: float | None = None
    end_s: float | None = None
    subject: str | None = None
    crop: Crop | None = None  # x, y, w, h: the view to use of a frame that joins several


def _float_or_none(row: dict[str, str], *keys: str) -> float | None:
    for key in keys:
        value = (row.get(key) or "").strip()
        if value:
            try:
                return float(value)
            except ValueError:
                raise UserError(f"column {key!r} has {value!r}, which is not a number") from None
    return None


def parse_crop(text: str) -> Crop | None:
    """`x,y,w,h` in pixels (empty: no crop); a one-line error otherwise."""
    if not text.strip():
        return None
    try:
        x, y, w, h = (int(v) for v in text.split(","))
    except ValueError:
        raise UserError(f"crop {text!r}: write x,y,w,h in whole pixels") from None
    try:
        return check_crop((x, y, w, h))
    except ValueError as exc:
        raise UserError(f"crop {text!r}: {exc}") from None


def read_manifest(manifest: Path) -> list[Clip]:
    """Clips listed in a CSV with columns `path`, `label` and optionally `fps`, `subject`,
    `start_s`/`end_s` or `fall_start_s`/`fall_end_s` (seconds), `crop` (x,y,w,h)."""
    with manifest.open(newline="") as fh:
        reader = csv.DictReader(fh)
        missing = {"path", "label"} - set(reader.fieldnames or [])
        if missing:
            raise UserError(f"{manifest}: missing column(s) {', '.join(sorted(missing))}")
        clips = []
        for line, row in enumerate(reader, start=2):
            try:
                clips.append(
                    Clip(
                        path=manifest.parent / row["path"],
                        label=row["label"].strip(),
                        fps=_float_or_none(row, "fps"),
                        start_s=_float_or_none(row, "start_s", "fall_start_s"),
                        end_s=_float_or_none(row, "end_s", "fall_end_s"),
                        subject=(row.get("subject") or "").strip() or None,
                        crop=parse_crop(row.get("crop") or ""),
                    )
                )
            except UserError as exc:
                raise UserError(f"{manifest}:{line}: {exc}") from None
    return clips


def scan_folder(root: Path) -> list[Clip]:
    """Clips from a folder per class: `root/<label>/*.mp4`."""
    clips = [
        Clip(path=p, label=p.parent.name)
        for p in sorted(root.glob("*/*"))
        if p.suffix.lower() in VIDEO_SUFFIXES
    ]
    return clips


def load_clips(source: Path) -> list[Clip]:
    """Clips from a manifest CSV, a folder holding `manifest.csv`, or a folder per class."""
    if source.is_file():
        clips = read_manifest(source)
    elif (source / "manifest.csv").is_file():
        clips = read_manifest(source / "manifest.csv")
    elif source.is_dir():
        clips = scan_folder(source)
    else:
        raise UserError(f"{source}: no such file or folder (give a manifest CSV or a data folder)")
    if not clips:
        raise UserError(f"{source}: no clips found (expected manifest.csv or <label>/*.mp4)")
    return clips


@dataclass(frozen=True)
class LoadedClip:
    """A labelled time segment of a clip, with the clip's decoded frames."""

    clip: Clip
    video: DecodedVideo
    fps: float
    lo_s: float
    hi_s: float
    label: str
    boxes: BoxTrack | None = None  # the person boxes at each pose tick (person-crop models)

    @property
    def n_frames(self) -> int:
        return int(self.video.frames.shape[0])


def decode_clips(
    clips: Sequence[Clip],
    size: tuple[int, int],
    cache_dir: Path | None = None,
    max_bad_fraction: float = 0.2,
    progress: bool = False,
    background_label: str | None = None,
    background_gap_s: float = 0.3,
    min_background_s: float = 0.5,
    resize: str = RESIZE,
    person_crop: PersonCropRule | None = None,
    pose_model: Path | None = None,
) -> list[LoadedClip]:
    """Decode every clip once; skip unreadable ones with a warning, fail if too many are bad.

    With `person_crop`, frames are decoded at `work_size(size)` and each clip gets the person
    boxes `pose_model` finds at the rule's pose rate (cached beside the frames): windows are then
    cut around the people (`HyperframeDataset.window_frames`).

    With `background_label`, the part of a clip before its labelled segment (minus a gap) becomes
    a second segment with that label: real fall recordings then also teach what standing and
    walking look like, and the model learns the onset rather than the room.
    """
    loaded, bad = [], []
    iterator: Sequence[Clip] = clips
    if progress:
        from tqdm import tqdm

        iterator = tqdm(clips, desc="decoding", unit="clip", leave=False)
    estimator = None
    if person_crop is not None:
        from edge_hf.core.pose import POSE_MODEL, PoseEstimator

        estimator = PoseEstimator(pose_model or POSE_MODEL)
        size = work_size(size)
    for clip in iterator:
        track = None
        try:
            video = decode_video(clip.path, size, cache_dir, clip.crop, resize)
            if estimator is not None and person_crop is not None:
                track = BoxTrack(person_crop)
                for t, boxes in clip_boxes(
                    clip.path, clip.crop, estimator, person_crop.rate_hz, cache_dir
                ):
                    track.add(t, boxes)
        except (VideoError, OSError) as exc:
            log.warning("skipping %s: %s", clip.path, exc)
            bad.append(clip.path)
            continue
        fps = clip.fps or video.fps
        if not fps or not math.isfinite(fps) or fps <= 0:
            log.warning("skipping %s: unknown frame rate (add an fps column)", clip.path)
            bad.append(clip.path)
            continue
        duration = video.frames.shape[0] / fps
        lo = clip.start_s if clip.start_s is not None else 0.0
        hi = clip.end_s if clip.end_s is not None else duration
        lo, hi = max(0.0, min(lo, duration)), max(0.0, min(hi, duration))
        if hi < lo:
            lo, hi = hi, lo
        loaded.append(LoadedClip(clip, video, fps, lo, hi, clip.label, track))
        before = lo - background_gap_s
        if background_label and clip.label != background_label and before >= min_background_s:
            loaded.append(LoadedClip(clip, video, fps, 0.0, before, background_label, track))
    if len(bad) > max_bad_fraction * max(1, len(clips)):
        raise UserError(
            f"{len(bad)} of {len(clips)} videos could not be read (first: {bad[0]}); "
            "check the paths and codecs"
        )
    if not loaded:
        raise UserError("no readable video among the clips")
    return loaded


@dataclass(frozen=True)
class WindowSpec:
    """How windows are cut: T frames every `interval_s`, `volumes` consecutive hyperframes."""

    window: int
    interval_s: float
    size: tuple[int, int]
    volumes: int = 1
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    resize: str = RESIZE  # how frames are brought to `size` (edge_hf.core.video.RESIZES)
    # Person-centred windows (edge_hf.core.personcrop): the clips' frames are at work_size(size)
    # and each window is cut around the people, then brought to `size`.
    person_crop: PersonCropRule | None = None

    def volume_centres(self, centre_s: float) -> list[float]:
        """Centres of the consecutive hyperframes of a hyper-volume, oldest first."""
        span = self.window * self.interval_s
        return [centre_s + (v - (self.volumes - 1) / 2) * span for v in range(self.volumes)]


def _crop_box(
    rng: random.Random, h: int, w: int, scale: tuple[float, float]
) -> tuple[int, int, int, int]:
    area = rng.uniform(*scale)
    # Aspect jitter only as far as the crop still fits in the frame (none at area 1).
    lo, hi = max(math.log(3 / 4), math.log(area)), min(math.log(4 / 3), -math.log(area))
    aspect = math.exp(rng.uniform(lo, hi))
    ch = min(h, max(8, round(h * math.sqrt(area / aspect))))
    cw = min(w, max(8, round(w * math.sqrt(area * aspect))))
    y, x = rng.randint(0, h - ch), rng.randint(0, w - cw)
    return y, x, ch, cw


class HyperframeDataset(Dataset[tuple[torch.Tensor, int, int]]):
    """(hyperframe, class index, clip index) samples from decoded clips.

    train=True: `samples_per_clip` random centres per clip and epoch, ±`max_offset_steps`
    temporal jitter, one random crop/flip for all frames, and for a label in `reverse_pairs`
    half of the samples played backwards under the paired label. train=False: the centres at
    1/4, 1/2 and 3/4 of each clip's segment, no augmentation (`EVAL_FRACTIONS`).
    """

    def __init__(
        self,
        clips: Sequence[LoadedClip],
        classes: Sequence[str],
        spec: WindowSpec,
        train: bool,
        samples_per_clip: int = 4,
        max_offset_steps: int = 2,
        crop_scale: tuple[float, float] = (0.7, 1.0),
        hflip: bool = True,
        shuffle_time: bool = False,
        seed: int = 0,
        reverse_pairs: dict[str, str] | None = None,
        camera_aug: float = 0.0,
        condition_aug: float = 0.0,
    ) -> None:
        self.clips = list(clips)
        self.classes = list(classes)
        unknown = {c.label for c in self.clips} - set(self.classes)
        if unknown:
            raise UserError(f"labels {sorted(unknown)} are not among the classes {self.classes}")
        self.reverse_pairs = reverse_pairs or {}
        unknown = set(self.reverse_pairs) - set(self.classes)
        if unknown:
            raise UserError(
                f"--reverse-pairs: {sorted(unknown)} are not among the classes {self.classes}"
            )
        self.spec = spec
        self.train = train
        self.samples_per_clip = samples_per_clip
        self.max_offset_steps = max_offset_steps
        self.crop_scale = crop_scale
        self.hflip = hflip
        self.shuffle_time = shuffle_time
        self.seed = seed
        self.camera_aug = camera_aug
        self.condition_aug = condition_aug
        self.epoch = 0
        self.hard: list[tuple[int, float]] = []  # (clip index, centre s) the last sample slots use

    def __len__(self) -> int:
        per_clip = self.samples_per_clip if self.train else len(EVAL_FRACTIONS)
        return len(self.clips) * per_clip

    def set_epoch(self, epoch: int) -> None:
        """Make the random draws of each epoch differ yet stay reproducible."""
        self.epoch = epoch

    def label_of(self, clip_index: int) -> int:
        return self.classes.index(self.clips[clip_index].label)

    def set_hard(self, windows: Sequence[tuple[int, float]]) -> None:
        """From now on the last len(windows) sample slots of an epoch are these windows (with the
        usual jitter and augmentation) instead of random ones; the epoch keeps its length."""
        if len(windows) >= len(self):
            raise ValueError(f"{len(windows)} hard windows leave no random sample of {len(self)}")
        self.hard = list(windows)

    def grid(self, clip_index: int, stride_s: float) -> list[float]:
        """Window centres every `stride_s` over a clip's segment."""
        lc = self.clips[clip_index]
        n = max(1, int((lc.hi_s - lc.lo_s) / stride_s) + 1)
        return [lc.lo_s + i * stride_s for i in range(n)]

    def plain(self, clip_index: int, centre_s: float) -> torch.Tensor:
        """The window centred at `centre_s`, as the daemon would see it (no augmentation)."""
        return self._stack(self.window_frames(clip_index, centre_s))

    def window_frames(self, clip_index: int, centre_s: float) -> list[np.ndarray]:
        """The frames of the (hyper-volume of) window(s) centred at `centre_s`, oldest first."""
        lc, spec = self.clips[clip_index], self.spec
        frames: list[np.ndarray] = []
        centres = spec.volume_centres(centre_s)
        for c in centres:
            idx = frame_indices(lc.n_frames, lc.fps, c, spec.window, spec.interval_s)
            frames.extend(lc.video.frames[i] for i in idx)
        if spec.person_crop is None:
            return frames
        # One crop for the whole window, around the people seen up to its newest sample (the
        # sample's time, as the daemon's tick: the pose ticks it sees are the daemon's).
        newest = centres[-1] + (spec.window // 2) * spec.interval_s
        boxes = lc.boxes.boxes_for(newest) if lc.boxes is not None else []
        crop = crop_box(boxes, frames[0].shape[:2], spec.person_crop)
        return cut(frames, crop, spec.size, spec.resize)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int, int]:
        if self.train:
            clip_index = index % len(self.clips)
            rng = random.Random(hash((self.seed, self.epoch, index)))
        else:
            clip_index, k = divmod(index, len(EVAL_FRACTIONS))
            rng = random.Random(hash((self.seed, index)))
        hard_from = len(self) - len(self.hard)
        if self.train and index >= hard_from:
            clip_index, centre = self.hard[index - hard_from]
        lc = self.clips[clip_index]
        if self.train:
            if index < hard_from:
                centre = rng.uniform(lc.lo_s, lc.hi_s)
            centre += (
                rng.randint(-self.max_offset_steps, self.max_offset_steps) * self.spec.interval_s
            )
        else:
            centre = lc.lo_s + EVAL_FRACTIONS[k] * (lc.hi_s - lc.lo_s)
        frames = self.window_frames(clip_index, centre)
        label = lc.label
        if self.train:
            frames = self._augment(frames, rng)
            if label in self.reverse_pairs and rng.random() < 0.5:
                frames, label = frames[::-1], self.reverse_pairs[label]  # played backwards
        x = self._stack(frames)
        if self.shuffle_time:
            g = torch.Generator().manual_seed(rng.getrandbits(62))
            x = time_shuffle(x.unsqueeze(0), g)[0]
        return x, self.classes.index(label), clip_index

    def _stack(self, frames: list[np.ndarray]) -> torch.Tensor:
        t = self.spec.window
        blocks = [
            stack_frames(frames[v * t : (v + 1) * t], self.spec.mean, self.spec.std)
            for v in range(self.spec.volumes)
        ]
        return blocks[0] if len(blocks) == 1 else torch.cat(blocks, dim=0)

    def _augment(self, frames: list[np.ndarray], rng: random.Random) -> list[np.ndarray]:
        """One crop box and one flip decision for every frame of the sample."""
        h, w = frames[0].shape[:2]
        y, x, ch, cw = _crop_box(rng, h, w, self.crop_scale)
        flip = self.hflip and rng.random() < 0.5
        out = []
        for f in frames:
            g = cv2.resize(f[y : y + ch, x : x + cw], (w, h), interpolation=cv2.INTER_LINEAR)
            out.append(np.ascontiguousarray(g[:, ::-1]) if flip else g)
        if self.camera_aug > 0:
            out = camera_augment(out, rng, self.camera_aug)
        if self.condition_aug > 0:
            out = condition_augment(out, rng, self.condition_aug)
        return out
